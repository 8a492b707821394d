#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace actorps {

/// What run_program saw of a program it ran.
struct program_output {
  /// False when the program could not be started (not found on PATH, not
  /// executable); `output` then says why.
  bool started = false;
  /// True when the program was killed for running past the timeout.
  bool timed_out = false;
  /// The exit status (0..255), or 128 + N if signal N ended it.
  int status = -1;
  /// Its stdout and stderr, merged in the order written, at most 1 MiB
  /// (the rest is read and dropped).
  std::string output;
};

/// Runs `argv` (argv[0] looked up on PATH unless it contains '/') without a
/// shell, stdin from /dev/null, and waits for it at most `timeout`, then
/// kills it with SIGKILL. For short helper programs such as `scontrol show
/// hostnames`; the program inherits this process's environment.
/// @throws std::invalid_argument if `argv` is empty.
/// @throws runtime_failure (core/error.hpp) if a pipe cannot be made or
///         poll fails; the child, if started, is killed and reaped first.
/// @note Reaps its own child with waitpid on its pid; a SIGCHLD handler that
///       reaps every child (waitpid(-1)) elsewhere in the process would take
///       the status first (then `status` is -1).
program_output run_program(const std::vector<std::string>& argv,
                           std::chrono::milliseconds timeout);

} // namespace actorps
