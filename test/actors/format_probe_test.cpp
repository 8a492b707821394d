// The wire format chosen by measurement (cluster.push_format / pull_format
// "auto"): the probe's arithmetic against real servers in one process, its
// wait for the servers' values, and a worker switching formats between
// steps.

#include "actors/format_probe.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/actor_system.hpp"
#include "caf/blocking_actor.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/ps_actor.hpp"
#include "actors/worker_actor.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "core/wire_format.hpp"
#include "models/registry.hpp"
#include "models/step_function.hpp"
#include "test/actor_fixture.hpp"
#include "test/actors/worker_fixture.hpp"

using namespace actorps;

namespace {

/// Two async servers holding an mlp 4-16-2, split between them.
struct two_servers {
  job_config cfg;
  std::shared_ptr<const dataset> data = test::tiny_data(5);
  std::shared_ptr<const model> net;
  std::shared_ptr<const placement> layout;
  std::vector<ps_actor> servers;

  explicit two_servers(test::actor_fixture& t, bool create = true) {
    cfg.layers = {4, 16, 2};
    cfg.ps = 2;
    cfg.workers = 1;
    net = make_model(cfg, data->schema);
    layout = std::make_shared<const placement>(job_placement(cfg, *net));
    for (uint32_t p = 0; p < 2; ++p)
      servers.push_back(t.keep(spawn_ps(t.sys, ps_options_of(cfg, p))));
    if (create)
      create_variables(t.sys, *layout, servers, cfg, *net);
  }
};

} // namespace

TEST_CASE("the format probe times fp32 and bf16 pulls of every group and "
          "chooses bf16 only if it is 10% faster",
          "[format_probe]") {
  test::actor_fixture t{false};
  two_servers s{t};
  caf::scoped_actor self{t.sys};
  auto bf16 = make_wire_format("bf16");
  auto c = probe_formats(self.ptr(), s.servers, *s.layout, *bf16, 5,
                         std::chrono::seconds(5));
  CHECK(c.fp32_bytes == s.layout->model_size * sizeof(float));
  CHECK(c.candidate_bytes == s.layout->model_size * 2);
  CHECK(c.fp32_ms > 0);
  CHECK(c.candidate_ms > 0);
  CHECK(c.format == (c.candidate_ms <= 0.9 * c.fp32_ms ? "bf16" : "fp32"));
  CHECK(c.describe().find("for pushes and pulls") != std::string::npos);
}

TEST_CASE("the format probe waits for the servers' values, and gives up "
          "naming why",
          "[format_probe]") {
  test::actor_fixture t{false};
  two_servers s{t, false};
  caf::scoped_actor self{t.sys};
  auto bf16 = make_wire_format("bf16");
  CHECK_THROWS_WITH(probe_formats(self.ptr(), s.servers, *s.layout, *bf16, 3,
                                  std::chrono::milliseconds(100)),
                    Catch::Contains("did not hold their values within 100 ms"));
}

TEST_CASE("a worker that chooses its formats by measurement runs closures "
          "after the probe and switches formats between steps",
          "[format_probe][worker]") {
  test::actor_fixture t{false};
  two_servers s{t};
  auto opts = test::worker_options_on(s.servers, s.net, s.data, s.layout);
  opts.choose_push_format = true;
  opts.choose_pull_format = true;
  auto worker = t.keep(spawn_worker(t.sys, std::move(opts)));
  auto run = [&](uint64_t c) { return test::run_closure(t, worker, c); };
  // Whatever the probe chose, the first closure runs with it.
  auto first = run(1);
  CHECK(first.closure == 1);
  auto floats = s.layout->model_size;
  caf::anon_send(worker, formats_atom_v, std::string{"bf16"});
  auto r = run(2);
  CHECK(r.bytes_pulled == floats * 2);
  CHECK(r.bytes_pushed == floats * 2);
  caf::anon_send(worker, formats_atom_v, std::string{"fp32"});
  r = run(3);
  CHECK(r.bytes_pulled == floats * 4);
  CHECK(r.bytes_pushed == floats * 4);
  for (auto& ps : s.servers)
    CHECK(t.ask<ps_stats>(ps, stats_atom_v, uint32_t(&ps - s.servers.data()))
            .pushes
          == 3);
}

TEST_CASE("a worker pushes each variable in the format named for it",
          "[format_probe][worker][wire]") {
  test::actor_fixture t{false};
  two_servers s{t};
  auto opts = test::worker_options_on(s.servers, s.net, s.data, s.layout);
  opts.variable_formats["dense_0/kernel"] = make_wire_format("topk:4");
  auto worker = t.keep(spawn_worker(t.sys, std::move(opts)));
  auto r = test::run_closure(t, worker, 1);
  // Whole variables, round-robin: ps 0 holds dense_0/kernel (64 floats,
  // sent as 4 (index, value) pairs) and dense_1/kernel (32 plain floats),
  // ps 1 both biases (16 + 2 plain floats).
  CHECK(r.bytes_pushed == (4 * 8 + 32 * 4) + 18 * 4);
  CHECK(r.bytes_pulled == s.layout->model_size * 4);
  for (uint32_t p = 0; p < 2; ++p)
    CHECK(t.ask<ps_stats>(s.servers[p], stats_atom_v, p).pushes == 1);
}
