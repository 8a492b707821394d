#pragma once

// The time models of `actorps simulate`: how long a message takes
// on the simulated network and how long a worker's step computes. Pure
// arithmetic on virtual time (nanoseconds), no actors: the simulator's link
// proxies (cluster/sim/sim_link.hpp) ask these.

#include <cstdint>
#include <string>
#include <vector>

namespace actorps {

/// Virtual time in nanoseconds since the simulation started.
using sim_time = uint64_t;

/// A network: every node (worker or ps) has one full-duplex link of
/// `bits_per_second` to a non-blocking switch; a message also takes
/// `latency_ns` once.
struct network_spec {
  double bits_per_second = 10e9;
  sim_time latency_ns = 50'000;
};

/// Parses "10gbit,50us": a rate (a number with bit, kbit, mbit, gbit or
/// tbit; SI prefixes, per second) and optionally a latency (a number with
/// ns, us, ms or s).
/// @throws input_error quoting `text` and what is wrong (an unknown unit, a
///         rate of 0, a negative number, trailing text).
network_spec parse_network(const std::string& text);

/// Renders a spec as parse_network reads it.
std::string to_string(const network_spec& net);

/// Which links a message occupies: node ids are workers 0..W-1, then ps
/// W..W+P-1.
struct network_model {
  explicit network_model(network_spec spec, uint32_t nodes);

  /// When a message of `bytes` sent by node `from` at `now` has arrived at
  /// node `to`. The model reserves the sender's outgoing and the receiver's
  /// incoming link for the transmission time together (bytes * 8 / rate),
  /// from the first moment both are free (messages on a link go one after
  /// the other, first come first served), and adds the latency once:
  ///   start = max(now, out_free[from], in_free[to])
  ///   out_free[from] = in_free[to] = start + bytes * 8 / rate
  ///   arrival = start + bytes * 8 / rate + latency.
  /// A simplification of a switched network (no cut-through pipelining of
  /// a message across both links, no TCP slow start), after the "max-min
  /// bottleneck link" model of network simulators such as SimGrid's
  /// flow-level models (Velho et al., ACM TOMACS 2013), with one flow at a
  /// time per link.
  sim_time send(uint32_t from, uint32_t to, uint64_t bytes, sim_time now);

  /// Transmission time of `bytes` on one link, in ns (rounded up).
  sim_time transmission(uint64_t bytes) const;

  /// Bytes each node has sent and received so far.
  const std::vector<uint64_t>& bytes_out() const {
    return bytes_out_;
  }
  const std::vector<uint64_t>& bytes_in() const {
    return bytes_in_;
  }

  const network_spec& spec() const {
    return spec_;
  }

private:
  network_spec spec_;
  std::vector<sim_time> out_free_;
  std::vector<sim_time> in_free_;
  std::vector<uint64_t> bytes_out_;
  std::vector<uint64_t> bytes_in_;
};

/// How long a worker's step computes (forward and backward on one batch).
struct compute_spec {
  enum class kind {
    /// Timed on this machine: the median of a few real steps of the model.
    measured,
    /// `mean_ns` every step.
    constant,
    /// Normally distributed around mean_ns with sd_ns (cut at 0).
    normal,
  };
  kind type = kind::measured;
  sim_time mean_ns = 0;
  sim_time sd_ns = 0;
  /// Stragglers: this share of the workers (chosen by the seed) computes
  /// `straggler_factor` times as long.
  double straggler_share = 0;
  double straggler_factor = 1;
};

/// Parses "measured", "const:2.5ms" or "normal:2ms,0.5ms".
/// @throws input_error quoting `text`.
compute_spec parse_compute(const std::string& text);

/// Parses "5%:3x" (5% of the workers 3 times slower) into `spec`.
/// @throws input_error quoting `text` (a share outside [0, 100%], a factor
///         below 1).
void parse_stragglers(const std::string& text, compute_spec& spec);

/// The compute time of every step, from a spec whose mean is known (for
/// `measured`, the caller has timed the model and set mean_ns) and a seed.
/// Deterministic: the same (seed, worker, step) gives the same time.
class compute_model {
public:
  compute_model(compute_spec spec, uint32_t workers, uint64_t seed);

  /// The compute time of closure `closure` on worker `worker`, in ns.
  sim_time step_time(uint32_t worker, uint64_t closure) const;

  /// Whether `worker` is a straggler.
  bool straggler(uint32_t worker) const {
    return straggler_.at(worker);
  }

  const compute_spec& spec() const {
    return spec_;
  }

private:
  compute_spec spec_;
  uint64_t seed_;
  std::vector<bool> straggler_;
};

/// Parses a duration with a unit (ns, us, ms, s) into ns.
/// @throws input_error naming `what` and quoting `text`.
sim_time parse_duration(const std::string& text, const char* what);

} // namespace actorps
