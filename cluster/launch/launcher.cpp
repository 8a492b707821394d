#include "cluster/launch/launcher.hpp"

#include <algorithm>
#include <cerrno>
#include <deque>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cluster/launch/child_process.hpp"
#include "cluster/launch/line_splitter.hpp"
#include "core/backoff.hpp"
#include "core/error.hpp"

namespace actorps {

child_control::~child_control() = default;
launch_control::~launch_control() = default;

using detail::above_stdio;
using detail::busy_guard;
using detail::caught_signals;
using detail::child_environment;
using detail::describe_wait_status;
using detail::errno_text;
using detail::exec_child;
using detail::exit_code;
using detail::find_program;
using detail::line_splitter;
using detail::make_pipe;
using detail::num_caught;
using detail::signal_guard;
using detail::signal_name;
using detail::unique_fd;

namespace {

/// Longest piece of a line printed at once; longer lines are split.
constexpr size_t max_line = 64 * 1024;

/// Bytes read from a child's pipe per wake-up.
constexpr size_t read_chunk = 64 * 1024;

/// Upper bound on one poll, in ms: a safety net in case a SIGCHLD is lost
/// (e.g. blocked in every thread), not the normal way of noticing an exit.
constexpr int max_poll_ms = 250;

// -- the child supervisor -----------------------------------------------------

/// One started child.
struct child_state {
  const child_spec* spec = nullptr;
  pid_t pid = -1;
  bool running = false;
  /// Raw status from waitpid, valid once `running` is false.
  int wait_status = 0;
  /// Read end of the child's stdout+stderr pipe; closed at EOF.
  unique_fd out;
  /// This end of the child's stdin socket (child_spec::stdin_lines).
  unique_fd in;
  /// Bytes read but not printed yet: the start of a line.
  line_splitter lines{max_line};
  /// Restarts so far, and when the next one is due (while restart_pending).
  uint32_t restarts = 0;
  bool restart_pending = false;
  std::chrono::steady_clock::time_point restart_at;
};

/// Starts, watches, restarts and stops the children of one run_children
/// call, and relays their output.
class child_supervisor : public child_control {
public:
  child_supervisor(const std::vector<child_spec>& specs,
                   const launch_options& opts, const signal_guard& signals,
                   int devnull)
    : opts_(opts), signals_(signals), devnull_(devnull), buffer_(read_chunk) {
    for (const auto& spec : specs) {
      children_.emplace_back();
      children_.back().spec = &spec;
    }
  }

  child_supervisor(const child_supervisor&) = delete;
  child_supervisor& operator=(const child_supervisor&) = delete;

  /// Forks and execs child `i`; returns once its exec has succeeded.
  /// @throws runtime_failure if it could not be started; it is reaped then.
  void start(size_t i) {
    auto& c = children_[i];
    const auto& spec = *c.spec;
    const auto& args = c.restarts > 0 && !spec.restart_argv.empty()
                         ? spec.restart_argv
                         : spec.argv;
    const auto& program = args.front();
    // Everything the child needs is built here: between fork and exec the
    // child may only make async-signal-safe calls.
    auto env = child_environment(spec.env);
    auto path = find_program(program, env);
    if (path.empty())
      throw runtime_failure(fmt::format("cannot start {}: {}: not found in PATH",
                                        spec.name, program));
    std::vector<char*> argv;
    for (const auto& arg : args)
      argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& entry : env)
      envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
    unique_fd out_r, out_w, err_r, err_w, in_mine, in_child;
    if (!make_pipe(out_r, out_w) || !make_pipe(err_r, err_w))
      throw runtime_failure(fmt::format("cannot start {}: pipe: {}", spec.name,
                                        errno_text(errno)));
    if (spec.stdin_lines) {
      // A socket rather than a pipe: a write to a child that is gone fails
      // with EPIPE (MSG_NOSIGNAL) instead of raising SIGPIPE here.
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        throw runtime_failure(fmt::format("cannot start {}: socketpair: {}",
                                          spec.name, errno_text(errno)));
      in_mine = unique_fd{sv[0]};
      in_child = unique_fd{above_stdio(sv[1])};
      ::shutdown(in_mine.get(), SHUT_RD);
    }
    // Block every signal across fork, so that the child runs none of the
    // launcher's handlers before it resets them.
    sigset_t all, old_mask;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old_mask);
    auto parent = ::getpid();
    auto pid = ::fork();
    if (pid == 0)
      exec_child(path.c_str(), argv.data(), envp.data(), out_w.get(),
                 err_w.get(), in_child ? in_child.get() : devnull_, old_mask,
                 parent, signals_);
    auto fork_err = errno;
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    if (pid < 0)
      throw runtime_failure(fmt::format("cannot start {}: {}: fork: {}",
                                        spec.name, program,
                                        errno_text(fork_err)));
    c.pid = pid;
    c.running = true;
    out_w.reset();
    err_w.reset();
    in_child.reset();
    c.in = std::move(in_mine);
    // EOF: exec succeeded (the pipe is close-on-exec); an int: its errno.
    int exec_err = 0;
    ssize_t n;
    do {
      n = ::read(err_r.get(), &exec_err, sizeof(exec_err));
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      wait_for(c);
      throw runtime_failure(fmt::format("cannot start {}: {}: {}", spec.name,
                                        program, errno_text(exec_err)));
    }
    ::fcntl(out_r.get(), F_SETFL, ::fcntl(out_r.get(), F_GETFL) | O_NONBLOCK);
    c.out = std::move(out_r);
  }

  /// Copies output and watches the children until all have exited.
  /// @returns the exit code of child `main_index`.
  int wait(size_t main_index, int wake_read_fd) {
    using clock = std::chrono::steady_clock;
    const auto grace = opts_.grace;
    bool main_exited = false;
    bool sent_term = false;
    bool sent_kill = false;
    clock::time_point term_at;
    std::vector<pollfd> fds;
    std::vector<child_state*> polled;
    while (any_running()) {
      auto timeout = max_poll_ms;
      for (auto& c : children_)
        if (c.restart_pending) {
          auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        c.restart_at - clock::now())
                        .count();
          timeout = static_cast<int>(
            std::clamp<decltype(left)>(left + 1, 0, timeout));
        }
      if ((main_exited || aborted_) && !sent_kill) {
        auto next = sent_term ? term_at + grace : term_at;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      next - clock::now())
                      .count();
        timeout = static_cast<int>(
          std::clamp<decltype(left)>(left + 1, 0, max_poll_ms));
      }
      fds.clear();
      polled.clear();
      fds.push_back({wake_read_fd, POLLIN, 0});
      int control_fd = opts_.control != nullptr ? opts_.control->fd() : -1;
      fds.push_back({control_fd, POLLIN, 0}); // (ignored when -1)
      for (auto& c : children_) {
        if (c.out) {
          fds.push_back({c.out.get(), POLLIN, 0});
          polled.push_back(&c);
        }
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
        throw runtime_failure(fmt::format("launch: poll: {}",
                                          errno_text(errno)));
      if (fds[0].revents != 0)
        handle_signals(wake_read_fd);
      main_exited_ = main_exited;
      if (opts_.control != nullptr) {
        if (control_fd >= 0 && fds[1].revents != 0)
          opts_.control->readable(*this);
        opts_.control->tick(*this);
      }
      for (size_t i = 0; i < polled.size(); ++i)
        if (fds[i + 2].revents != 0)
          read_output(*polled[i]);
      give_up_if_aborted(sent_term, term_at);
      for (size_t i = 0; i < children_.size(); ++i) {
        auto& c = children_[i];
        if (!c.running || !try_reap(c))
          continue;
        drain(c);
        give_up_if_aborted(sent_term, term_at);
        if (i == main_index && WIFSIGNALED(c.wait_status) && !stopping_
            && c.restarts < c.spec->restart_budget) {
          // The main child crashed (killed by a signal): it is started
          // again, with restart_argv if given; the others keep running.
          auto delay = capped_backoff(opts_.restart_delay, c.restarts,
                                      std::chrono::seconds(10));
          c.restart_pending = true;
          c.restart_at = clock::now() + delay;
          launcher_line(fmt::format("{} {}; restarting in {} ms (restart {} "
                                    "of {})",
                                    c.spec->name, describe_wait_status(c.wait_status),
                                    delay.count(), c.restarts + 1,
                                    c.spec->restart_budget));
        } else if (i == main_index) {
          main_exited = true;
          if (!sent_term)
            term_at = clock::now() + grace;
          for (auto& other : children_)
            other.restart_pending = false;
        } else {
          launcher_line(fmt::format("{} {}", c.spec->name,
                                    describe_wait_status(c.wait_status)));
          c.in.reset();
          if (opts_.control != nullptr)
            opts_.control->exited(*this, c.spec->name, c.wait_status);
          bool died = WIFSIGNALED(c.wait_status)
                      || (WIFEXITED(c.wait_status)
                          && WEXITSTATUS(c.wait_status) != 0
                          && WEXITSTATUS(c.wait_status)
                               != c.spec->final_status);
          if (died && !main_exited && !stopping_
              && c.restarts < c.spec->restart_budget) {
            auto delay = capped_backoff(opts_.restart_delay, c.restarts,
                                      std::chrono::seconds(10));
            c.restart_pending = true;
            c.restart_at = clock::now() + delay;
            launcher_line(fmt::format("{}: restarting in {} ms (restart {} of "
                                      "{})",
                                      c.spec->name, delay.count(),
                                      c.restarts + 1, c.spec->restart_budget));
          }
        }
      }
      for (size_t i = 0; i < children_.size(); ++i) {
        auto& c = children_[i];
        if (!c.restart_pending || clock::now() < c.restart_at)
          continue;
        c.restart_pending = false;
        ++c.restarts;
        end_output(c);
        try {
          start(i);
        } catch (const std::exception& e) {
          launcher_line(fmt::format("{}: restart failed: {}", c.spec->name,
                                    e.what()));
        }
      }
      if (main_exited && !sent_term && clock::now() >= term_at) {
        sent_term = true;
        signal_running(SIGTERM, fmt::format("still running {} ms after {} "
                                            "exited; sending SIGTERM",
                                            grace.count(),
                                            children_[main_index].spec->name));
      }
      if (sent_term && !sent_kill && clock::now() >= term_at + grace) {
        sent_kill = true;
        signal_running(SIGKILL, fmt::format("still running {} ms after "
                                            "SIGTERM; sending SIGKILL",
                                            grace.count()));
      }
      flush();
    }
    // Grandchildren may still hold a pipe open: take what is there, no more.
    for (auto& c : children_) {
      drain(c);
      end_output(c);
    }
    flush();
    if (aborted_)
      return launch_aborted;
    return exit_code(children_[main_index].wait_status);
  }

  /// Kills every running child with SIGKILL and reaps it. Never throws.
  void kill_all() noexcept {
    for (auto& c : children_) {
      if (c.running) {
        ::kill(c.pid, SIGKILL);
        wait_for(c);
      }
    }
  }

private:

  /// Once abort_when has given up: no more restarts, SIGTERM to every
  /// running child now (SIGKILL follows `grace` later), once.
  void give_up_if_aborted(bool& sent_term,
                          std::chrono::steady_clock::time_point& term_at) {
    if (!aborted_ || sent_term)
      return;
    stopping_ = true;
    for (auto& c : children_)
      c.restart_pending = false;
    sent_term = true;
    term_at = std::chrono::steady_clock::now();
    signal_running(SIGTERM, "the start is given up; sending SIGTERM");
  }

  bool any_running() const {
    return std::any_of(children_.begin(), children_.end(),
                       [](const child_state& c) { return c.running; });
  }

  /// Reaps `c` if it has exited; returns whether it did.
  bool try_reap(child_state& c) {
    int status = 0;
    auto res = ::waitpid(c.pid, &status, WNOHANG);
    if (res == c.pid) {
      c.running = false;
      c.wait_status = status;
      // srun's 128 + N for a task killed by signal N: as if N killed it.
      if (c.spec->status_reports_signal && WIFEXITED(status)
          && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 128 + NSIG)
        c.wait_status = W_EXITCODE(0, WEXITSTATUS(status) - 128);
      return true;
    }
    if (res < 0 && errno == ECHILD) {
      // Someone else reaped it (e.g. a SIGCHLD handler of another thread that
      // ran before ours was installed); its status is lost.
      c.running = false;
      c.wait_status = 0;
      return true;
    }
    return false;
  }

  /// Blocks until `c` has exited and reaps it.
  void wait_for(child_state& c) noexcept {
    int status = 0;
    pid_t res;
    do {
      res = ::waitpid(c.pid, &status, 0);
    } while (res < 0 && errno == EINTR);
    c.running = false;
    c.wait_status = status;
  }

  void handle_signals(int wake_read_fd) {
    unsigned char sigs[64];
    ssize_t n;
    while ((n = ::read(wake_read_fd, sigs, sizeof(sigs))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (sigs[i] == SIGINT || sigs[i] == SIGTERM) {
          // The user is stopping everything: no child comes back.
          stopping_ = true;
          for (auto& c : children_)
            c.restart_pending = false;
          signal_running(sigs[i], fmt::format("received {}; forwarding it",
                                              signal_name(sigs[i])));
        }
      }
    }
  }

  /// Sends `sig` to every running child and says so, naming them; SIGTERM
  /// as each child's child_spec::stop_signal.
  void signal_running(int sig, const std::string& why) {
    std::string names;
    for (auto& c : children_) {
      if (c.running) {
        ::kill(c.pid, sig == SIGTERM ? c.spec->stop_signal : sig);
        names += names.empty() ? c.spec->name : ", " + c.spec->name;
      }
    }
    if (!names.empty())
      launcher_line(fmt::format("{}: {}", names, why));
  }

  /// Reads once from the child's pipe. Returns false at EOF or when the pipe
  /// is empty.
  bool read_output(child_state& c) {
    if (!c.out)
      return false;
    ssize_t n;
    do {
      n = ::read(c.out.get(), buffer_.data(), buffer_.size());
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      c.lines.feed({buffer_.data(), static_cast<size_t>(n)},
                   [&](std::string_view line) { child_line(c, line); });
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return false;
    end_output(c); // EOF, or an error that ends the stream as well
    return false;
  }

  /// Reads what the child's pipe holds now, without waiting for more.
  void drain(child_state& c) {
    while (read_output(c)) {
      // nop
    }
  }

  /// Prints the last, unterminated line and closes the pipe.
  void end_output(child_state& c) {
    c.lines.finish([&](std::string_view line) { child_line(c, line); });
    c.out.reset();
  }

  void child_line(const child_state& c, std::string_view line) {
    fmt::format_to(std::back_inserter(batch_), "[{}] {}\n", c.spec->name,
                   line);
    if (!aborted_ && opts_.abort_when
        && opts_.abort_when(c.spec->name, c.restarts, line))
      aborted_ = true;
    if (opts_.control != nullptr)
      opts_.control->line(*this, c.spec->name, line);
  }

  // -- child_control --------------------------------------------------------

  void start_child(child_spec spec) override {
    if (main_exited_ || stopping_ || aborted_)
      throw runtime_failure(fmt::format("cannot start {}: the job is ending",
                                        spec.name));
    if (spec.argv.empty() || find(spec.name) != nullptr)
      throw std::invalid_argument(fmt::format("start_child: child \"{}\": "
                                              "empty argv or name taken",
                                              spec.name));
    owned_.push_back(std::move(spec));
    children_.emplace_back();
    children_.back().spec = &owned_.back();
    try {
      start(children_.size() - 1);
    } catch (...) {
      children_.pop_back();
      owned_.pop_back();
      throw;
    }
  }

  bool signal_child(const std::string& name, int sig) override {
    auto* c = find(name);
    return c != nullptr && c->running && ::kill(c->pid, sig) == 0;
  }

  bool write_line(const std::string& name, std::string_view line) override {
    auto* c = find(name);
    if (c == nullptr || !c->running || !c->in)
      return false;
    std::string text{line};
    text += '\n';
    size_t done = 0;
    while (done < text.size()) {
      auto n = ::send(c->in.get(), text.data() + done, text.size() - done,
                      MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  bool running(const std::string& name) const override {
    for (auto& c : children_)
      if (c.spec->name == name)
        return c.running || c.restart_pending;
    return false;
  }

  void say(std::string_view line) override {
    launcher_line(line);
  }

  child_state* find(const std::string& name) {
    for (auto& c : children_)
      if (c.spec->name == name)
        return &c;
    return nullptr;
  }

  void launcher_line(std::string_view line) {
    fmt::format_to(std::back_inserter(batch_), "[launch] {}\n", line);
  }

  /// Writes the lines collected so far in one go.
  void flush() {
    if (batch_.empty())
      return;
    std::fwrite(batch_.data(), 1, batch_.size(), opts_.out);
    std::fflush(opts_.out);
    batch_.clear();
  }

  /// Set once SIGINT or SIGTERM reached the launcher, or the launch was
  /// given up: no more restarts.
  bool stopping_ = false;
  /// Set once abort_when returned true.
  bool aborted_ = false;
  const launch_options& opts_;
  const signal_guard& signals_;
  int devnull_;
  /// A deque: children started later (start_child) leave the others where
  /// they are.
  std::deque<child_state> children_;
  std::deque<child_spec> owned_;
  /// The main child has exited: start_child refuses.
  bool main_exited_ = false;
  std::vector<char> buffer_;
  std::string batch_;
};

} // namespace

int run_children(const std::vector<child_spec>& children, size_t main_index,
                 const launch_options& opts) {
  if (main_index >= children.size())
    throw std::invalid_argument(
      fmt::format("run_children: main_index {} is out of range for {} children",
                  main_index, children.size()));
  for (const auto& spec : children) {
    if (spec.argv.empty())
      throw std::invalid_argument(
        fmt::format("run_children: child {} has an empty argv", spec.name));
    for (const auto& kv : spec.env)
      if (kv.first.empty() || kv.first.find('=') != std::string::npos)
        throw std::invalid_argument(
          fmt::format("run_children: child {}: invalid environment name \"{}\"",
                      spec.name, kv.first));
  }
  busy_guard only_call;
  unique_fd devnull{above_stdio(::open("/dev/null", O_RDWR | O_CLOEXEC))};
  if (!devnull)
    throw runtime_failure(
      fmt::format("launch: cannot open /dev/null: {}", errno_text(errno)));
  unique_fd wake_r, wake_w;
  if (!make_pipe(wake_r, wake_w, O_NONBLOCK))
    throw runtime_failure(fmt::format("launch: pipe: {}", errno_text(errno)));
  // Declared after the pipe: restores the handlers before the pipe closes.
  signal_guard signals{wake_w.get()};
  child_supervisor supervisor{children, opts, signals, devnull.get()};
  try {
    for (size_t i = 0; i < children.size(); ++i)
      supervisor.start(i);
    return supervisor.wait(main_index, wake_r.get());
  } catch (...) {
    supervisor.kill_all();
    throw;
  }
}

} // namespace actorps
