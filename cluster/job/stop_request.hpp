#pragma once

// A request to stop a job early but cleanly: what SIGTERM (or SIGUSR1) means
// to actorps.
// Slurm sends SIGTERM at a job's time limit (and with --signal before it), on
// scancel and on preemption; Kubernetes on a pod's deletion. The coordinator
// then writes a checkpoint and exits with exit_stopped, so that the job
// continues with --resume (docs/guide/slurm.md).

#include "core/exit_codes.hpp"
#include <cstdint>
#include <string>

#include "core/error.hpp"

namespace actorps {

/// Exit status of a process that stopped on request: the coordinator after
/// writing its checkpoint, or a node that waited in vain for its coordinator
/// to end the job. EX_TEMPFAIL of sysexits.h ("try again later"): the job can
/// go on with --resume.
// exit_stopped (75) lives in core/exit_codes.hpp with the other codes.

/// Asks the job of this process to stop:
/// - the coordinator's training loop (train(), train_chief()) cancels its
///   queued closures and its running ones at their next message boundary,
///   waits for them, writes a checkpoint (with a checkpoint_dir) and throws
///   stopped_on_request;
/// - a ps or worker node (run_node) keeps serving until its coordinator ends
///   the job, at most cluster.connect_timeout_ms longer, then exits with
///   exit_stopped.
/// Async-signal-safe and lock-free: may be called from a signal handler or
/// any thread.
void request_stop() noexcept;

/// Whether request_stop() was called since the start or the last
/// clear_stop_request(). Lock-free.
bool stop_requested() noexcept;

/// Forgets a request (for tests, and programs that train again).
void clear_stop_request() noexcept;

/// Makes SIGTERM and SIGUSR1 call request_stop(). SIGUSR1 because srun
/// passes it on to its tasks unchanged (SIGTERM it answers by killing them),
/// and Slurm users know it from `sbatch --signal=USR1@120`. Later signals
/// change nothing: Slurm often delivers several at once, and the first must
/// not be undone by the second; SIGINT and SIGKILL still end the process at
/// once. For apps: the library never installs a signal handler by itself.
/// @throws runtime_failure if sigaction fails.
void stop_on_signals();

/// Thrown by train() and train_chief() when they stopped on request, after
/// the checkpoint was written.
class stopped_on_request : public runtime_failure {
public:
  /// @param global_step  closures finished in the whole job when it stopped.
  /// @param checkpoint_dir  where the checkpoint went ("" = none written:
  ///        the job had no checkpoint_dir).
  stopped_on_request(uint64_t global_step, std::string checkpoint_dir);

  uint64_t global_step() const {
    return global_step_;
  }

  const std::string& checkpoint_dir() const {
    return checkpoint_dir_;
  }

private:
  uint64_t global_step_;
  std::string checkpoint_dir_;
};

} // namespace actorps
