#pragma once

// The POSIX plumbing of run_children (cluster/launch/launcher.hpp): owned descriptors
// and pipes, wait statuses in words, a child's environment and program path,
// and the self-pipe that turns SIGINT, SIGTERM and SIGCHLD into bytes for
// its poll loop. Internal to cluster/launch/launcher.cpp.

#include <atomic>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <signal.h>
#include <unistd.h>

namespace actorps::detail {

/// The system's words for errno value `err` (defined with the checkpoint
/// files, core/checkpoint_files.cpp).
std::string errno_text(int err);

/// "SIGTERM" for SIGTERM and the other common signals; nullptr for others.
const char* signal_name(int sig);

/// "exited with status S" or "killed by signal N (SIGNAME)", for a status
/// from waitpid.
std::string describe_wait_status(int wait_status);

/// A shell-style exit code of a waitpid status: the exit status, or 128 +
/// the signal number.
int exit_code(int wait_status);

// -- file descriptors ---------------------------------------------------------

/// Owns one file descriptor.
class unique_fd {
public:
  unique_fd() = default;

  explicit unique_fd(int fd) : fd_(fd) {
    // nop
  }

  unique_fd(unique_fd&& other) noexcept : fd_(other.fd_) {
    other.fd_ = -1;
  }

  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.fd_;
      other.fd_ = -1;
    }
    return *this;
  }

  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;

  ~unique_fd() {
    reset();
  }

  int get() const {
    return fd_;
  }

  explicit operator bool() const {
    return fd_ >= 0;
  }

  /// Gives up ownership and returns the descriptor.
  int release() {
    auto fd = fd_;
    fd_ = -1;
    return fd;
  }

  void reset() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_ = -1;
};

/// Moves a close-on-exec descriptor above 2, so that dup2 onto stdin, stdout
/// and stderr in a child never clobbers another of its sources (this matters
/// only when the launcher itself runs with a standard stream closed).
/// Returns -1 and sets errno on failure; `fd` is consumed either way.
int above_stdio(int fd);

/// Creates a close-on-exec pipe, both ends above 2. Returns false and sets
/// errno on failure.
bool make_pipe(unique_fd& read_end, unique_fd& write_end, int flags = 0);

// -- signals ------------------------------------------------------------------

/// The signals run_children catches while it runs.
inline constexpr int caught_signals[] = {SIGINT, SIGTERM, SIGCHLD};
inline constexpr size_t num_caught = sizeof(caught_signals) / sizeof(int);

/// Routes SIGINT, SIGTERM and SIGCHLD to the self-pipe `write_fd` (one byte,
/// the signal number, per signal) while it lives, then restores the handlers
/// that were there before. One at a time per process (see busy_guard).
class signal_guard {
public:
  explicit signal_guard(int write_fd);

  signal_guard(const signal_guard&) = delete;
  signal_guard& operator=(const signal_guard&) = delete;

  ~signal_guard();

  /// Whether the launcher ignored `caught_signals[i]` before the call; a child
  /// then ignores it too, as it would have without the launcher's handler.
  bool was_ignored(size_t i) const {
    return previous_[i].sa_handler == SIG_IGN;
  }

private:
  struct sigaction previous_[num_caught];
};

/// In a child between fork and exec (async-signal-safe calls only): dies
/// with the launcher (PR_SET_PDEATHSIG), restores the dispositions the
/// launcher's handlers replaced, puts `in_fd` on stdin and `out_fd` on
/// stdout and stderr, restores `old_mask` and executes `path`. If that
/// fails, writes errno to `err_fd` and exits 127.
[[noreturn]] void exec_child(const char* path, char* const* argv,
                             char* const* envp, int out_fd, int err_fd,
                             int in_fd, const sigset_t& old_mask, pid_t parent,
                             const signal_guard& signals);

/// Refuses a second concurrent run_children call: the handlers are
/// process-wide.
/// @throws std::logic_error from the constructor if one is running.
class busy_guard {
public:
  busy_guard();

  busy_guard(const busy_guard&) = delete;
  busy_guard& operator=(const busy_guard&) = delete;

  ~busy_guard();
};

// -- environment --------------------------------------------------------------

/// This process's environment with `changes` applied (added, or replacing a
/// variable of the same name), as "NAME=value" strings.
std::vector<std::string>
child_environment(const std::vector<std::pair<std::string, std::string>>& changes);

/// The path to execute for `program`: itself if it contains '/', else the
/// first executable regular file named so in the PATH of `env` (empty if
/// none).
std::string find_program(const std::string& program,
                         const std::vector<std::string>& env);

} // namespace actorps::detail
