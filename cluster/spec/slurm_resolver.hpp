#pragma once

// The cluster of a Slurm job step, after TensorFlow's SlurmClusterResolver:
// `srun -n 5 actorps node --cluster-resolver slurm --ps 2` makes task 0 the
// coordinator, tasks 1-2 parameter servers and tasks 3-4 workers, each
// listening on port_base + its index among the step's tasks on its host.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cluster/spec/cluster_spec.hpp"

namespace actorps {

/// Reads one environment variable: its value, or std::nullopt when unset.
using env_reader =
  std::function<std::optional<std::string>(const std::string& name)>;

/// This process's environment (getenv; not safe against a concurrent setenv).
env_reader process_environment();

/// Expands a Slurm host list into host names (see expand_hostlist).
using hostlist_expander =
  std::function<std::vector<std::string>(const std::string& text)>;

/// Expands `text` with `scontrol show hostnames` (Slurm's own parser) when
/// scontrol runs here with a Slurm configuration; with no scontrol on PATH,
/// or one that fails for want of a configuration, with expand_hostlist.
/// @throws input_error naming the text when scontrol calls it invalid (its
///         words quoted) or prints something that is no host name (Slurm
///         22.05 turns "n[1-2" into "n]"), or as expand_hostlist.
std::vector<std::string> slurm_hostnames(const std::string& text);

/// Where one task of a step runs.
struct slurm_task_place {
  std::string host;
  /// The position of `host` in the step's host list, 0-based.
  uint32_t host_index = 0;
  /// Its index among the step's tasks on `host` (SLURM_LOCALID), 0-based.
  uint32_t local_index = 0;
};

/// Where Slurm starts each task of a step, by task id (SLURM_PROCID), from
/// the step's hosts and tasks per host (both in Slurm's order).
/// `distribution` is the node level of SLURM_DISTRIBUTION (the text before
/// ':' or ','): "" or "block" (the default: tasks 0..c0-1 on the first host,
/// and so on) or "cyclic" (round robin over the hosts that have tasks left).
/// @throws input_error naming the problem: hosts and counts of different
///         lengths, more than max_hostlist_size tasks, or another
///         distribution ("plane", "arbitrary"), whose placement the
///         environment does not describe.
std::vector<slurm_task_place>
place_slurm_tasks(const std::vector<std::string>& hosts,
                  const std::vector<uint32_t>& tasks_per_host,
                  const std::string& distribution);

/// The cluster of `tasks` (by task id): task 0 is the coordinator (TF's
/// "chief"), tasks 1..ps are parameter servers 0..ps-1, the rest are workers
/// 0, 1, ...; task t listens on tasks[t].host at port_base +
/// tasks[t].local_index. The spec's task is left unset.
/// @throws input_error `--ps N: ...` if ps is 0 or leaves no worker
///         (ps >= tasks.size() - 1, saying how many tasks there are), or
///         `--port-base B: ...` if a port would pass 65535 or B is 0.
cluster_spec slurm_cluster_spec(const std::vector<slurm_task_place>& tasks,
                                uint32_t ps, uint16_t port_base);

/// What Slurm tells one task about its job step.
struct slurm_step {
  std::string job_id;   ///< SLURM_JOB_ID
  std::string step_id;  ///< SLURM_STEP_ID ("" if unset)
  uint32_t task = 0;    ///< SLURM_PROCID
  uint32_t tasks = 0;   ///< SLURM_STEP_NUM_TASKS, else SLURM_NTASKS
  /// SLURM_STEP_NODELIST, expanded.
  std::vector<std::string> hosts;
  /// SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE), expanded.
  std::vector<uint32_t> tasks_per_host;
  /// Node level of SLURM_DISTRIBUTION ("" when unset).
  std::string distribution;
  /// SLURMD_NODENAME and SLURM_LOCALID when set: where Slurm says this task
  /// runs, checked against the placement.
  std::optional<std::string> node_name;
  std::optional<uint32_t> local_index;
};

/// Reads the step of this task from Slurm's variables.
/// @throws input_error, naming the variable: outside Slurm (no
///         SLURM_PROCID), in a batch script or allocation but not in a step
///         started by srun (no SLURM_STEP_NODELIST), a value that is not a
///         number, a host list or task list that cannot be parsed, task
///         counts that do not add up to the number of tasks, or a task id
///         out of range.
slurm_step read_slurm_step(const env_reader& env,
                           const hostlist_expander& expand);

/// What an allocation (salloc, sbatch) offers for job steps.
struct slurm_allocation {
  std::string job_id;                   ///< SLURM_JOB_ID
  std::vector<std::string> hosts;       ///< SLURM_JOB_NODELIST, expanded
  std::vector<uint32_t> tasks_per_host; ///< SLURM_TASKS_PER_NODE, expanded
};

/// Reads the allocation this process runs in.
/// @throws input_error naming the variable: outside an allocation (no
///         SLURM_JOB_ID), a missing or unparsable node or task list, or
///         lists of different lengths.
slurm_allocation read_slurm_allocation(const env_reader& env,
                                       const hostlist_expander& expand);

/// Settings of the Slurm resolver.
struct slurm_resolver_options {
  /// Number of parameter servers (tasks 1..ps), >= 1.
  uint32_t ps = 1;
  /// Port of a host's first task; the next task on that host gets the next
  /// port. Default as TensorFlow's SlurmClusterResolver.
  uint16_t port_base = 8888;
};

/// The cluster of this task's Slurm job step, with its task set: reads the
/// step (read_slurm_step), places its tasks (place_slurm_tasks), maps them to
/// roles (slurm_cluster_spec), and checks the result: where Slurm says this
/// task runs (SLURMD_NODENAME, SLURM_LOCALID) must be where the placement puts
/// it, and the spec passes validate().
/// @throws input_error as the functions named, or naming both places when
///         they differ (e.g. a distribution given some other way).
cluster_spec resolve_slurm_cluster(const slurm_resolver_options& opts,
                                   const env_reader& env,
                                   const hostlist_expander& expand);

} // namespace actorps
