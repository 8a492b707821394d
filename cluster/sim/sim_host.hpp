#pragma once

// One host under simulation (validation against `launch` on
// loopback): every node of the job runs on the same machine, which has a
// few cores, and CPU work besides the workers' steps takes time: a message
// costs its sender and its receiver CPU per byte (serialization and the
// kernel's copy through the socket), a push costs its server the update
// rule's step. A node is one thread (one task at a time); a task also needs
// one of the host's cores; both are served first come, first served, with
// no preemption. Off by default: every node on a machine of its own, and
// only the workers' steps take CPU time.

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/sim/sim_model.hpp"

namespace actorps {

struct job_config;

struct host_spec {
  /// Cores of the host (0: no host model).
  uint32_t cores = 0;
  /// CPU per message a node sends, and again per message it receives
  /// (system calls, framing, scheduling), in ns.
  double ns_per_message = 0;
  /// CPU per byte a node sends, and again per byte it receives, in ns.
  double ns_per_byte = 0;
  /// A server's update of one dense float of a push, in ns.
  double apply_ns_per_float = 0;
};

/// This machine: its cores (std::thread::hardware_concurrency), and the
/// costs from round trips over loopback between two actor systems of this
/// process (a gate and a dial, as between nodes; pulls over the data
/// channel when `cfg.data_channel`, through shared memory when
/// `cfg.transport`, as a launched worker's go): the pull of 1 float (4
/// message ends: the fixed cost) and the pull of `floats` floats, at least
/// 2^20 (the cost per byte), the fastest of 15 runs of 5; and the job's
/// update rule over `floats` floats (the update per float), median of 7.
/// @throws runtime_failure if loopback cannot be used.
host_spec measure_host(const job_config& cfg, uint64_t floats);

std::string to_string(const host_spec& h);

/// Parses "2:0.35:1.2" (cores, ns per byte, ns per float) or
/// "2:20000:0.35:1.2" (cores, ns per message, ns per byte, ns per float).
/// @throws input_error quoting `text` and what is wrong.
host_spec parse_host(const std::string& text);

class host_model {
public:
  host_model(host_spec spec, uint32_t nodes);

  bool enabled() const noexcept {
    return spec_.cores > 0;
  }

  const host_spec& spec() const noexcept {
    return spec_;
  }

  /// When a task of node `n` that takes `duration` ns and is ready at `now`
  /// ends: it starts once node `n` and a core are free.
  sim_time run(uint32_t n, sim_time duration, sim_time now);

  /// CPU time of sending (or of receiving) `bytes`.
  sim_time message_cost(uint64_t bytes) const;

  /// CPU time of a server's update of `floats` dense floats.
  sim_time apply_cost(uint64_t floats) const;

  /// CPU time each node has used so far.
  const std::vector<sim_time>& busy() const noexcept {
    return busy_;
  }

private:
  host_spec spec_;
  std::vector<sim_time> node_free_;
  std::vector<sim_time> core_free_;
  std::vector<sim_time> busy_;
};

} // namespace actorps
