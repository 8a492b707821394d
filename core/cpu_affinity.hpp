#pragma once

// Which CPUs the processes of a job on one host run on (sched_setaffinity(2)),
// as MPI's `--bind-to` and Slurm's `--cpu-bind` do for their tasks.
//
// `actorps launch` starts every node of a job on this machine. Left to
// themselves, the kernel moves their threads between cores as loads change:
// a ps's update and a worker's GEMMs start on a core whose caches hold
// another process's data, and every message between two nodes on different
// cores is a cross-core wake-up (an interrupt to the other core). Given a
// share of the CPUs each, they stay put. Measured on 2 cores (docs/measurements.md,
// "CPU policy and affinity"): loopback `launch` of Fashion-MNIST, 2 ps + 2
// workers, +13% samples/s (median of 6 rounds) with each ps and worker of
// the same index sharing a core.

#include <cstdint>
#include <string>
#include <vector>

namespace actorps {

/// How `actorps launch` places its nodes on this machine's CPUs
/// (job_config::cpu_affinity).
enum class cpu_affinity {
  automatic, ///< "auto": each ps and worker gets a share (assign_cpus)
  none,      ///< "none": the kernel places every thread where it likes
};

/// "auto" or "none".
/// @throws input_error naming `name` ("cluster.cpu_affinity" or a flag) and
///         the value otherwise.
cpu_affinity parse_cpu_affinity(const std::string& value,
                                const std::string& name);

/// A CPU list in cpuset(7)'s list format: "0-3,8,10-11" (ascending or not;
/// duplicates merged). Returns the CPUs sorted.
/// @throws input_error naming `name` (e.g. "--cpu-set") and what is wrong:
///         empty, not a number, a range backwards, a CPU of 4096 or more.
std::vector<int> parse_cpu_list(const std::string& text,
                                const std::string& name);

/// The list format of sorted `cpus`, with ranges: {0,1,2,5} -> "0-2,5".
std::string format_cpu_list(const std::vector<int>& cpus);

/// The CPUs the calling thread may run on (sched_getaffinity), sorted: what
/// a cgroup, `taskset` or Slurm left to this process.
std::vector<int> allowed_cpus();

/// The CPUs of each ps and worker of a job (assign_cpus).
struct cpu_assignment {
  std::vector<std::vector<int>> ps;      ///< ps i at [i]
  std::vector<std::vector<int>> workers; ///< worker i at [i]
};

/// The CPUs of each ps and worker of a job on `cpus` (sorted; empty: every
/// node gets an empty set, i.e. none is pinned). The nodes are dealt in the order ps 0, worker 0, ps 1, worker 1, ... (the
/// larger group's rest last), so that a ps and the worker of the same index
/// are neighbours. With at most as many nodes as CPUs, node k of n gets the
/// k-th of n consecutive blocks of the CPUs (sizes differing by at most 1);
/// with more nodes than CPUs, node k gets the single CPU number floor(k *
/// cpus / n): neighbours share one (2 ps + 2 workers on 2 CPUs: ps 0 and
/// worker 0 on the first, ps 1 and worker 1 on the second).
cpu_assignment assign_cpus(const std::vector<int>& cpus, uint32_t ps,
                           uint32_t workers);

/// Restricts the calling thread to `cpus`; threads it starts afterwards
/// inherit the set, so call it before the process starts its actor system.
/// Returns an empty string on success, or why the system refused (e.g. a
/// CPU outside the process's cgroup), in which case nothing changed.
std::string apply_cpu_set(const std::vector<int>& cpus);

} // namespace actorps
