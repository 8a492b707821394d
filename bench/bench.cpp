// actorps-bench: how fast actorps moves tensors and table rows and trains,
// each number next to its limit measured by the same program in the same
// run.
//
//   actorps-bench [--sizes 1024,65536,1048576,4194304]
//                 [--sparse-sizes 1024,65536,1048576] [--cold-keys 65536]
//                 [--iterations N] [--epochs N] [--config FILE]
//                 [--no-training] [--quick] [--tls] [--transport tcp]
//                 [--out FILE] [--markdown FILE]
//   actorps-bench --validate FILE     checks a results file (exit 0 / 1)
//   actorps-bench --help
//
// It prints the results as Markdown and writes files only where --out and
// --markdown say (bench/run.sh writes the committed bench/results.json
// and docs/benchmarks.md), so that a run from the checkout changes nothing
// in it.
//
// Micro-benchmarks run under Google Benchmark with manual timing; each
// records every iteration's latency, so p50 and p90 are exact.
// - dense limits: memcpy and axpy (y += a x) of N floats in this process; raw
//   TCP over loopback (TCP_NODELAY): N floats one way, an 8-byte answer back.
// - dense transfer: pull and push of a variable of N floats, the ps applying
//   SGD, with 1 and 2 workers at once; in one process (actor messages) and
//   between two processes (gate + CAF BASP, as a worker talks to a ps).
// - sparse: pull and push of the rows of N random keys of an embedding table
//   (dim 16), the ps applying SGD, in one process and between two; the limit
//   is a hash-map lookup and copy of the same rows in one thread (see
//   bench/bench_sparse.hpp); between processes also raw TCP of the same bytes.
//   Sparse benchmarks of more than 64K keys run fewer iterations (1M: 12 of
//   the default 200); cold pulls (first touch, --cold-keys) run 10.
// - training: `actorps train` and `actorps launch` with 1, 2 and 4 workers
//   (2 ps) on the job of --config (default configs/fashion_mnist.json),
//   samples/s and each worker's share of time per phase.
// --tls: the two processes talk mutual TLS (throw-away certificates of a
// new CA; cluster/net/tls.hpp), as `actorps launch` does by default.
// --transport tcp: the data channel's frames go over loopback TCP, not
// through shared memory (cluster/net/shm_segment.hpp), which it uses by default
// between two processes of one host, as `actorps launch` does.
// --quick: sparse benchmarks of 1K keys only (cold: 1K), training of one
// worker on 4000 examples, unless --sparse-sizes / --cold-keys say
// otherwise. Latencies in milliseconds; GB/s = N * 4 bytes / p50; keys/s =
// keys / p50.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/send.hpp"

#include "actors/ps_actor.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_report.hpp"
#include "bench/bench_sparse.hpp"
#include "bench/bench_tcp.hpp"
#include "bench/bench_training.hpp"
#include "cluster/net/data_link.hpp"
#include "cluster/net/tls_channel.hpp"
#include "bench/bench_transfer.hpp"
#include "cluster/net/certs.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/net/tls.hpp"
#include "cluster/topology/local_cluster.hpp"

namespace {

using namespace actorps;
using namespace actorps::bench;
using json = nlohmann::json;

struct bench_options {
  std::vector<uint64_t> sizes = {1024, 65536, 1u << 20, 4u << 20};
  std::vector<uint64_t> sparse_sizes = {1024, 65536, 1u << 20};
  uint64_t cold_keys = 65536;
  bool sparse_sizes_set = false;
  bool cold_keys_set = false;
  int iterations = 200;
  int epochs = 1;
  bool training = true;
  bool quick = false;
  /// Between the processes: mutual TLS (throw-away certificates).
  std::string tls_dir;
  /// How the data channel moves its frames (cluster.transport).
  link_transport transport = link_transport::automatic;
  std::string config = "configs/fashion_mnist.json";
  /// Where to write the results as JSON and as Markdown; empty: nowhere.
  std::string out;
  std::string md;
  std::vector<char*> gb_args;
};

/// Iterations of a sparse benchmark of n keys: the default for up to 64K
/// keys, proportionally fewer above (a 1M-key pull moves 72 MB), at least 10.
int sparse_iterations(int iterations, uint64_t n) {
  auto scaled = static_cast<uint64_t>(iterations) * 65536 / std::max<uint64_t>(n, 1);
  return static_cast<int>(std::clamp<uint64_t>(
    scaled, std::min(iterations, 10), static_cast<uint64_t>(iterations)));
}

/// Cold pulls: one fresh table shard each.
int cold_iterations(int iterations) {
  return std::min(iterations, 10);
}

/// The servers of a run, in order: one per dense size, one per sparse size,
/// one for the cold pulls.
std::vector<ps_options> server_list(const bench_options& o) {
  std::vector<ps_options> result;
  for (auto n : o.sizes) {
    static_cast<void>(n);
    result.push_back(dense_ps_options(static_cast<uint32_t>(result.size())));
  }
  for (size_t i = 0; i <= o.sparse_sizes.size(); ++i)
    result.push_back(sparse_ps_options(static_cast<uint32_t>(result.size())));
  return result;
}

/// The child: writes the TCP sink's port, then one port per server, then
/// serves until `stop_fd` closes.
[[noreturn]] void serve(const std::vector<ps_options>& list, int port_fd,
                        int stop_fd, const std::string& tls_dir) {
  uint16_t tcp_port = 0;
  int lfd = listen_loopback(tcp_port);
  if (lfd < 0)
    std::_Exit(1);
  std::thread(tcp_sink, lfd).detach();
  std::vector<uint16_t> ports{tcp_port};
  {
    system_config cfg{1, network_options{}};
    caf::actor_system sys{cfg};
    std::shared_ptr<tls_context> tls;
    if (!tls_dir.empty())
      tls = tls_context::load(tls_files_in(tls_dir, {"ps", 0}));
    std::vector<ps_actor> servers;
    std::vector<std::unique_ptr<gate>> gates;
    for (auto& opts : list) {
      servers.push_back(spawn_ps(sys, opts));
      gates.push_back(std::make_unique<gate>(
        sys, host_port{"127.0.0.1", 0},
        caf::actor_cast<caf::strong_actor_ptr>(servers.back()),
        sys.message_types(servers.back()), "bench ps", tls,
        [&sys, ps = servers.back()](std::unique_ptr<channel> ch,
                                    const std::string& peer) {
          // One client plays every worker with worker 0's certificate.
          serve_data_channel(sys, ps, std::move(ch), "bench ps <- " + peer,
                             data_session_options{true, false});
        }));
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

std::vector<uint64_t> parse_sizes(const std::string& text) {
  std::vector<uint64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (auto n = std::strtoull(item.c_str(), nullptr, 10); n > 0)
      out.push_back(n);
  return out;
}

constexpr const char* usage = R"(usage: actorps-bench [flags]
       actorps-bench --validate FILE

Measures how fast actorps moves tensors and table rows and trains, each
number next to its limit measured in the same run (see
docs/measurements.md). Prints the results as a Markdown table; writes files only
where --out and --markdown say. The whole suite takes about two minutes on
2 cores; --quick --no-training a few seconds.

  --sizes N,...          dense pull/push sizes in floats
                         (1024,65536,1048576,4194304)
  --sparse-sizes N,...   sparse pull/push sizes in keys (1024,65536,1048576)
  --cold-keys N          keys of the cold (first-touch) pulls (65536)
  --iterations N         iterations per benchmark (200)
  --epochs N             epochs of each training run (1)
  --config FILE          the training job (configs/fashion_mnist.json)
  --no-training          no training runs
  --quick                sparse sizes 1K only, training of one worker on
                         4000 examples (unless the flags above say otherwise)
  --tls                  the two processes talk mutual TLS
  --transport tcp        the data channel goes over loopback TCP
  --out FILE             write the results as JSON (e.g. bench/results.json)
  --markdown FILE        write the results as Markdown (docs/benchmarks.md)
  --validate FILE        check a results file; exit 0 if it is valid, 1 if not
  --benchmark_...        Google Benchmark's own flags (--benchmark_filter=RE)
  --help                 this text
)";

/// Parses the command line; exits with 2 on bad input, with 0 after --help,
/// and with the result of --validate.
bench_options parse_args(int argc, char** argv) {
  bench_options o;
  o.gb_args.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "actorps-bench: {} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (a == "--validate")
      std::exit(validate(value()));
    if (a == "--sizes")
      o.sizes = parse_sizes(value());
    else if (a == "--sparse-sizes")
      o.sparse_sizes = parse_sizes(value()), o.sparse_sizes_set = true;
    else if (a == "--cold-keys")
      o.cold_keys = std::strtoull(value().c_str(), nullptr, 10),
      o.cold_keys_set = true;
    else if (a == "--iterations")
      o.iterations = std::max(1, std::atoi(value().c_str()));
    else if (a == "--epochs")
      o.epochs = std::max(1, std::atoi(value().c_str()));
    else if (a == "--no-training")
      o.training = false;
    else if (a == "--quick")
      o.quick = true;
    else if (a == "--tls")
      o.tls_dir = "tls"; // made in main
    else if (a == "--transport")
      o.transport = parse_link_transport(value());
    else if (a == "--out")
      o.out = value();
    else if (a == "--config")
      o.config = value();
    else if (a == "--markdown")
      o.md = value();
    else if (a.rfind("--benchmark_", 0) == 0)
      o.gb_args.push_back(argv[i]);
    else {
      fmt::print(stderr, "actorps-bench: unknown argument \"{}\"\n", a);
      std::exit(2);
    }
  }
  if (o.quick && !o.sparse_sizes_set)
    o.sparse_sizes = {1024};
  if (o.quick && !o.cold_keys_set)
    o.cold_keys = o.sparse_sizes.empty() ? 1024 : o.sparse_sizes.front();
  if (o.sizes.empty() || o.sparse_sizes.empty() || o.cold_keys == 0) {
    fmt::print(stderr, "actorps-bench: --sizes, --sparse-sizes and "
                       "--cold-keys each need a positive size\n");
    std::exit(2);
  }
  return o;
}

/// The parent's handles: servers in this process and behind the child's
/// gates, in server_list order, with their variables created.
struct server_handles {
  std::vector<ps_actor> local;
  std::vector<ps_actor> remote;
  /// The remote ones through a data channel (cluster/net/data_link.hpp).
  std::vector<ps_actor> data;
};

bool connect_servers(const bench_options& o, caf::actor_system& local,
                     caf::actor_system& net,
                     const std::vector<uint16_t>& ports, server_handles& h) {
  auto list = server_list(o);
  std::shared_ptr<tls_context> tls;
  if (!o.tls_dir.empty())
    tls = tls_context::load(tls_files_in(o.tls_dir, {"worker", 0}));
  node_identity ps0{"ps", 0};
  for (size_t i = 0; i < list.size(); ++i) {
    h.local.push_back(spawn_ps(local, list[i]));
    auto r = dial(net, host_port{"127.0.0.1", ports[i + 1]},
                  std::chrono::seconds(10), tls.get(), &ps0);
    if (!r.actor) {
      fmt::print(stderr, "actorps-bench: dial: {}\n", r.error);
      return false;
    }
    h.remote.push_back(caf::actor_cast<ps_actor>(r.actor));
    try {
      h.data.push_back(open_data_link(
        net, h.remote.back(), host_port{"127.0.0.1", ports[i + 1]}, tls.get(),
        &ps0, std::chrono::seconds(10), "bench",
        data_link_options{o.transport,
                          i < o.sizes.size() ? o.sizes[i] * sizeof(float)
                                             : 0}));
    } catch (const std::exception& e) {
      fmt::print(stderr, "actorps-bench: {}\n", e.what());
      return false;
    }
  }
  auto both = [&](size_t i, auto create) {
    return create(local, h.local[i]) && create(net, h.remote[i]);
  };
  bool ok = true;
  size_t i = 0;
  for (auto n : o.sizes)
    ok = ok && both(i++, [n](auto& sys, auto& ps) {
           return create_dense(sys, ps, n);
         });
  for (size_t k = 0; k < o.sparse_sizes.size(); ++k)
    ok = ok && both(i++, [](auto& sys, auto& ps) {
           return create_table(sys, ps, 0);
         });
  for (int s = 0; s < cold_iterations(o.iterations); ++s)
    ok = ok && both(i, [s](auto& sys, auto& ps) {
           return create_table(sys, ps, static_cast<uint32_t>(s));
         });
  if (!ok)
    fmt::print(stderr, "actorps-bench: cannot create the variables\n");
  return ok;
}

void register_all(const bench_options& o, caf::actor_system& local,
                  caf::actor_system& net, const server_handles& h,
                  uint16_t tcp_port) {
  auto reg = [&](const std::string& name, int iterations, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)
      ->UseManualTime()
      ->Iterations(iterations)
      ->Unit(benchmark::kMillisecond);
  };
  auto* lsys = &local;
  auto* nsys = &net;
  size_t i = 0;
  for (auto n : o.sizes) {
    auto label = count_label(n);
    auto lp = h.local[i];
    auto dp = h.data[i];
    auto rp = h.remote[i++];
    reg("limit/memcpy/" + label, o.iterations,
        [n](benchmark::State& st) { bm_memcpy(st, n); });
    reg("limit/axpy/" + label, o.iterations,
        [n](benchmark::State& st) { bm_axpy(st, n); });
    auto tcp = make_point("limit", "tcp", "loopback", n);
    tcp.bytes_out = n * sizeof(float);
    tcp.bytes_back = sizeof(uint64_t);
    reg("limit/tcp/" + label, o.iterations,
        [tcp, tcp_port](benchmark::State& st) { bm_tcp(st, tcp_port, tcp); });
    for (int workers : {1, 2})
      for (bool push : {false, true}) {
        auto op = push ? "push" : "pull";
        reg(fmt::format("in-process/{}/{}/workers:{}", op, label, workers),
            o.iterations, [=](benchmark::State& st) {
              bm_transfer(st, lsys, lp, "in-process", push, n, workers);
            });
        reg(fmt::format("loopback/{}/{}/workers:{}", op, label, workers),
            o.iterations, [=](benchmark::State& st) {
              bm_transfer(st, nsys, rp, "loopback", push, n, workers);
            });
        reg(fmt::format("data-channel/{}/{}/workers:{}", op, label, workers),
            o.iterations, [=](benchmark::State& st) {
              bm_transfer(st, nsys, dp, "data-channel", push, n, workers);
            });
      }
  }
  for (auto n : o.sparse_sizes) {
    auto label = count_label(n);
    auto iters = sparse_iterations(o.iterations, n);
    auto lp = h.local[i];
    auto dp = h.data[i];
    auto rp = h.remote[i++];
    for (bool push : {false, true}) {
      auto op = push ? "push" : "pull";
      reg(fmt::format("sparse/limit/{}/{}", op, label), iters,
          [=](benchmark::State& st) { bm_sparse_limit(st, push, n); });
      auto tcp = sparse_point("sparse-tcp", push, "loopback", n, "warm");
      reg(fmt::format("sparse/tcp/{}/{}", op, label), iters,
          [=](benchmark::State& st) { bm_tcp(st, tcp_port, tcp); });
      reg(fmt::format("sparse/in-process/{}/{}", op, label), iters,
          [=](benchmark::State& st) {
            bm_sparse(st, lsys, lp, "in-process", push, n);
          });
      reg(fmt::format("sparse/loopback/{}/{}", op, label), iters,
          [=](benchmark::State& st) {
            bm_sparse(st, nsys, rp, "loopback", push, n);
          });
      reg(fmt::format("sparse/data-channel/{}/{}", op, label), iters,
          [=](benchmark::State& st) {
            bm_sparse(st, nsys, dp, "data-channel", push, n);
          });
    }
  }
  auto n = o.cold_keys;
  auto label = count_label(n);
  auto iters = cold_iterations(o.iterations);
  auto lp = h.local[i];
  auto rp = h.remote[i];
  reg("sparse/limit/pull-cold/" + label, iters,
      [=](benchmark::State& st) { bm_sparse_cold_limit(st, n); });
  auto tcp = sparse_point("sparse-tcp", false, "loopback", n, "cold");
  reg("sparse/tcp/pull-cold/" + label, iters,
      [=](benchmark::State& st) { bm_tcp(st, tcp_port, tcp); });
  reg("sparse/in-process/pull-cold/" + label, iters,
      [=](benchmark::State& st) {
        bm_sparse_cold(st, lsys, lp, "in-process", n);
      });
  reg("sparse/loopback/pull-cold/" + label, iters, [=](benchmark::State& st) {
    bm_sparse_cold(st, nsys, rp, "loopback", n);
  });
}

} // namespace

int main(int argc, char** argv) {
  auto o = parse_args(argc, argv);
  if (o.training && !std::ifstream(o.config)) {
    fmt::print(stderr, "actorps-bench: --config: cannot read {}\n", o.config);
    return 2;
  }
  // The server process first: forking after threads exist would hand the
  // child their locks.
  auto list = server_list(o);
  // --tls: a CA and certificates for ps0 (the server process) and worker0
  // (this one), removed at the end.
  if (!o.tls_dir.empty()) {
    std::string dir = "/tmp/actorps-bench-tls-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr)
      return 1;
    o.tls_dir = dir;
    make_cluster_certs(dir, nodes_of(1, 1), 1);
  }
  int port_pipe[2];
  int stop_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(stop_pipe) != 0)
    return 1;
  auto child = fork();
  if (child == 0) {
    close(port_pipe[0]);
    close(stop_pipe[1]);
    serve(list, port_pipe[1], stop_pipe[0], o.tls_dir);
  }
  close(port_pipe[1]);
  close(stop_pipe[0]);
  std::vector<uint16_t> ports(list.size() + 1);
  auto want = static_cast<ssize_t>(ports.size() * sizeof(uint16_t));
  if (read(port_pipe[0], ports.data(), want) != want) {
    fmt::print(stderr, "actorps-bench: the server process did not start\n");
    return 1;
  }
  {
    system_config local_cfg{0};
    caf::actor_system local{local_cfg};
    system_config net_cfg{0, network_options{}};
    caf::actor_system net{net_cfg};
    server_handles h;
    if (!connect_servers(o, local, net, ports, h))
      return 1;
    register_all(o, local, net, h, ports[0]);
    int gb_argc = static_cast<int>(o.gb_args.size());
    benchmark::Initialize(&gb_argc, o.gb_args.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    for (auto& p : h.local)
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    // The registered benchmarks hold the links: they must be told to end,
    // or the system would wait for them forever.
    for (auto& p : h.data)
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  }
  close(stop_pipe[1]);
  waitpid(child, nullptr, 0);
  if (!o.tls_dir.empty())
    std::filesystem::remove_all(o.tls_dir);
  json training = json::array();
  if (o.training)
    training = run_training_suite(o.config, o.epochs, o.quick);
  auto results = make_results(training);
  auto md = markdown(results);
  for (auto& [path, text] : {std::pair{o.out, results.dump(2) + "\n"},
                             std::pair{o.md, md}}) {
    if (path.empty())
      continue;
    if (!write_file(path, text)) {
      fmt::print(stderr, "actorps-bench: cannot write {}\n", path);
      return 1;
    }
    fmt::print("wrote {}\n", path);
  }
  if (o.md.empty())
    fmt::print("{}", md);
  for (auto& t : results["targets"])
    fmt::print("target: {}: p50 {:.3f} ms (goal {} ms) {}\n",
               t["name"].get<std::string>(), t["p50_ms"].get<double>(),
               t["target_ms"].get<double>(),
               t["met"].get<bool>() ? "met" : "NOT met");
  return 0;
}
