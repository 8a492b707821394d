#include "cluster/launch/node_launcher.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.hpp"

using namespace actorps;
using namespace std::chrono_literals;

namespace {

/// A child running `script` with /bin/sh.
child_spec sh(std::string name, std::string script,
              std::vector<std::pair<std::string, std::string>> env = {}) {
  return {std::move(name), {"/bin/sh", "-c", std::move(script)},
          std::move(env)};
}

/// A temporary file that collects the launcher's output.
class capture {
public:
  capture() : file_(std::tmpfile()) {
    REQUIRE(file_ != nullptr);
  }

  capture(const capture&) = delete;
  capture& operator=(const capture&) = delete;

  ~capture() {
    std::fclose(file_);
  }

  launch_options options(std::chrono::milliseconds grace = 5000ms) const {
    launch_options opts;
    opts.out = file_;
    opts.grace = grace;
    return opts;
  }

  std::string text() const {
    std::fflush(file_);
    std::rewind(file_);
    std::string result;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), file_)) > 0)
      result.append(buf, n);
    return result;
  }

  std::vector<std::string> lines() const {
    std::vector<std::string> result;
    std::istringstream in{text()};
    for (std::string line; std::getline(in, line);)
      result.push_back(line);
    return result;
  }

private:
  std::FILE* file_;
};

/// True if this process has no child at all, running or zombie.
bool no_children_left() {
  return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
    .count();
}

/// The descriptors this process has open (Linux: /proc/self/fd).
std::set<int> open_fds() {
  std::set<int> result;
  auto dir = ::opendir("/proc/self/fd");
  REQUIRE(dir != nullptr);
  while (auto entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.')
      result.insert(std::atoi(entry->d_name));
  }
  result.erase(::dirfd(dir));
  ::closedir(dir);
  return result;
}

} // namespace

TEST_CASE("every line a child writes to stdout or stderr is printed with its "
          "name, a last line without newline too",
          "[launcher]") {
  capture out;
  auto status = run_children(
    {sh("chief", "echo out1; echo err1 >&2; echo; printf 'last'")}, 0,
    out.options());
  CHECK(status == 0);
  CHECK(out.text() == "[chief] out1\n[chief] err1\n[chief] \n[chief] last\n");
  CHECK(no_children_left());
}

TEST_CASE("lines of different children never mix", "[launcher]") {
  capture out;
  auto loop = [](char c) {
    return fmt::format("i=0; while [ $i -lt 300 ]; do "
                       "echo {0}; echo {0} >&2; i=$((i+1)); done",
                       std::string(200, c));
  };
  CHECK(run_children({sh("a", loop('a')), sh("b", loop('b'))}, 0,
                     out.options())
        == 0);
  size_t count = 0;
  for (const auto& line : out.lines()) {
    if (line.rfind("[launch] ", 0) == 0)
      continue; // "b exited with status 0" when b ends first
    ++count;
    INFO(line);
    auto ok = line == "[a] " + std::string(200, 'a')
              || line == "[b] " + std::string(200, 'b');
    REQUIRE(ok);
  }
  CHECK(count == 1200);
  CHECK(no_children_left());
}

TEST_CASE("a line longer than 64 KiB is split into pieces of 64 KiB",
          "[launcher]") {
  capture out;
  CHECK(run_children({sh("long", "head -c 100000 /dev/zero | tr '\\0' x; "
                                 "echo; echo end")},
                     0, out.options())
        == 0);
  auto lines = out.lines();
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "[long] " + std::string(65536, 'x'));
  CHECK(lines[1] == "[long] " + std::string(100000 - 65536, 'x'));
  CHECK(lines[2] == "[long] end");
}

TEST_CASE("the main child's exit status is returned, or 128 + the signal that "
          "killed it",
          "[launcher]") {
  struct row {
    const char* script;
    int expected;
  };
  const row rows[] = {
    {"exit 0", 0},
    {"exit 3", 3},
    {"exit 255", 255},
    {"kill -9 $$", 128 + SIGKILL},
    {"kill -TERM $$", 128 + SIGTERM},
  };
  for (const auto& r : rows) {
    INFO(r.script);
    capture out;
    CHECK(run_children({sh("ps0", "exit 0"), sh("chief", r.script)}, 1,
                       out.options(100ms))
          == r.expected);
    CHECK(no_children_left());
  }
}

TEST_CASE("a child still running after the main one exits gets SIGTERM after "
          "the grace period",
          "[launcher]") {
  capture out;
  auto t0 = std::chrono::steady_clock::now();
  CHECK(run_children({sh("chief", "exit 0"), sh("ps0", "exec sleep 30")}, 0,
                     out.options(200ms))
        == 0);
  auto elapsed = seconds_since(t0);
  CHECK(elapsed >= 0.2);
  CHECK(elapsed < 3.0);
  CHECK(out.text()
        == "[launch] ps0: still running 200 ms after chief exited; "
           "sending SIGTERM\n"
           "[launch] ps0 killed by signal 15 (SIGTERM)\n");
  CHECK(no_children_left());
}

TEST_CASE("a child that ignores SIGTERM gets SIGKILL after twice the grace "
          "period",
          "[launcher]") {
  capture out;
  auto t0 = std::chrono::steady_clock::now();
  CHECK(run_children({sh("ps0", "trap '' TERM; exec sleep 30"),
                      sh("chief", "sleep 0.1; exit 5")},
                     1, out.options(150ms))
        == 5);
  auto elapsed = seconds_since(t0);
  CHECK(elapsed >= 0.4);
  CHECK(elapsed < 3.0);
  CHECK(out.text()
        == "[launch] ps0: still running 150 ms after chief exited; "
           "sending SIGTERM\n"
           "[launch] ps0: still running 150 ms after SIGTERM; "
           "sending SIGKILL\n"
           "[launch] ps0 killed by signal 9 (SIGKILL)\n");
  CHECK(no_children_left());
}

TEST_CASE("a child that exits before the main one is reported and the main "
          "one's status is still returned",
          "[launcher]") {
  capture out;
  CHECK(run_children({sh("ps0", "echo bye; exit 2"), sh("ps1", "kill -9 $$"),
                      sh("chief", "sleep 0.3; echo done; exit 4")},
                     2, out.options())
        == 4);
  auto text = out.text();
  // Its output comes first (ps1's report may come in between).
  auto bye = text.find("[ps0] bye\n");
  auto exited = text.find("[launch] ps0 exited with status 2\n");
  CHECK(bye != std::string::npos);
  CHECK(exited != std::string::npos);
  CHECK(bye < exited);
  CHECK_THAT(text, Catch::Contains("[launch] ps1 killed by signal 9 "
                                   "(SIGKILL)\n"));
  CHECK_THAT(text, Catch::EndsWith("[chief] done\n"));
  CHECK(no_children_left());
}

TEST_CASE("a program that cannot be started throws naming the child and the "
          "program, and the children already started are reaped",
          "[launcher]") {
  const char* programs[] = {"/nonexistent/actorps-no-such-program",
                            "actorps-no-such-program-in-path", "/dev/null"};
  for (auto program : programs) {
    INFO(program);
    capture out;
    auto t0 = std::chrono::steady_clock::now();
    try {
      run_children({sh("ps0", "exec sleep 30"), {"worker1", {program}, {}},
                    sh("chief", "exit 0")},
                   2, out.options());
      FAIL("no exception");
    } catch (const runtime_failure& e) {
      CHECK_THAT(e.what(), Catch::Contains("worker1")
                             && Catch::Contains(program));
    }
    CHECK(seconds_since(t0) < 3.0);
    CHECK(no_children_left());
  }
}

TEST_CASE("invalid arguments are rejected before anything starts",
          "[launcher]") {
  capture out;
  CHECK_THROWS_AS(run_children({sh("chief", "exit 0")}, 1, out.options()),
                  std::invalid_argument);
  CHECK_THROWS_AS(run_children({}, 0, out.options()), std::invalid_argument);
  CHECK_THROWS_AS(run_children({{"chief", {}, {}}}, 0, out.options()),
                  std::invalid_argument);
  CHECK_THROWS_AS(run_children({sh("chief", "exit 0", {{"A=B", "c"}})}, 0,
                               out.options()),
                  std::invalid_argument);
  CHECK(out.text().empty());
  CHECK(no_children_left());
}

TEST_CASE("environment entries reach the child and replace the parent's",
          "[launcher]") {
  ::setenv("ACTORPS_LAUNCHER_INHERITED", "kept", 1);
  capture out;
  auto script = "echo \"$ACTORPS_LAUNCHER_NEW|$ACTORPS_LAUNCHER_INHERITED\"";
  auto status = run_children(
    {sh("ps0", script,
        {{"ACTORPS_LAUNCHER_NEW", "a b=c"},
         {"ACTORPS_LAUNCHER_INHERITED", "replaced"}}),
     sh("chief", script)},
    1, out.options());
  ::unsetenv("ACTORPS_LAUNCHER_INHERITED");
  CHECK(status == 0);
  auto text = out.text();
  CHECK_THAT(text, Catch::Contains("[ps0] a b=c|replaced\n"));
  CHECK_THAT(text, Catch::Contains("[chief] |kept\n"));
}

TEST_CASE("a program without '/' is looked up in the child's PATH",
          "[launcher]") {
  capture out;
  CHECK(run_children({{"chief", {"sh", "-c", "exit 6"}, {}}}, 0,
                     out.options())
        == 6);
}

TEST_CASE("SIGINT received by the launcher is forwarded to the children and "
          "the previous handler is restored",
          "[launcher]") {
  struct sigaction before, after;
  ::sigaction(SIGINT, nullptr, &before);
  capture out;
  auto t0 = std::chrono::steady_clock::now();
  // $PPID of the second child is this process, the launcher.
  CHECK(run_children({sh("chief", "exec sleep 30"),
                      sh("ps0", "kill -INT $PPID; exec sleep 30")},
                     0, out.options())
        == 128 + SIGINT);
  CHECK(seconds_since(t0) < 3.0);
  CHECK_THAT(out.text(), Catch::StartsWith("[launch] chief, ps0: received "
                                           "SIGINT; forwarding it\n"));
  ::sigaction(SIGINT, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);
  CHECK(no_children_left());
}

TEST_CASE("children inherit no descriptor the launcher opened", "[launcher]") {
  capture out;
  auto before = open_fds();
  // The first child's pipe and the launcher's own pipe exist when the second
  // one starts.
  CHECK(run_children({sh("ps0", "exec sleep 30"),
                      sh("chief", "ls /proc/$$/fd; exit 0")},
                     1, out.options(0ms))
        == 0);
  size_t listed = 0;
  for (const auto& line : out.lines()) {
    if (line.rfind("[chief] ", 0) != 0)
      continue;
    auto fd = std::stoi(line.substr(8));
    INFO(line);
    CHECK((fd <= 2 || before.count(fd) == 1));
    ++listed;
  }
  CHECK(listed >= 3);
  CHECK(open_fds() == before);
}

TEST_CASE("pick_free_ports returns distinct ports that can be bound",
          "[launcher]") {
  auto ports = pick_free_ports(5);
  REQUIRE(ports.size() == 5);
  CHECK(std::set<uint16_t>(ports.begin(), ports.end()).size() == 5);
  for (auto port : ports) {
    INFO(port);
    CHECK(port != 0);
    auto fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(port);
    CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
    ::close(fd);
  }
  CHECK(pick_free_ports(0).empty());
}

TEST_CASE("pick_free_ports rejects a host that is not an IPv4 literal",
          "[launcher]") {
  for (auto host : {"localhost", "::1", "127.0.0", ""}) {
    INFO(host);
    CHECK_THROWS_AS(pick_free_ports(1, host), runtime_failure);
  }
}

TEST_CASE("a child that dies is restarted within its budget",
          "[launcher]") {
  capture out;
  auto opts = out.options(200ms);
  opts.restart_delay = 20ms;
  auto flaky = sh("worker1", "echo run; exit 3");
  flaky.restart_budget = 2;
  // A clean exit is not restarted.
  auto clean = sh("worker0", "exit 0");
  clean.restart_budget = 2;
  CHECK(run_children({flaky, clean, sh("chief", "sleep 0.6")}, 2, opts) == 0);
  auto text = out.text();
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (auto pos = text.find(what); pos != std::string::npos;
         pos = text.find(what, pos + 1))
      ++n;
    return n;
  };
  INFO(text);
  CHECK(count("[worker1] run") == 3);
  CHECK(count("[launch] worker1 exited with status 3") == 3);
  CHECK(count("[launch] worker1: restarting in 20 ms (restart 1 of 2)") == 1);
  CHECK(count("[launch] worker1: restarting in 40 ms (restart 2 of 2)") == 1);
  CHECK(count("restart 3 of") == 0);
  CHECK(count("worker0: restarting") == 0);
  CHECK(no_children_left());
}

TEST_CASE("a main child killed by a signal is restarted with its restart "
          "command line", "[launcher]") {
  capture out;
  auto opts = out.options(200ms);
  opts.restart_delay = 20ms;
  auto chief = sh("chief", "echo first; kill -9 $$");
  chief.restart_budget = 1;
  chief.restart_argv = {"/bin/sh", "-c", "echo second; exit 4"};
  CHECK(run_children({sh("ps0", "sleep 0.3"), chief}, 1, opts) == 4);
  auto text = out.text();
  INFO(text);
  CHECK(text.find("[chief] first") != std::string::npos);
  CHECK(text.find("[launch] chief killed by signal 9 (SIGKILL); restarting in "
                  "20 ms (restart 1 of 1)")
        != std::string::npos);
  CHECK(text.find("[chief] second") != std::string::npos);
  // An exit status is the main child's answer: not restarted.
  CHECK(text.find("restart 2") == std::string::npos);
  CHECK(no_children_left());
}

TEST_CASE("a launch that abort_when gives up stops every child at once, "
          "restarts none and returns launch_aborted",
          "[launcher]") {
  capture out;
  auto opts = out.options(2000ms);
  opts.restart_delay = 20ms;
  std::vector<std::string> seen;
  opts.abort_when = [&](const std::string& name, uint32_t restarts,
                        std::string_view line) {
    seen.push_back(fmt::format("{} {} {}", name, restarts, line));
    return line.find("Address already in use") != std::string_view::npos;
  };
  auto ps = sh("ps0", "echo 'cannot listen on 127.0.0.1:1: Address already in "
                      "use'; exit 1");
  ps.restart_budget = 3;
  auto worker = sh("worker0", "echo up; exec sleep 30");
  worker.restart_budget = 3;
  auto t0 = std::chrono::steady_clock::now();
  CHECK(run_children({ps, worker, sh("chief", "exec sleep 30")}, 2, opts)
        == launch_aborted);
  CHECK(std::chrono::steady_clock::now() - t0 < 1500ms); // SIGTERM, no grace
  auto text = out.text();
  INFO(text);
  CHECK(text.find("[ps0] cannot listen on") != std::string::npos);
  CHECK(text.find("restarting") == std::string::npos);
  CHECK(text.find("the start is given up; sending SIGTERM")
        != std::string::npos);
  CHECK(std::find(seen.begin(), seen.end(),
                  "ps0 0 cannot listen on 127.0.0.1:1: Address already in use")
        != seen.end());
  CHECK(no_children_left());
}

TEST_CASE("lines that abort_when lets pass change nothing", "[launcher]") {
  capture out;
  auto opts = out.options(200ms);
  opts.abort_when = [](const std::string&, uint32_t, std::string_view) {
    return false;
  };
  CHECK(run_children({sh("ps0", "echo fine"), sh("chief", "echo done; exit 5")},
                     1, opts)
        == 5);
  CHECK(out.text().find("[chief] done") != std::string::npos);
  CHECK(no_children_left());
}

namespace {

/// A launch_control that, once the main child says "ready", starts one
/// more child, signals another and writes a line to the main child.
struct test_control : launch_control {
  std::vector<std::string> exits;
  bool duplicate_refused = false;
  bool wrote_to_plain = true;
  bool signalled = false;
  int ticks = 0;

  void line(child_control& ctl, const std::string& name,
            std::string_view text) override {
    if (name != "chief" || text != "ready")
      return;
    ctl.start_child(sh("extra", "echo extra ran"));
    try {
      ctl.start_child(sh("extra", "echo twice"));
    } catch (const std::invalid_argument&) {
      duplicate_refused = true;
    }
    wrote_to_plain = ctl.write_line("sleeper", "nobody reads this");
    signalled = ctl.signal_child("sleeper", SIGTERM);
    CHECK(ctl.write_line("chief", "hello"));
  }

  void exited(child_control&, const std::string& name, int status) override {
    exits.push_back(name + ":" + std::to_string(status));
  }

  void tick(child_control&) override {
    ++ticks;
  }
};

} // namespace

TEST_CASE("a launch_control starts children, signals them and writes lines to "
          "the main child's stdin while they run",
          "[launcher]") {
  capture out;
  auto opts = out.options(500ms);
  test_control ctl;
  opts.control = &ctl;
  auto chief = sh("chief", "echo ready; read x; echo \"got $x\"; sleep 0.3");
  chief.stdin_lines = true;
  CHECK(run_children({sh("sleeper", "exec sleep 30"), chief}, 1, opts) == 0);
  auto text = out.text();
  CHECK(text.find("[extra] extra ran") != std::string::npos);
  CHECK(text.find("[chief] got hello") != std::string::npos);
  CHECK(ctl.duplicate_refused);
  CHECK_FALSE(ctl.wrote_to_plain);
  CHECK(ctl.signalled);
  CHECK(ctl.ticks > 0);
  // The extra child exited 0; the sleeper died of the SIGTERM it was sent.
  CHECK(std::find(ctl.exits.begin(), ctl.exits.end(), "extra:0")
        != ctl.exits.end());
  CHECK(std::find(ctl.exits.begin(), ctl.exits.end(),
                  "sleeper:" + std::to_string(SIGTERM))
        != ctl.exits.end());
  CHECK(no_children_left());
}

TEST_CASE("a child without stdin_lines reads end of file from stdin",
          "[launcher]") {
  capture out;
  CHECK(run_children({sh("chief", "if read x; then echo got; else echo eof; fi")},
                     0, out.options())
        == 0);
  CHECK(out.text().find("[chief] eof") != std::string::npos);
}
