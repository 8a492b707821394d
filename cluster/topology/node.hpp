#pragma once

#include <optional>

#include "cluster/spec/cluster_spec.hpp"
#include "cluster/topology/trainer.hpp"
#include "core/job_config.hpp"

namespace actorps {

/// Runs this process as member `task` of the multi-process cluster `spec`
/// (`actorps node`). cfg.workers and cfg.ps must match the spec.
/// - "chief": the coordinator; trains as train_chief() and reports to `opts`.
/// - "ps": a parameter server behind a gate (cluster/net/gate.hpp) at its
///   address, until the coordinator shuts it down.
/// - "worker": loads its slice of the training data, joins every parameter
///   server, then serves closures behind its gate until shut down.
/// - "evaluator": the sidecar evaluator (cluster/topology/evaluator.hpp) of
///   cfg.checkpoint_dir; needs no address and talks to no node.
/// With opts.metrics_port set, each node serves Prometheus metrics on
/// metrics_port_of(opts.metrics_port, spec, task).
/// A ps or worker stops with status exit_retryable (128) when no coordinator
/// joins within cfg.connect_timeout_ms, or after the coordinator is lost and
/// does not come back within that time; a worker that got SIGTERM leaves
/// the job gracefully and exits 0.
/// @return the process exit status (core/exit_codes.hpp): 0 after a clean
///         shutdown or a graceful leave, exit_job_failed when the
///         coordinator ended a failed job, exit_retryable as above.
/// @throws input_error for unusable input (data, a task the spec does not
///         have, a metrics port in use); runtime_failure if the address
///         cannot be bound or the parameter servers cannot be joined.
/// With `join` (a worker only, `--join`): the worker joins the running job
/// whose coordinator's join desk listens there, instead of waiting at its
/// own address to be dialed (its index is past the spec's workers);
/// input_error (exit 2) when there is no job there or it refuses.
int run_node(const job_config& cfg, const cluster_spec& spec,
             const task_id& task, const train_options& opts,
             const std::optional<host_port>& join = std::nullopt);

} // namespace actorps
