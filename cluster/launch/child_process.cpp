#include "cluster/launch/child_process.hpp"

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fmt/format.h>

extern char** environ;

namespace actorps::detail {

const char* signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return nullptr;
  }
}

/// "exited with status S" or "killed by signal N (SIGNAME)".
std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status))
    return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
  auto sig = WTERMSIG(wait_status);
  if (auto name = signal_name(sig))
    return fmt::format("killed by signal {} ({})", sig, name);
  return fmt::format("killed by signal {}", sig);
}

/// A shell-style exit code: the status, or 128 + the signal number.
int exit_code(int wait_status) {
  if (WIFEXITED(wait_status))
    return WEXITSTATUS(wait_status);
  return 128 + WTERMSIG(wait_status);
}

// -- file descriptors ---------------------------------------------------------

/// Moves a close-on-exec descriptor above 2, so that dup2 onto stdin, stdout
/// and stderr in a child never clobbers another of its sources (this matters
/// only when the launcher itself runs with a standard stream closed).
/// Returns -1 and sets errno on failure; `fd` is consumed either way.
int above_stdio(int fd) {
  if (fd < 0 || fd > 2)
    return fd;
  auto moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  auto err = errno;
  ::close(fd);
  errno = err;
  return moved;
}

/// Creates a close-on-exec pipe, both ends above 2. Returns false and sets
/// errno on failure.
bool make_pipe(unique_fd& read_end, unique_fd& write_end, int flags) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | flags) != 0)
    return false;
  unique_fd w{fds[1]};
  unique_fd r{above_stdio(fds[0])};
  if (!r)
    return false;
  w = unique_fd{above_stdio(w.release())};
  if (!w)
    return false;
  read_end = std::move(r);
  write_end = std::move(w);
  return true;
}

// -- signals ------------------------------------------------------------------

namespace {

/// Write end of the running call's self-pipe; -1 when none runs.
std::atomic<int> wake_fd{-1};

/// Whether a run_children call is running in this process.
std::atomic<bool> busy{false};

/// Turns a signal into one byte on the self-pipe, which wakes the poll loop.
void on_signal(int sig) {
  auto saved = errno;
  auto fd = wake_fd.load();
  if (fd >= 0) {
    auto byte = static_cast<unsigned char>(sig);
    // A full pipe already holds a wake-up; dropping this byte is fine.
    [[maybe_unused]] auto n = ::write(fd, &byte, 1);
  }
  errno = saved;
}

} // namespace

signal_guard::signal_guard(int write_fd) {
  wake_fd = write_fd;
  struct sigaction act = {};
  act.sa_handler = on_signal;
  sigemptyset(&act.sa_mask);
  for (size_t i = 0; i < num_caught; ++i) {
    act.sa_flags = SA_RESTART
                   | (caught_signals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
    ::sigaction(caught_signals[i], &act, &previous_[i]);
  }
}

signal_guard::~signal_guard() {
  for (size_t i = 0; i < num_caught; ++i)
    ::sigaction(caught_signals[i], &previous_[i], nullptr);
  wake_fd = -1;
}

busy_guard::busy_guard() {
  if (busy.exchange(true))
    throw std::logic_error("run_children: another call is already running");
}

busy_guard::~busy_guard() {
  busy = false;
}

// -- environment --------------------------------------------------------------

std::vector<std::string> child_environment(
  const std::vector<std::pair<std::string, std::string>>& changes) {
  std::vector<std::string> result;
  for (auto e = environ; e != nullptr && *e != nullptr; ++e)
    result.emplace_back(*e);
  for (const auto& [name, value] : changes) {
    auto prefix = name + '=';
    result.erase(std::remove_if(result.begin(), result.end(),
                                [&](const std::string& entry) {
                                  return entry.compare(0, prefix.size(), prefix)
                                         == 0;
                                }),
                 result.end());
    result.emplace_back(prefix + value);
  }
  return result;
}

std::string find_program(const std::string& program,
                         const std::vector<std::string>& env) {
  if (program.find('/') != std::string::npos)
    return program;
  auto path_var = std::find_if(env.begin(), env.end(), [](const auto& entry) {
    return entry.compare(0, 5, "PATH=") == 0;
  });
  if (path_var == env.end())
    return {};
  std::string_view dirs{*path_var};
  dirs.remove_prefix(5);
  for (;;) {
    auto colon = dirs.find(':');
    auto dir = dirs.substr(0, colon);
    auto candidate = fmt::format("{}/{}", dir.empty() ? "." : dir, program);
    struct stat info;
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode)
        && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (colon == std::string_view::npos)
      return {};
    dirs.remove_prefix(colon + 1);
  }
}

void exec_child(const char* path, char* const* argv, char* const* envp,
                int out_fd, int err_fd, int in_fd, const sigset_t& old_mask,
                pid_t parent, const signal_guard& signals) {
  // A launcher killed outside its control (SIGKILL) takes its nodes with
  // it: the kernel sends SIGKILL to this child when the thread that forked
  // it (the launcher's only one) ends; and if the launcher is gone already,
  // the child does not start.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent)
    ::_exit(127);
  for (size_t i = 0; i < num_caught; ++i) {
    struct sigaction act = {};
    act.sa_handler = signals.was_ignored(i) ? SIG_IGN : SIG_DFL;
    sigemptyset(&act.sa_mask);
    ::sigaction(caught_signals[i], &act, nullptr);
  }
  // All sources are above 2 (see above_stdio); dup2 clears close-on-exec.
  if (::dup2(in_fd, STDIN_FILENO) >= 0 && ::dup2(out_fd, STDOUT_FILENO) >= 0
      && ::dup2(out_fd, STDERR_FILENO) >= 0) {
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::execve(path, argv, envp);
  }
  int err = errno;
  [[maybe_unused]] auto n = ::write(err_fd, &err, sizeof(err));
  ::_exit(127);
}

} // namespace actorps::detail
