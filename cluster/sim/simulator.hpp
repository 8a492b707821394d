#pragma once

// `actorps simulate`: the job's real actors (parameter servers, workers,
// dispatcher) in one process under CAF's deterministic test scheduler, with
// a virtual clock that the simulated network and compute models advance
// (cluster/sim/sim_model.hpp, cluster/sim/sim_link.hpp). Gradients are real, so
// staleness shows in accuracy. Given its step time and host costs a run is
// deterministic: the same flags and seed give the same run, bit for bit
// (its digest). A model measured on this machine (--compute measured, the
// default; --host measured) differs from run to run, so such a run reports
// the numbers it measured as the flags that replay it.

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/sim/sim_host.hpp"
#include "cluster/sim/sim_model.hpp"
#include "core/metrics.hpp"

namespace actorps {

struct job_config;

struct sim_options {
  network_spec network;
  compute_spec compute;
  /// Seeds the compute model (and the stragglers); the job's own seeds
  /// (model, data order) come from its config.
  uint64_t seed = 1;
  /// One host for all nodes (cluster/sim/sim_host.hpp); `measure_host`: its
  /// costs measured on this machine (then `host` is ignored).
  host_spec host;
  bool measure_host = false;
  /// Workers per machine (cluster/sim/sim_link.hpp, `sim_world::per_machine`):
  /// they share the machine's link and its compute unit, one step at a
  /// time. Must divide the job's workers; not with a host model.
  uint32_t workers_per_machine = 1;
  /// Timing without arithmetic (cluster/sim/sim_timing.hpp): no gradients, no
  /// test metrics, a few bytes per worker instead of the model.
  bool timing_only = false;
  /// Write / check the event order (cluster/sim/sim_trace.hpp); empty: no.
  std::string record;
  std::string replay;
};

/// One epoch of a simulation: when it ended in virtual time and the test
/// metrics then.
struct sim_epoch {
  uint64_t epoch = 0;
  double virtual_s = 0;
  double train_loss = 0;
  metric_list metrics;
};

/// What a parameter server's link carried.
struct sim_server_load {
  uint64_t pulls = 0;
  uint64_t pushes = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  /// Share of the virtual time its busier link direction was sending.
  double utilization = 0;
};

struct sim_report {
  uint32_t workers = 0;
  uint32_t workers_per_machine = 1;
  uint32_t ps = 0;
  std::string network;
  /// The host model (to_string(host_spec)).
  std::string host;
  /// The compute time per step of the model (measured or given), in ns.
  sim_time step_ns = 0;
  uint64_t samples = 0;
  /// Virtual time of the whole run, and the wall time it took.
  double virtual_s = 0;
  double wall_s = 0;
  double samples_per_s = 0;
  std::vector<sim_epoch> epochs;
  std::vector<sim_server_load> servers;
  /// Per machine (a worker, unless workers_per_machine > 1): the share of
  /// the virtual time it was not computing.
  std::vector<double> idle;
  /// Applied pushes per staleness bucket, all servers together
  /// (core/staleness_histogram.hpp).
  std::vector<uint64_t> staleness_buckets;
  /// Closures finished and re-run after a lost worker; pushes applied by
  /// the servers serving each group at the end and those discarded as
  /// duplicates (with every closure applied once per group, applied =
  /// closures x groups; fewer: updates lost to a ps restored from a
  /// checkpoint); pulls and pushes the drop and delay faults held back.
  uint64_t closures = 0;
  uint64_t reexecuted = 0;
  uint64_t pushes_applied = 0;
  uint64_t duplicates = 0;
  uint64_t dropped = 0;
  uint64_t delayed = 0;
  uint64_t events = 0;
  /// SHA-256 of the event order and the final dense values, in hex.
  std::string digest;
  /// Whether the same flags give this digest again: false when a model's
  /// numbers were measured on this machine (--compute measured, the
  /// default, or --host measured), which differ from run to run.
  bool reproducible = true;
  /// For a run that is not reproducible: the flags that put the numbers
  /// this run measured in place of the measurement (e.g.
  /// "--compute const:1480123ns"); the run's flags followed by these give
  /// this run again, bit for bit (its digest). Empty when reproducible.
  std::string replay_flags;
  uint64_t peak_rss_bytes = 0;
};

/// Runs job `cfg` (its model, data, rules, mode, workers and ps) under
/// simulation. Logs an epoch line per epoch (log level info).
/// Runs the job's fault plan (cluster/sim/sim_cluster.hpp), with the replicas
/// and checkpoints (kept in memory) of its config.
/// @throws input_error for a fault naming a node the job lacks, workers
///         per machine that do not divide the workers or come with a host
///         model;
///         runtime_failure if the simulation stalls (nothing left to run and
///         closures unfinished), a replay differs, or a closure fails (its
///         error, as in real runs: a step's own error, a ps lost without a
///         copy or checkpoint).
sim_report simulate(const job_config& cfg, const sim_options& opts);

/// The report as JSON lines: one "epoch" object per epoch, then one
/// "summary" object (what the report holds).
std::string to_json_lines(const sim_report& r);

/// The report for people: samples/s, epochs, load, staleness, idle time,
/// digest.
std::string to_text(const sim_report& r);

} // namespace actorps
