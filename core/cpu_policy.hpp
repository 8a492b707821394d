#pragma once

// How the threads of a training process are scheduled on Linux (sched(7)).
//
// A multi-process job on a few cores runs several busy processes per core:
// a ps applying an update, a worker in its GEMMs, and the threads that move
// their messages. Under the default policy (SCHED_OTHER) a thread woken by a
// message preempts the one computing, which then waits with cold caches;
// SCHED_BATCH, the policy Linux has for CPU-bound, non-interactive work, lets
// the running thread finish its slice instead (a woken batch thread never
// preempts on wake-up; it still gets its fair share). Measured on 2 cores
// (docs/measurements.md, "CPU policy and affinity"): context switches per step 27 -> 16 and
// loopback `launch` samples/s +15% (median of 4 rounds); `train` (one
// process) unchanged. Delays it adds stay within a scheduler slice (a few ms),
// far below heartbeat timeouts.

#include <string>

namespace actorps {

/// A process's scheduling policy for its threads (job_config::cpu_policy).
enum class cpu_policy {
  batch,  ///< SCHED_BATCH (the default of `actorps train`, `node`, `launch`)
  normal, ///< leave the policy the process was started with
};

/// "batch" or "normal".
/// @throws input_error naming `name` ("cluster.cpu_policy" or a flag) and
///         the value otherwise.
cpu_policy parse_cpu_policy(const std::string& value, const std::string& name);

/// Gives the calling thread policy `p` (nice value kept); threads it starts
/// afterwards inherit it, so call it before the process starts its actor
/// system. Nothing happens for `normal`. Returns an empty string on success,
/// or why the system refused (e.g. a seccomp filter), in which case the
/// thread keeps its policy: training runs as before, only slower.
std::string apply_cpu_policy(cpu_policy p);

/// The calling thread's policy as sched(7) names it ("SCHED_BATCH",
/// "SCHED_OTHER", ...), for log lines and tests.
std::string current_cpu_policy();

} // namespace actorps
