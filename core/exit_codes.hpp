#pragma once

// The exit status of every actorps command, by class, for people and for
// cluster managers that act on it (docs/reference/exit-codes.md). Kubeflow's
// restartPolicy ExitCode retries a pod only for codes >= 128 (and a
// signal's 128 + N); Slurm and `actorps launch` requeue or resume after
// exit_stopped.

namespace actorps {

/// The job is done (or the command did what it was asked).
inline constexpr int exit_ok = 0;

/// The job failed in a way another attempt would repeat: a step error (the
/// model, step function or dataset threw), a diverged loss, a node that
/// refuses this job's handshake (another config or build), an internal
/// error. Do not retry.
inline constexpr int exit_failed = 1;

/// Bad input: a malformed command, config or data file, a refused request
/// (e.g. a scale command the job cannot take). Never retry.
inline constexpr int exit_bad_input = 2;

/// A parameter server or worker that the coordinator stopped at the end of
/// a failed job: it did nothing wrong, the job's result is the
/// coordinator's status, and `actorps launch` does not start it again.
inline constexpr int exit_job_failed = 3;

/// Stopped on request (SIGTERM, SIGUSR1, a stream's stop) after writing a
/// checkpoint: requeue it and resume (`--resume`). EX_TEMPFAIL of
/// sysexits.h.
inline constexpr int exit_stopped = 75;

/// A failure that another attempt may not meet: a node (parameter server,
/// worker, coordinator) lost and not recovered, no worker left in service,
/// nodes not reached in time, a coordinator that never came. Retry (from
/// the newest checkpoint with --resume where there is one). 128 is no
/// signal's 128 + N, so it is told apart from a kill.
inline constexpr int exit_retryable = 128;

} // namespace actorps
