#include "core/remove_after_exit.hpp"

#include <cerrno>

#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace actorps {

bool remove_after_exit(const std::vector<std::string>& paths) {
  if (paths.empty())
    return true;
  // Built before fork: the child must not allocate.
  static const char script[] = "cat >/dev/null; rm -rf -- \"$@\"";
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>("sh"));
  argv.push_back(const_cast<char*>("-c"));
  argv.push_back(const_cast<char*>(script));
  argv.push_back(const_cast<char*>("actorps-remove-after-exit"));
  for (auto& p : paths)
    argv.push_back(const_cast<char*>(p.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return false;
  auto child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return false;
  }
  if (child == 0) {
    // Fork again, so that the shell is nobody's child here (a parent that
    // reaps any child, as run_children does, never sees it) and lives on
    // in a session of its own (a Ctrl-C at the terminal does not reach it).
    if (fork() != 0)
      _exit(0);
    setsid();
    close(fds[1]);
    if (dup2(fds[0], STDIN_FILENO) < 0) // dup2 clears close-on-exec
      _exit(127);
    if (fds[0] != STDIN_FILENO)
      close(fds[0]);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      if (null > STDERR_FILENO)
        close(null);
    }
    execv("/bin/sh", argv.data());
    _exit(127);
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  // fds[1] stays open, unused, until this process ends.
  return true;
}

} // namespace actorps
