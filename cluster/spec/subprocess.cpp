#include "cluster/spec/subprocess.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"

extern char** environ;

namespace actorps {

namespace {

/// Output kept of one program; more is read and dropped.
constexpr size_t max_output = size_t{1} << 20;

/// Closes its descriptors when it goes out of scope.
struct fd_pair {
  int fds[2] = {-1, -1};
  ~fd_pair() {
    for (auto fd : fds)
      if (fd >= 0)
        ::close(fd);
  }
  void close_end(int i) {
    if (fds[i] >= 0)
      ::close(fds[i]);
    fds[i] = -1;
  }
};

int shell_status(int wait_status) {
  if (WIFEXITED(wait_status))
    return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status))
    return 128 + WTERMSIG(wait_status);
  return -1;
}

} // namespace

program_output run_program(const std::vector<std::string>& argv,
                           std::chrono::milliseconds timeout) {
  if (argv.empty())
    throw std::invalid_argument("run_program: empty argv");
  program_output result;
  fd_pair pipe_fds;
  if (::pipe2(pipe_fds.fds, O_CLOEXEC) != 0)
    throw runtime_failure(fmt::format("run_program {}: pipe: {}", argv[0],
                                      std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds.fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds.fds[1], STDERR_FILENO);
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  auto err = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(),
                            environ);
  posix_spawn_file_actions_destroy(&actions);
  pipe_fds.close_end(1);
  if (err != 0) {
    result.output = fmt::format("cannot run {}: {}", argv[0],
                                std::strerror(err));
    return result;
  }
  result.started = true;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    if (left <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{pipe_fds.fds[0], POLLIN, 0};
    auto n = ::poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      auto e = errno;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      throw runtime_failure(fmt::format("run_program {}: poll: {}", argv[0],
                                        std::strerror(e)));
    }
    if (n == 0)
      continue; // the deadline is checked above
    auto got = ::read(pipe_fds.fds[0], buf, sizeof(buf));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break; // EOF: the program (and whoever shared its pipe) is done
    auto keep = std::min(static_cast<size_t>(got),
                         max_output - std::min(max_output,
                                               result.output.size()));
    result.output.append(buf, keep);
  }
  if (result.timed_out)
    ::kill(pid, SIGKILL);
  int wait_status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &wait_status, 0);
  } while (r < 0 && errno == EINTR);
  result.status = r == pid ? shell_status(wait_status) : -1;
  return result;
}

} // namespace actorps
