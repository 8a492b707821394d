#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <signal.h>

namespace actorps {

/// One child process to start.
struct child_spec {
  /// Prefix shown on its output lines, e.g. "ps0", "worker1", "chief".
  std::string name;
  /// argv[0] is the program. A path containing '/' is executed as is; a bare
  /// name is looked up in the child's PATH (after `env` is applied).
  std::vector<std::string> argv;
  /// Variables added to the parent's environment, or replacing the parent's
  /// value of the same name. Names must be non-empty and free of '='.
  std::vector<std::pair<std::string, std::string>> env;
  /// How often the child is started again when it dies (exits with a
  /// status other than 0, or by a signal) while the main child runs: after
  /// launch_options::restart_delay, doubling with each restart. The main
  /// child itself is restarted only when a signal killed it (a crash; an
  /// exit status is its answer).
  uint32_t restart_budget = 0;
  /// An exit status that means "stopped on purpose" (e.g. by the
  /// coordinator of a failed job): a child exiting with it is never started
  /// again (-1: none).
  int final_status = -1;
  /// The command line of restarts (empty: argv), e.g. with --resume.
  std::vector<std::string> restart_argv;
  /// Whether the child reports a signal that killed the program it runs as
  /// exit status 128 + N, as srun does: such a status then counts as killed
  /// by signal N (for restarts and messages).
  bool status_reports_signal = false;
  /// What the child gets where run_children would send SIGTERM (a SIGTERM
  /// forwarded, the stop after the main child): srun, for one, answers
  /// SIGTERM by killing its task at once, but passes SIGUSR1 on, which
  /// `actorps node` takes as SIGTERM (cluster/job/stop_request.hpp).
  int stop_signal = SIGTERM;
  /// The child's stdin is a socket the launcher writes lines to
  /// (child_control::write_line), e.g. the coordinator's scale commands;
  /// otherwise /dev/null.
  bool stdin_lines = false;
};

/// What a launch_control may do with the children while run_children runs
/// them (only from inside its calls, on the launcher's thread).
class child_control {
public:
  virtual ~child_control();
  /// Starts one more child (not the main one) and watches it like the
  /// others. @throws runtime_failure as run_children's start does, or
  ///         std::invalid_argument for a name already taken or an empty argv.
  virtual void start_child(child_spec spec) = 0;
  /// Sends `sig` to the running child `name`; false if none runs.
  virtual bool signal_child(const std::string& name, int sig) = 0;
  /// Writes `line` and a newline to the stdin of child `name` (started with
  /// child_spec::stdin_lines); false if it does not run or does not read.
  virtual bool write_line(const std::string& name, std::string_view line) = 0;
  /// Whether child `name` runs now.
  virtual bool running(const std::string& name) const = 0;
  /// Prints "[launch] LINE".
  virtual void say(std::string_view line) = 0;
};

/// Hooks into run_children for a launcher that changes its children while
/// they run (actorps scale). Every call comes from the launcher's thread.
class launch_control {
public:
  virtual ~launch_control();
  /// A descriptor to watch (-1: none): readable() is called when it is.
  virtual int fd() const {
    return -1;
  }
  virtual void readable(child_control&) {
    // nop
  }
  /// Each line a child prints (without the prefix).
  virtual void line(child_control&, const std::string& /* name */,
                    std::string_view /* line */) {
    // nop
  }
  /// A child other than the main one exited (its raw wait status).
  virtual void exited(child_control&, const std::string& /* name */,
                      int /* wait_status */) {
    // nop
  }
  /// At least every 250 ms, for deadlines.
  virtual void tick(child_control&) {
    // nop
  }
};

/// How run_children starts, watches and stops its children.
struct launch_options {
  /// Where the prefixed lines go: the children's stdout and stderr, merged,
  /// and the launcher's own "[launch] ..." lines. Not owned; flushed after
  /// every batch of lines.
  std::FILE* out = stdout;
  /// After the main child exits: how long the others get to exit by
  /// themselves, then SIGTERM; after the same time again, SIGKILL.
  std::chrono::milliseconds grace{5000};
  /// The first restart of a child waits this long (see
  /// child_spec::restart_budget).
  std::chrono::milliseconds restart_delay{200};
  /// Called with each line a child prints (its name, its restarts so far,
  /// the line without the prefix); when it returns true the whole launch is
  /// given up: no child is restarted any more, every running child gets
  /// SIGTERM at once and SIGKILL `grace` later, and run_children returns
  /// launch_aborted. For a start that cannot work, e.g. a node whose port
  /// another program took (see run_launch). Empty: never.
  std::function<bool(const std::string& name, uint32_t restarts,
                     std::string_view line)>
    abort_when;
  /// Hooks for changes while the children run (not owned; null: none).
  launch_control* control = nullptr;
};

/// What run_children returns when launch_options::abort_when gave up.
constexpr int launch_aborted = -1;

/// Starts every child, copies each line a child writes to opts.out as
/// "[name] line\n", and waits for them.
///
/// Each child runs in the launcher's process group (so a Ctrl-C in the
/// terminal reaches it too), with stdin from /dev/null and stdout and stderr
/// on one pipe (like `2>&1`, so their relative order is kept). Lines of
/// different children never interleave mid-line; a final line without '\n'
/// is still printed; a line longer than 64 KiB is split into pieces of
/// 64 KiB rather than buffered without bound.
///
/// Returns when the child `main_index` has exited and every other child has
/// exited or been killed as described in launch_options::grace. When a
/// non-main child exits, before or after the main one, prints
/// "[launch] NAME exited with status S" (or "[launch] NAME killed by signal
/// N (SIGNAME)") and keeps going. SIGINT and SIGTERM received by the launcher
/// are forwarded to all running children, and the launcher keeps waiting as
/// usual. Every child is reaped before the function returns or throws, and
/// the previous handlers of SIGINT, SIGTERM and SIGCHLD are restored.
///
/// @returns the main child's exit status (0..255), or 128 + the signal number
///          if a signal killed it, or launch_aborted (see
///          launch_options::abort_when).
/// @throws runtime_failure (core/error.hpp) naming the child and the program
///         if a child cannot be started (fork fails, or exec fails: e.g. the
///         program does not exist); the children already started are then
///         killed with SIGKILL and reaped before the throw.
/// @throws std::invalid_argument if `main_index` is out of range, a child has
///         an empty argv, or an env name is empty or contains '='; nothing
///         is started then.
/// @throws std::logic_error if another call is already running in this
///         process (the signal handlers are process-wide).
/// @note Linux/POSIX only. Output from grandchildren that keep a child's pipe
///       open after the child exits is read only until the last child is
///       reaped.
int run_children(const std::vector<child_spec>& children, size_t main_index,
                 const launch_options& opts = {});

} // namespace actorps
