// actorps-bench: how fast actorps moves tensors and trains, each number next
// to its limit measured by the same program in the same run.
//
//   actorps-bench [--sizes 1024,65536,1048576,4194304] [--iterations N]
//                 [--epochs N] [--config FILE] [--no-training] [--quick]
//                 [--out bench/results.json] [--markdown docs/benchmarks.md]
//   actorps-bench --validate FILE     checks a results file (exit 0 / 1)
//
// Micro-benchmarks run under Google Benchmark with manual timing; each
// records every iteration's latency, so p50 and p90 are exact.
// - limits: memcpy and axpy (y += a x) of N floats in this process; raw TCP
//   over loopback (TCP_NODELAY): N floats one way, an 8-byte answer back.
// - transfer: pull and push of a variable of N floats, the ps applying SGD,
//   with 1 and 2 workers at once; in one process (actor messages) and between
//   two processes (gate + CAF BASP, as a worker talks to a ps).
// - training: `actorps train` and `actorps launch` with 1, 2 and 4 workers
//   (2 ps) on the job of --config (default configs/fashion_mnist.json),
//   samples/s and each worker's share of time per phase.
// Latencies in milliseconds; GB/s = N * 4 bytes / p50.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/config.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/gate.hpp"
#include "cluster/local_cluster.hpp"

namespace {

using namespace actorps;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// -- results ------------------------------------------------------------------

/// One measured operation: every iteration's latency in seconds.
struct point {
  std::string kind;  ///< "limit", "transfer"
  std::string op;    ///< memcpy, axpy, tcp, pull, push
  std::string where; ///< "in-process", "loopback"
  uint64_t floats = 0;
  int workers = 1;
  std::vector<double> latencies;

  double pct(double p) const {
    auto xs = latencies;
    std::sort(xs.begin(), xs.end());
    return xs[std::min(xs.size() - 1, static_cast<size_t>(p * xs.size()))];
  }
};

std::vector<point> points;

void record(benchmark::State& st, point p) {
  auto p50 = p.pct(0.5);
  st.counters["p50_ms"] = p50 * 1e3;
  st.counters["p90_ms"] = p.pct(0.9) * 1e3;
  st.counters["GB/s"] = p.floats * 4 / p50 / 1e9;
  points.push_back(std::move(p));
}

// -- the server process: one ps per size behind a gate, and a TCP sink --------

/// Reads exactly n bytes; false on EOF or error.
bool read_all(int fd, char* buf, size_t n) {
  while (n > 0) {
    auto k = ::read(fd, buf, n);
    if (k <= 0)
      return false;
    buf += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool write_all(int fd, const char* buf, size_t n) {
  while (n > 0) {
    auto k = ::send(fd, buf, n, MSG_NOSIGNAL);
    if (k <= 0)
      return false;
    buf += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// Raw TCP: per request, an 8-byte length, that many bytes, an 8-byte answer.
void tcp_sink(int listen_fd) {
  for (;;) {
    int fd = accept(listen_fd, nullptr, nullptr);
    if (fd < 0)
      return;
    set_nodelay(fd);
    std::thread([fd] {
      std::vector<char> buf;
      uint64_t n = 0;
      while (read_all(fd, reinterpret_cast<char*>(&n), sizeof(n))) {
        buf.resize(n);
        if (!read_all(fd, buf.data(), n)
            || !write_all(fd, reinterpret_cast<char*>(&n), sizeof(n)))
          break;
      }
      close(fd);
    }).detach();
  }
}

int listen_loopback(uint16_t& port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0
      || listen(fd, 16) != 0)
    return -1;
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  port = ntohs(sa.sin_port);
  return fd;
}

/// The child: writes the TCP sink's port, then one ps port per size, then
/// serves until `stop_fd` closes.
[[noreturn]] void serve(const std::vector<uint64_t>& sizes, int port_fd,
                        int stop_fd) {
  uint16_t tcp_port = 0;
  int lfd = listen_loopback(tcp_port);
  if (lfd < 0)
    std::_Exit(1);
  std::thread(tcp_sink, lfd).detach();
  std::vector<uint16_t> ports{tcp_port};
  {
    system_config cfg{1, network_options{}};
    caf::actor_system sys{cfg};
    std::vector<ps_actor> servers;
    std::vector<std::unique_ptr<gate>> gates;
    for (size_t i = 0; i < sizes.size(); ++i) {
      servers.push_back(spawn_ps(
        sys, ps_options{static_cast<uint32_t>(i), optimizer_config{},
                        consistency::async, 2, 0}));
      gates.push_back(std::make_unique<gate>(
        sys, host_port{"127.0.0.1", 0},
        caf::actor_cast<caf::strong_actor_ptr>(servers.back()),
        sys.message_types(servers.back()), "bench ps"));
      ports.push_back(gates.back()->port());
    }
    if (write(port_fd, ports.data(), ports.size() * sizeof(uint16_t))
        != static_cast<ssize_t>(ports.size() * sizeof(uint16_t)))
      std::_Exit(1);
    char c;
    while (read(stop_fd, &c, 1) > 0) {
    }
    gates.clear();
    for (auto& s : servers)
      caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  }
  std::_Exit(0);
}

// -- limits ---------------------------------------------------------------------

void bm_memcpy(benchmark::State& st, uint64_t n) {
  std::vector<float> a(n, 1.0f);
  std::vector<float> b(n, 0.0f);
  point p{"limit", "memcpy", "in-process", n, 1, {}};
  for (auto _ : st) {
    auto t0 = clock_type::now();
    std::memcpy(b.data(), a.data(), n * sizeof(float));
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
    auto dt = seconds_since(t0);
    st.SetIterationTime(dt);
    p.latencies.push_back(dt);
  }
  record(st, std::move(p));
}

void bm_axpy(benchmark::State& st, uint64_t n) {
  std::vector<float> x(n, 1e-6f);
  std::vector<float> y(n, 0.5f);
  point p{"limit", "axpy", "in-process", n, 1, {}};
  for (auto _ : st) {
    auto t0 = clock_type::now();
    auto* yp = y.data();
    auto* xp = x.data();
    for (uint64_t i = 0; i < n; ++i)
      yp[i] -= 0.01f * xp[i];
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    auto dt = seconds_since(t0);
    st.SetIterationTime(dt);
    p.latencies.push_back(dt);
  }
  record(st, std::move(p));
}

void bm_tcp(benchmark::State& st, uint64_t n, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    st.SkipWithError("cannot connect to the TCP sink");
    return;
  }
  set_nodelay(fd);
  uint64_t bytes = n * sizeof(float);
  std::vector<char> buf(sizeof(bytes) + bytes, 1);
  std::memcpy(buf.data(), &bytes, sizeof(bytes));
  point p{"limit", "tcp", "loopback", n, 1, {}};
  for (auto _ : st) {
    auto t0 = clock_type::now();
    uint64_t answer = 0;
    if (!write_all(fd, buf.data(), buf.size())
        || !read_all(fd, reinterpret_cast<char*>(&answer), sizeof(answer))) {
      st.SkipWithError("TCP sink closed");
      break;
    }
    auto dt = seconds_since(t0);
    st.SetIterationTime(dt);
    p.latencies.push_back(dt);
  }
  close(fd);
  record(st, std::move(p));
}

// -- transfers --------------------------------------------------------------------

/// The push of worker `w`: its gradient buffer, filled (a worker's gather).
push_request make_push(uint32_t w, uint64_t closure,
                       const std::vector<float>& grad) {
  push_request req;
  req.id = update_id{w, 0, closure};
  req.gradient.values.assign(grad.begin(), grad.end());
  return req;
}

/// One pull, or the push `req`, by worker `w`; false on error.
bool transfer_once(caf::scoped_actor& self, const ps_actor& ps, bool push,
                   uint32_t w, push_request req) {
  bool ok = true;
  if (push)
    self->request(ps, caf::infinite, push_atom_v, std::move(req))
      .receive([](uint64_t) {}, [&](caf::error&) { ok = false; });
  else
    self->request(ps, caf::infinite, pull_atom_v, w)
      .receive([](pull_reply&) {}, [&](caf::error&) { ok = false; });
  return ok;
}

void bm_transfer(benchmark::State& st, caf::actor_system* sys, ps_actor ps,
                 std::string where, bool push, uint64_t n, int workers) {
  std::vector<float> grad(n, 1e-6f);
  // The second worker runs the same operation in a loop while this one is
  // measured.
  std::atomic<bool> stop{false};
  std::thread other;
  if (workers == 2)
    other = std::thread([&] {
      caf::scoped_actor self{*sys};
      uint64_t closure = uint64_t{1} << 40;
      while (!stop.load())
        if (!transfer_once(self, ps, push, 1,
                           push ? make_push(1, ++closure, grad)
                                : push_request{}))
          break;
    });
  caf::scoped_actor self{*sys};
  uint64_t closure = 0;
  point p{"transfer", push ? "push" : "pull", std::move(where), n, workers,
          {}};
  for (auto _ : st) {
    // A push starts with the gradient in its buffer: filling it is the
    // worker's gather, part of its step, not of the transfer.
    auto req = push ? make_push(0, ++closure, grad) : push_request{};
    auto t0 = clock_type::now();
    if (!transfer_once(self, ps, push, 0, std::move(req))) {
      st.SkipWithError("the ps failed");
      break;
    }
    auto dt = seconds_since(t0);
    st.SetIterationTime(dt);
    p.latencies.push_back(dt);
  }
  stop = true;
  if (other.joinable())
    other.join();
  if (!p.latencies.empty())
    record(st, std::move(p));
}

/// Creates one shard of n floats on `ps`.
bool create(caf::actor_system& sys, const ps_actor& ps, uint64_t n) {
  caf::scoped_actor self{sys};
  create_shard shard;
  shard.variable = "x";
  shard.row_end = n;
  shard.cols = 1;
  shard.values.values.assign(n, 0.5f);
  bool ok = false;
  self->request(ps, std::chrono::seconds(30), create_atom_v, std::move(shard))
    .receive([&](uint64_t) { ok = true; }, [](caf::error&) {});
  return ok;
}

// -- training ---------------------------------------------------------------------

std::string self_dir() {
  std::vector<char> buf(4096);
  auto n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  std::string path(buf.data(), n > 0 ? static_cast<size_t>(n) : 0);
  return path.substr(0, path.rfind('/'));
}

/// Runs `actorps COMMAND` with the job flags; returns its final metrics
/// record, or null if it failed.
json run_training(const std::string& command, int workers,
                  const std::string& extra) {
  auto metrics = fmt::format("/tmp/actorps-bench-{}-{}.jsonl", getpid(),
                             workers);
  auto cmd = fmt::format("'{}/actorps' {} --workers {} --ps 2 --quiet "
                         "--no-progress --metrics-out '{}' {} > /dev/null 2>&1",
                         self_dir(), command, workers, metrics, extra);
  fmt::print(stderr, "running: {}\n", cmd);
  if (std::system(cmd.c_str()) != 0) {
    std::remove(metrics.c_str());
    return nullptr;
  }
  std::ifstream in(metrics);
  std::string line;
  json last;
  while (std::getline(in, line))
    last = json::parse(line, nullptr, false);
  std::remove(metrics.c_str());
  return last.is_object() ? last : json(nullptr);
}

// -- the machine ------------------------------------------------------------------

json machine() {
  json m;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line))
    if (line.rfind("model name", 0) == 0) {
      m["cpu"] = line.substr(line.find(':') + 2);
      break;
    }
  m["cores"] = std::thread::hardware_concurrency();
  std::ifstream mem("/proc/meminfo");
  while (std::getline(mem, line))
    if (line.rfind("MemTotal:", 0) == 0) {
      m["memory_gib"] = std::round(std::stod(line.substr(9)) / 1048576.0 * 10)
                        / 10;
      break;
    }
  utsname u{};
  if (uname(&u) == 0) {
    m["host"] = u.nodename;
    m["kernel"] = fmt::format("{} {}", u.sysname, u.release);
  }
  m["compiler"] = __VERSION__;
  m["caf"] = fmt::format("{}.{}.{}", CAF_VERSION / 10000,
                         CAF_VERSION / 100 % 100, CAF_VERSION % 100);
  auto now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  m["date"] = date;
  return m;
}

// -- reports -----------------------------------------------------------------------

const point* find_point(const std::string& op, const std::string& where,
                        uint64_t n, int workers) {
  for (auto& p : points)
    if (p.op == op && p.where == where && p.floats == n
        && p.workers == workers)
      return &p;
  return nullptr;
}

/// The limit of a transfer: memcpy for an in-process pull, axpy for an
/// in-process push (the SGD apply), raw TCP for both over loopback.
const point* limit_of(const point& p) {
  if (p.where == "loopback")
    return find_point("tcp", "loopback", p.floats, 1);
  return find_point(p.op == "pull" ? "memcpy" : "axpy", "in-process",
                    p.floats, 1);
}

json point_json(const point& p) {
  json j{{"op", p.op},
         {"where", p.where},
         {"floats", p.floats},
         {"workers", p.workers},
         {"iterations", p.latencies.size()},
         {"p50_ms", p.pct(0.5) * 1e3},
         {"p90_ms", p.pct(0.9) * 1e3},
         {"gb_per_s", p.floats * 4 / p.pct(0.5) / 1e9}};
  if (p.kind == "transfer")
    if (auto* l = limit_of(p)) {
      j["limit"] = l->op;
      j["limit_p50_ms"] = l->pct(0.5) * 1e3;
      j["x_limit"] = p.pct(0.5) / l->pct(0.5);
    }
  return j;
}

struct target {
  std::string name;
  std::string op;
  std::string where;
  uint64_t floats;
  double ms;
};

const std::vector<target> targets = {
  {"1M-float push between two processes", "push", "loopback", 1u << 20, 2.5},
  {"1K-float round trip between two processes (push)", "push", "loopback",
   1024, 0.2},
  {"1M-float push in one process", "push", "in-process", 1u << 20, 0.3},
};

json make_results(const json& training) {
  json r;
  r["machine"] = machine();
  r["limits"] = json::array();
  r["transfers"] = json::array();
  for (auto& p : points)
    (p.kind == "limit" ? r["limits"] : r["transfers"]).push_back(point_json(p));
  r["training"] = training;
  r["targets"] = json::array();
  for (auto& t : targets)
    if (auto* p = find_point(t.op, t.where, t.floats, 1))
      r["targets"].push_back({{"name", t.name},
                              {"target_ms", t.ms},
                              {"p50_ms", p->pct(0.5) * 1e3},
                              {"met", p->pct(0.5) * 1e3 <= t.ms}});
  return r;
}

std::string floats_label(uint64_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0)
    return fmt::format("{}M", n >> 20);
  if (n >= 1024 && n % 1024 == 0)
    return fmt::format("{}K", n >> 10);
  return std::to_string(n);
}

std::string markdown(const json& r) {
  std::ostringstream out;
  auto& m = r["machine"];
  out << "# actorps benchmarks\n\n"
      << "Written by `scripts/bench.sh` (`build/actorps-bench`); numbers in "
         "`bench/results.json`.\n\n"
      << fmt::format("Machine: {}, {} cores, {} GiB, {}; {}; CAF {}; {}.\n\n",
                     m.value("cpu", "?"), m.value("cores", 0),
                     m.value("memory_gib", 0.0), m.value("kernel", "?"),
                     m.value("compiler", "?"), m.value("caf", "?"),
                     m.value("date", "?"));
  out << "## Targets\n\n| target | goal | p50 | met |\n|---|---|---|---|\n";
  for (auto& t : r["targets"])
    out << fmt::format("| {} | ≤ {} ms | {:.3f} ms | {} |\n",
                       t["name"].get<std::string>(),
                       t["target_ms"].get<double>(), t["p50_ms"].get<double>(),
                       t["met"].get<bool>() ? "yes" : "no");
  out << "\n## Pull and push\n\nThe ps applies SGD; \"x limit\" is p50 / the "
         "limit's p50 (in one process: memcpy for a pull, axpy for a push; "
         "between processes: raw TCP over loopback, the same bytes one way "
         "and 8 back).\n\n"
      << "| op | where | floats | workers | p50 ms | p90 ms | GB/s | limit "
         "| limit p50 ms | x limit |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (auto& t : r["transfers"])
    out << fmt::format("| {} | {} | {} | {} | {:.3f} | {:.3f} | {:.2f} | {} | "
                       "{} | {} |\n",
                       t["op"].get<std::string>(), t["where"].get<std::string>(),
                       floats_label(t["floats"].get<uint64_t>()),
                       t["workers"].get<int>(), t["p50_ms"].get<double>(),
                       t["p90_ms"].get<double>(), t["gb_per_s"].get<double>(),
                       t.value("limit", "-"),
                       t.contains("limit_p50_ms")
                         ? fmt::format("{:.3f}",
                                       t["limit_p50_ms"].get<double>())
                         : "-",
                       t.contains("x_limit")
                         ? fmt::format("{:.1f}x", t["x_limit"].get<double>())
                         : "-");
  out << "\n## Limits\n\n| limit | floats | p50 ms | p90 ms | GB/s |\n"
         "|---|---|---|---|---|\n";
  for (auto& t : r["limits"])
    out << fmt::format("| {} | {} | {:.3f} | {:.3f} | {:.2f} |\n",
                       t["op"].get<std::string>(),
                       floats_label(t["floats"].get<uint64_t>()),
                       t["p50_ms"].get<double>(), t["p90_ms"].get<double>(),
                       t["gb_per_s"].get<double>());
  out << "\n## Training (Fashion-MNIST MLP, 2 ps)\n\n"
         "| where | workers | samples/s | test accuracy | compute | pull | "
         "push | wait | mean staleness |\n|---|---|---|---|---|---|---|---|---|\n";
  for (auto& t : r["training"]) {
    if (!t.contains("samples_per_sec")) {
      out << fmt::format("| {} | {} | failed | | | | | | |\n",
                         t["where"].get<std::string>(), t["workers"].get<int>());
      continue;
    }
    auto& s = t["time_share"];
    out << fmt::format("| {} | {} | {:.0f} | {:.4f} | {:.0f}% | {:.0f}% | "
                       "{:.0f}% | {:.0f}% | {:.2f} |\n",
                       t["where"].get<std::string>(), t["workers"].get<int>(),
                       t["samples_per_sec"].get<double>(),
                       t["test_accuracy"].get<double>(),
                       100 * s["compute"].get<double>(),
                       100 * s["pull"].get<double>(),
                       100 * s["push"].get<double>(),
                       100 * s["wait"].get<double>(),
                       t["mean_staleness"].get<double>());
  }
  return out.str();
}

/// Writes `text` to `path` through a temporary file and a rename.
bool write_file(const std::string& path, const std::string& text) {
  auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out)
      return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

/// Checks the shape of a results file; prints what is wrong.
int validate(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    fmt::print(stderr, "{}: cannot read\n", path);
    return 1;
  }
  auto r = json::parse(in, nullptr, false);
  std::vector<std::string> problems;
  if (r.is_discarded()) {
    problems.push_back("not valid JSON");
  } else {
    for (auto key : {"machine", "limits", "transfers", "training", "targets"})
      if (!r.contains(key))
        problems.push_back(fmt::format("no \"{}\"", key));
    if (problems.empty()) {
      if (!r["machine"].contains("cpu") || !r["machine"].contains("cores"))
        problems.push_back("machine: no cpu or cores");
      if (r["transfers"].empty() || r["limits"].empty())
        problems.push_back("no transfers or limits measured");
      for (auto& t : r["transfers"])
        if (!(t.value("p50_ms", -1.0) > 0) || !t.contains("x_limit"))
          problems.push_back("a transfer without p50_ms > 0 or x_limit");
      for (auto& t : r["training"])
        if (!t.contains("samples_per_sec"))
          problems.push_back(fmt::format("training {} with {} workers failed",
                                         t.value("where", "?"),
                                         t.value("workers", 0)));
    }
  }
  for (auto& p : problems)
    fmt::print(stderr, "{}: {}\n", path, p);
  return problems.empty() ? 0 : 1;
}

std::vector<uint64_t> parse_sizes(const std::string& text) {
  std::vector<uint64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (auto n = std::strtoull(item.c_str(), nullptr, 10); n > 0)
      out.push_back(n);
  return out;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes = {1024, 65536, 1u << 20, 4u << 20};
  int iterations = 200;
  int epochs = 1;
  bool training = true;
  bool quick = false;
  std::string config = "configs/fashion_mnist.json";
  std::string out = "bench/results.json";
  std::string md = "docs/benchmarks.md";
  std::vector<char*> gb_args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "actorps-bench: {} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--validate")
      return validate(value());
    if (a == "--sizes")
      sizes = parse_sizes(value());
    else if (a == "--iterations")
      iterations = std::max(1, std::atoi(value().c_str()));
    else if (a == "--epochs")
      epochs = std::max(1, std::atoi(value().c_str()));
    else if (a == "--no-training")
      training = false;
    else if (a == "--quick")
      quick = true;
    else if (a == "--out")
      out = value();
    else if (a == "--config")
      config = value();
    else if (a == "--markdown")
      md = value();
    else if (a.rfind("--benchmark_", 0) == 0)
      gb_args.push_back(argv[i]);
    else {
      fmt::print(stderr, "actorps-bench: unknown argument \"{}\"\n", a);
      return 2;
    }
  }
  if (sizes.empty()) {
    fmt::print(stderr, "actorps-bench: --sizes: no size\n");
    return 2;
  }
  // The server process first: forking after threads exist would hand the
  // child their locks.
  int port_pipe[2];
  int stop_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(stop_pipe) != 0)
    return 1;
  auto child = fork();
  if (child == 0) {
    close(port_pipe[0]);
    close(stop_pipe[1]);
    serve(sizes, port_pipe[1], stop_pipe[0]);
  }
  close(port_pipe[1]);
  close(stop_pipe[0]);
  std::vector<uint16_t> ports(sizes.size() + 1);
  auto want = static_cast<ssize_t>(ports.size() * sizeof(uint16_t));
  if (read(port_pipe[0], ports.data(), want) != want) {
    fmt::print(stderr, "actorps-bench: the server process did not start\n");
    return 1;
  }
  json train_results = json::array();
  {
    system_config local_cfg{0};
    caf::actor_system local{local_cfg};
    system_config net_cfg{0, network_options{}};
    caf::actor_system net{net_cfg};
    std::vector<ps_actor> local_ps;
    std::vector<ps_actor> remote_ps;
    for (size_t i = 0; i < sizes.size(); ++i) {
      local_ps.push_back(spawn_ps(local, ps_options{static_cast<uint32_t>(i),
                                                    optimizer_config{},
                                                    consistency::async, 2, 0}));
      auto r = dial(net, host_port{"127.0.0.1", ports[i + 1]},
                    std::chrono::seconds(10));
      if (!r.actor) {
        fmt::print(stderr, "actorps-bench: dial: {}\n", r.error);
        return 1;
      }
      remote_ps.push_back(caf::actor_cast<ps_actor>(r.actor));
      if (!create(local, local_ps.back(), sizes[i])
          || !create(net, remote_ps.back(), sizes[i])) {
        fmt::print(stderr, "actorps-bench: cannot create the variables\n");
        return 1;
      }
    }
    auto reg = [&](const std::string& name, auto fn) {
      benchmark::RegisterBenchmark(name.c_str(), fn)
        ->UseManualTime()
        ->Iterations(iterations)
        ->Unit(benchmark::kMillisecond);
    };
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto n = sizes[i];
      auto label = floats_label(n);
      reg("limit/memcpy/" + label, [n](benchmark::State& st) { bm_memcpy(st, n); });
      reg("limit/axpy/" + label, [n](benchmark::State& st) { bm_axpy(st, n); });
      auto tcp_port = ports[0];
      reg("limit/tcp/" + label,
          [n, tcp_port](benchmark::State& st) { bm_tcp(st, n, tcp_port); });
      for (int workers : {1, 2})
        for (bool push : {false, true}) {
          auto op = push ? "push" : "pull";
          auto lp = local_ps[i];
          auto rp = remote_ps[i];
          reg(fmt::format("in-process/{}/{}/workers:{}", op, label, workers),
              [&local, lp, push, n, workers](benchmark::State& st) {
                bm_transfer(st, &local, lp, "in-process", push, n, workers);
              });
          reg(fmt::format("loopback/{}/{}/workers:{}", op, label, workers),
              [&net, rp, push, n, workers](benchmark::State& st) {
                bm_transfer(st, &net, rp, "loopback", push, n, workers);
              });
        }
    }
    int gb_argc = static_cast<int>(gb_args.size());
    benchmark::Initialize(&gb_argc, gb_args.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    for (auto& p : local_ps)
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  }
  close(stop_pipe[1]);
  waitpid(child, nullptr, 0);
  if (training) {
    if (!std::ifstream(config)) {
      fmt::print(stderr, "actorps-bench: --config: cannot read {}\n", config);
      return 2;
    }
    auto job = fmt::format("--config '{}' --epochs {}", config, epochs);
    if (quick)
      job += " --train-limit 4000 --test-limit 500";
    std::vector<int> counts = quick ? std::vector<int>{1}
                                    : std::vector<int>{1, 2, 4};
    for (auto& [command, where] :
         std::vector<std::pair<std::string, std::string>>{
           {"train", "in-process"}, {"launch", "multi-process"}})
      for (int w : counts) {
        auto r = run_training(command, w, job);
        json entry{{"where", where}, {"workers", w}, {"ps", 2},
                   {"epochs", epochs}};
        if (r.is_object())
          for (auto key : {"samples_per_sec", "test_accuracy", "time_share",
                           "mean_staleness", "max_staleness"})
            if (r.contains(key))
              entry[key] = r[key];
        train_results.push_back(entry);
      }
  }
  auto results = make_results(train_results);
  auto text = results.dump(2) + "\n";
  if (!write_file(out, text) || !write_file(md, markdown(results))) {
    fmt::print(stderr, "actorps-bench: cannot write {} or {}\n", out, md);
    return 1;
  }
  fmt::print("wrote {} and {}\n", out, md);
  for (auto& t : results["targets"])
    fmt::print("target: {}: p50 {:.3f} ms (goal {} ms) {}\n",
               t["name"].get<std::string>(), t["p50_ms"].get<double>(),
               t["target_ms"].get<double>(),
               t["met"].get<bool>() ? "met" : "NOT met");
  return 0;
}
