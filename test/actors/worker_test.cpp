// The worker actor against real parameter servers in a threaded actor
// system: what it does when the server of a group it awaits an answer from
// is replaced or lost. Every receive has a timeout, so a closure that never
// ends fails the test instead of hanging it.

#include "actors/worker_actor.hpp"

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/local_cluster.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "models/registry.hpp"
#include "models/step_function.hpp"

using namespace actorps;

namespace {

constexpr auto patience = std::chrono::seconds(10);

/// 4 uniform features, 2 classes.
std::shared_ptr<const dataset> tiny_data() {
  auto d = std::make_shared<dataset>();
  d->schema.dense_dim = 4;
  d->schema.classes = 2;
  d->examples.reset(4, 0);
  std::mt19937 rng{3};
  std::uniform_real_distribution<float> u{0.0f, 1.0f};
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 4; ++j)
      d->examples.dense.push_back(u(rng));
    d->examples.labels.push_back(i % 2);
    ++d->examples.rows;
  }
  return d;
}

/// One sync group of two workers on ps `a` (a push is held until the other
/// worker's arrives: no round timeout), and an async ps `b` holding the same
/// variables; worker 0 of the two runs closures.
struct held_push {
  system_config sys_cfg;
  caf::actor_system sys{sys_cfg};
  caf::scoped_actor self{sys};
  job_config cfg;
  std::shared_ptr<const dataset> data = tiny_data();
  std::shared_ptr<const model> net;
  std::shared_ptr<const placement> layout;
  ps_actor a;
  ps_actor b;
  worker_actor worker;

  held_push() {
    cfg.layers = {4, 2};
    cfg.ps = 1;
    cfg.workers = 2;
    cfg.mode = "sync";
    cfg.sync_round_timeout_ms = 0;
    net = make_model(cfg, data->schema);
    layout = std::make_shared<const placement>(job_placement(cfg, *net));
    a = spawn_ps(sys, ps_options_of(cfg, 0));
    create_variables(sys, *layout, {a}, cfg, *net);
    auto async_cfg = cfg;
    async_cfg.mode = "async";
    b = spawn_ps(sys, ps_options_of(async_cfg, 1));
    create_variables(sys, *layout, {b}, async_cfg, *net);
    // b serves group 0 at view 1, as a promoted backup would.
    replica_config promoted;
    promoted.view = 1;
    self->request(b, patience, configure_atom_v, promoted)
      .receive([](bool) {}, [&](caf::error& err) { FAIL(sys.render(err)); });
    worker_options opts;
    opts.index = 0;
    opts.net = net;
    opts.data = std::make_shared<batch_iterator>(data, input_context{2, 0}, 8,
                                                 1);
    opts.layout = layout;
    opts.servers = {a};
    worker = spawn_worker(sys, std::move(opts));
  }

  ~held_push() {
    for (auto& x : {caf::actor_cast<caf::actor>(a),
                    caf::actor_cast<caf::actor>(b),
                    caf::actor_cast<caf::actor>(worker)})
      caf::anon_send_exit(x, caf::exit_reason::user_shutdown);
  }

  /// The pushes group 0 of `ps` has applied.
  uint64_t pushes(const ps_actor& ps) {
    uint64_t n = 0;
    self->request(ps, patience, stats_atom_v, uint32_t{0})
      .receive([&](ps_stats& s) { n = s.pushes; },
               [&](caf::error& err) { FAIL(sys.render(err)); });
    return n;
  }

  /// Waits until `ps` has a push of closure 1 (applied under async, or held
  /// in the open sync round).
  void wait_for_push(const ps_actor& ps) {
    auto until = std::chrono::steady_clock::now() + patience;
    while (pushes(ps) == 0) {
      REQUIRE(std::chrono::steady_clock::now() < until);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
};

} // namespace

TEST_CASE("a worker sends what awaits an answer again when a route moves "
          "its group to another server",
          "[worker]") {
  held_push t;
  auto closure = t.self->request(t.worker, patience, run_atom_v,
                                 closure_request{1, train_step_name});
  // The push sits in ps a's open round; a failover moves the group to b
  // (as the dispatcher's route would, before the worker hears of a's end).
  t.wait_for_push(t.a);
  caf::anon_send(t.worker, route_atom_v,
                 std::vector<group_route>{
                   group_route{0, 1, 1, caf::actor_cast<caf::strong_actor_ptr>(
                                          t.b)}});
  bool done = false;
  closure.receive(
    [&](step_result& r) {
      done = true;
      CHECK(r.closure == 1);
      CHECK(r.worker == 0);
    },
    [&](caf::error& err) { FAIL("closure 1 failed: " << t.sys.render(err)); });
  CHECK(done);
  CHECK(t.pushes(t.b) == 1);
  // The worker goes on with b: the next closure is applied there too.
  t.self->request(t.worker, patience, run_atom_v,
                  closure_request{2, train_step_name})
    .receive([&](step_result& r) { CHECK(r.closure == 2); },
             [&](caf::error& err) {
               FAIL("closure 2 failed: " << t.sys.render(err));
             });
  CHECK(t.pushes(t.b) == 2);
}

TEST_CASE("a server killed while it holds a push fails the closure with "
          "ps_lost, and so every later one until a route replaces it",
          "[worker]") {
  held_push t;
  auto closure = t.self->request(t.worker, patience, run_atom_v,
                                 closure_request{1, train_step_name});
  t.wait_for_push(t.a);
  caf::anon_send_exit(t.a, caf::exit_reason::kill);
  caf::error failure;
  closure.receive([&](step_result&) { FAIL("closure 1 reported success"); },
                  [&](caf::error& err) { failure = err; });
  CHECK(failure == errc::ps_lost);
  t.self->request(t.worker, patience, run_atom_v,
                  closure_request{2, train_step_name})
    .receive([&](step_result&) { FAIL("closure 2 ran without a server"); },
             [&](caf::error& err) { CHECK(err == errc::ps_lost); });
  caf::anon_send(t.worker, route_atom_v,
                 std::vector<group_route>{
                   group_route{0, 1, 1, caf::actor_cast<caf::strong_actor_ptr>(
                                          t.b)}});
  t.self->request(t.worker, patience, run_atom_v,
                  closure_request{3, train_step_name})
    .receive([&](step_result& r) { CHECK(r.closure == 3); },
             [&](caf::error& err) {
               FAIL("closure 3 failed: " << t.sys.render(err));
             });
  CHECK(t.pushes(t.b) == 1);
}
