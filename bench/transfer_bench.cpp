// actorps-transfer-bench: the time of a pull and a push of a dense buffer
// between two processes over loopback, through the same path a worker uses
// (gate + CAF BASP + float_buffer), with the ps applying SGD.
//
//   actorps-transfer-bench [FLOATS...] [--iterations N]
//
// Prints one line per size: p50 / p90 latency of pull and push and the
// payload rate (GB/s = floats * 4 bytes / p50). Default sizes: the Fashion-MNIST
// MLP (235,146 floats, the whole model on one ps) and 1M floats.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/gate.hpp"
#include "cluster/local_cluster.hpp"

namespace {

using namespace actorps;
using clock_type = std::chrono::steady_clock;

/// The child: one ps behind a gate on a free port, until stdin closes.
[[noreturn]] void serve(int port_fd, int stop_fd) {
  system_config cfg{1, network_options{}};
  caf::actor_system sys{cfg};
  optimizer_config sgd;
  auto ps = spawn_ps(sys, ps_options{0, sgd, consistency::async, 1, 0});
  {
    gate door{sys, host_port{"127.0.0.1", 0},
              caf::actor_cast<caf::strong_actor_ptr>(ps),
              sys.message_types(ps), "bench ps"};
    uint16_t port = door.port();
    if (write(port_fd, &port, sizeof(port)) != sizeof(port))
      std::_Exit(1);
    char c;
    while (read(stop_fd, &c, 1) > 0) {
    }
  }
  caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
  std::_Exit(0);
}

double percentile(std::vector<double> xs, double p) {
  std::sort(xs.begin(), xs.end());
  return xs[std::min(xs.size() - 1, static_cast<size_t>(p * xs.size()))];
}

void measure(uint64_t floats, int iterations) {
  int port_pipe[2];
  int stop_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(stop_pipe) != 0)
    std::exit(1);
  auto child = fork();
  if (child == 0) {
    close(port_pipe[0]);
    close(stop_pipe[1]);
    serve(port_pipe[1], stop_pipe[0]);
  }
  close(port_pipe[1]);
  close(stop_pipe[0]);
  uint16_t port = 0;
  if (read(port_pipe[0], &port, sizeof(port)) != sizeof(port)) {
    fmt::print(stderr, "the ps process did not start\n");
    std::exit(1);
  }
  // This process's actor system exists only after the fork: forking a
  // process with running threads leaves the child with their locks.
  system_config cfg{0, network_options{}};
  caf::actor_system sys{cfg};
  auto r = dial(sys, host_port{"127.0.0.1", port}, std::chrono::seconds(5));
  if (!r.actor) {
    fmt::print(stderr, "dial: {}\n", r.error);
    std::exit(1);
  }
  auto ps = caf::actor_cast<ps_actor>(r.actor);
  caf::scoped_actor self{sys};
  create_shard shard;
  shard.variable = "x";
  shard.row_end = floats;
  shard.cols = 1;
  shard.values.values.assign(floats, 0.5f);
  self->request(ps, std::chrono::seconds(30), create_atom_v, std::move(shard))
    .receive([](uint64_t) {}, [&](caf::error& e) {
      fmt::print(stderr, "create: {}\n", sys.render(e));
      std::exit(1);
    });
  std::vector<double> pulls;
  std::vector<double> pushes;
  std::vector<float> grad(floats, 1e-6f);
  for (int i = -5; i < iterations; ++i) {
    auto t0 = clock_type::now();
    self->request(ps, caf::infinite, pull_atom_v, uint32_t{0})
      .receive([](pull_reply&) {}, [&](caf::error& e) {
        fmt::print(stderr, "pull: {}\n", sys.render(e));
        std::exit(1);
      });
    auto t1 = clock_type::now();
    push_request req;
    req.id = update_id{0, 0, static_cast<uint64_t>(i + 10)};
    req.gradient.values = grad;
    auto t2 = clock_type::now();
    self->request(ps, caf::infinite, push_atom_v, std::move(req))
      .receive([](uint64_t) {}, [&](caf::error& e) {
        fmt::print(stderr, "push: {}\n", sys.render(e));
        std::exit(1);
      });
    auto t3 = clock_type::now();
    if (i >= 0) {
      pulls.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      pushes.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
    }
  }
  auto bytes = floats * sizeof(float);
  auto p50_pull = percentile(pulls, 0.5);
  auto p50_push = percentile(pushes, 0.5);
  fmt::print("{:>9} floats ({:6.2f} MB): pull p50 {:7.3f} ms p90 {:7.3f} ms "
             "{:5.2f} GB/s | push p50 {:7.3f} ms p90 {:7.3f} ms {:5.2f} GB/s\n",
             floats, bytes / 1e6, p50_pull, percentile(pulls, 0.9),
             bytes / p50_pull / 1e6, p50_push, percentile(pushes, 0.9),
             bytes / p50_push / 1e6);
  std::fflush(stdout);
  close(stop_pipe[1]);
  int status = 0;
  waitpid(child, &status, 0);
  close(port_pipe[0]);
}

} // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes;
  int iterations = 200;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--iterations" && i + 1 < argc)
      iterations = std::max(1, std::atoi(argv[++i]));
    else
      sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  }
  if (sizes.empty())
    sizes = {235146, 1u << 20};
  for (auto n : sizes)
    measure(n, iterations);
}
