// The worker actor against real parameter servers in a threaded actor
// system: what it does when the server of a group it awaits an answer from
// is replaced or lost. Every receive has a timeout, so a closure that never
// ends fails the test instead of hanging it.

#include "actors/worker_actor.hpp"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/fault_injection.hpp"
#include "actors/ps_actor.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "models/registry.hpp"
#include "models/step_function.hpp"
#include "test/actor_fixture.hpp"
#include "test/actors/worker_fixture.hpp"

using namespace actorps;

namespace {

constexpr auto patience = test::reply_timeout;

using test::tiny_data;

/// One sync group of two workers on ps `a` (a push is held until the other
/// worker's arrives: no round timeout), and an async ps `b` holding the same
/// variables; worker 0 of the two runs closures.
struct held_push : test::actor_fixture {
  job_config cfg;
  std::shared_ptr<const dataset> data = tiny_data();
  std::shared_ptr<const model> net;
  std::shared_ptr<const placement> layout;
  ps_actor a;
  ps_actor b;
  worker_actor worker;

  /// With `sw`, worker 0 computes with a model that fails once armed.
  explicit held_push(std::shared_ptr<step_error_switch> sw = nullptr)
    : actor_fixture(false) {
    cfg.layers = {4, 2};
    cfg.ps = 1;
    cfg.workers = 2;
    cfg.mode = "sync";
    cfg.sync_round_timeout_ms = 0;
    net = make_model(cfg, data->schema);
    layout = std::make_shared<const placement>(job_placement(cfg, *net));
    a = keep(spawn_ps(sys, ps_options_of(cfg, 0)));
    create_variables(sys, *layout, {a}, cfg, *net);
    auto async_cfg = cfg;
    async_cfg.mode = "async";
    b = keep(spawn_ps(sys, ps_options_of(async_cfg, 1)));
    create_variables(sys, *layout, {b}, async_cfg, *net);
    // b serves group 0 at view 1, as a promoted backup would.
    replica_config promoted;
    promoted.view = 1;
    CHECK(ask<bool>(b, configure_atom_v, promoted));
    worker_options opts;
    opts.index = 0;
    opts.net = sw ? failing_model(net, sw, 0) : net;
    opts.data = std::make_shared<batch_iterator>(data, input_context{2, 0}, 8,
                                                 1);
    opts.layout = layout;
    opts.servers = {a};
    worker = keep(spawn_worker(sys, std::move(opts)));
  }

  /// The pushes group 0 of `ps` has applied.
  uint64_t pushes(const ps_actor& ps) {
    return ask<ps_stats>(ps, stats_atom_v, uint32_t{0}).pushes;
  }

  /// Waits until `ps` has a push of closure 1 (applied under async, or held
  /// in the open sync round).
  void wait_for_push(const ps_actor& ps) {
    REQUIRE(eventually([&] { return pushes(ps) > 0; }));
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

TEST_CASE("a push sent again after a route moved its group carries the "
          "running step's runs only, not those of the steps before",
          "[worker]") {
  held_push t;
  // Worker 1 of the sync group, so that the rounds of closures 1 and 2
  // close.
  worker_options opts;
  opts.index = 1;
  opts.net = t.net;
  opts.data = std::make_shared<batch_iterator>(t.data, input_context{2, 1}, 8,
                                               1);
  opts.layout = t.layout;
  opts.servers = {t.a};
  auto other = t.keep(spawn_worker(t.sys, std::move(opts)));
  uint64_t one_push = 0;
  for (uint64_t c = 1; c <= 2; ++c) {
    auto mine = t.self->request(t.worker, patience, run_atom_v,
                                closure_request{c, train_step_name});
    auto theirs = t.self->request(other, patience, run_atom_v,
                                  closure_request{100 + c, train_step_name});
    mine.receive([&](step_result& r) { one_push = r.bytes_pushed; },
                 [&](caf::error& err) {
                   FAIL("closure " << c << " failed: " << t.sys.render(err));
                 });
    theirs.receive([](step_result&) {},
                   [&](caf::error& err) {
                     FAIL("closure " << 100 + c
                                     << " failed: " << t.sys.render(err));
                   });
  }
  REQUIRE(one_push > 0);
  // Closure 3's push sits in a's open round (worker 1 runs none); the group
  // moves to b.
  auto closure = t.self->request(t.worker, patience, run_atom_v,
                                 closure_request{3, train_step_name});
  REQUIRE(t.eventually([&] { return t.pushes(t.a) > 4; }));
  caf::anon_send(t.worker, route_atom_v,
                 std::vector<group_route>{
                   group_route{0, 1, 1, caf::actor_cast<caf::strong_actor_ptr>(
                                          t.b)}});
  // Its push went to a, then once to b: not the runs of closures 1 and 2.
  closure.receive(
    [&](step_result& r) { CHECK(r.bytes_pushed == 2 * one_push); },
    [&](caf::error& err) { FAIL("closure 3 failed: " << t.sys.render(err)); });
  CHECK(t.pushes(t.b) == 1);
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

TEST_CASE("a worker whose model throws fails that closure with step_failed "
          "and pushes nothing, the next closure runs",
          "[worker][faults]") {
  auto sw = std::make_shared<step_error_switch>();
  held_push t{sw};
  sw->armed = true;
  caf::error failure;
  t.self->request(t.worker, patience, run_atom_v,
                  closure_request{1, train_step_name})
    .receive([&](step_result&) { FAIL("closure 1 reported success"); },
             [&](caf::error& err) { failure = err; });
  CHECK(failure == errc::step_failed);
  auto text = t.sys.render(failure);
  CHECK(text.find("the model") != std::string::npos);
  CHECK(text.find("injected step error (fault error:worker:0)")
        != std::string::npos);
  CHECK(t.pushes(t.a) == 0);
  CHECK_FALSE(sw->armed);
  // Armed once, it fails once: closure 2 computes and pushes (its push then
  // waits in the sync round for the other worker).
  t.self->send(t.worker, run_atom_v, closure_request{2, train_step_name});
  t.wait_for_push(t.a);
}

TEST_CASE("a lean worker (buffers freed between steps) pushes the same "
          "updates as one that keeps them",
          "[worker]") {
  test::actor_fixture t{false};
  job_config cfg;
  cfg.layers = {4, 3, 2};
  cfg.ps = 1;
  cfg.workers = 1;
  auto data = tiny_data();
  auto net = make_model(cfg, data->schema);
  auto layout = std::make_shared<const placement>(job_placement(cfg, *net));
  std::vector<float> values[2];
  for (int lean = 0; lean < 2; ++lean) {
    auto ps = t.keep(spawn_ps(t.sys, ps_options_of(cfg, 0)));
    create_variables(t.sys, *layout, {ps}, cfg, *net);
    auto opts = test::worker_options_on({ps}, net, data, layout);
    opts.lean = lean == 1;
    auto worker = t.keep(spawn_worker(t.sys, std::move(opts)));
    for (uint64_t c = 1; c <= 3; ++c)
      CHECK(test::run_closure(t, worker, c).closure == c);
    pull_request req;
    req.worker = no_worker;
    auto r = t.ask<pull_reply>(ps, pull_atom_v, req);
    values[lean].assign(r.values.values.begin(), r.values.values.end());
  }
  REQUIRE(values[0].size() == layout->model_size);
  CHECK(values[0] == values[1]);
}

namespace {

/// One async ps and one worker on it, with or without overlap (or, with
/// `prefetch`, with or without prefetch).
test::small_job lone_worker(test::actor_fixture& t, bool on,
                            bool prefetch = false) {
  job_config cfg;
  cfg.ps = 1;
  return test::small_job{t, cfg, [&](worker_options& o) {
                           (prefetch ? o.prefetch : o.overlap) = on;
                         }};
}

/// Runs closures 1 .. last on `w`; the groups whose values steps 2 .. last
/// took from a pull sent ahead (closure 1 has none to take). Values pulled
/// ahead wait at most a step, or 5 ms: on a loaded host the test's own
/// round trip may exceed that, so not every step must take them.
uint64_t pulls_ahead_over(test::small_job& w, test::actor_fixture& t,
                          uint64_t last) {
  CHECK(w.run(t, 1).pulls_ahead == 0);
  uint64_t ahead = 0;
  for (uint64_t c = 2; c <= last; ++c)
    ahead += w.run(t, c).pulls_ahead;
  return ahead;
}

} // namespace

TEST_CASE("with overlap, a worker's next step takes the values it pulled "
          "just before its push: one step staler, and counted so",
          "[worker][overlap]") {
  test::actor_fixture t{false};
  for (int overlap = 0; overlap < 2; ++overlap) {
    auto w = lone_worker(t, overlap == 1);
    auto ahead = pulls_ahead_over(w, t, 5);
    if (overlap == 1)
      CHECK(ahead >= 1);
    else
      CHECK(ahead == 0);
    // Alone on its server, the worker's pushes are stale only by what it
    // pulled ahead: values read before its own previous push.
    auto stats = w.stats(t);
    CHECK(stats.pushes == 5);
    CHECK(stats.staleness_sum == ahead);
    CHECK(stats.staleness_max == (ahead > 0 ? 1u : 0u));
  }
}

TEST_CASE("with prefetch, a worker's next step takes the values it pulled "
          "right behind its push: they see the push, so its pushes stay "
          "fresh and it learns what it learns without prefetch",
          "[worker][prefetch]") {
  test::actor_fixture t{false};
  std::vector<float> values[2];
  for (int prefetch = 0; prefetch < 2; ++prefetch) {
    auto w = lone_worker(t, prefetch == 1, true);
    auto ahead = pulls_ahead_over(w, t, 6);
    if (prefetch == 1)
      CHECK(ahead >= 1);
    else
      CHECK(ahead == 0);
    // Under overlap each step that takes values pulled ahead is one step
    // stale; here none is.
    auto stats = w.stats(t);
    CHECK(stats.pushes == 6);
    CHECK(stats.staleness_sum == 0);
    values[prefetch] = w.values(t);
  }
  REQUIRE_FALSE(values[0].empty());
  CHECK(values[0] == values[1]);
}

TEST_CASE("values pulled ahead are not used when older than a step, nor "
          "after a route moved their group",
          "[worker][overlap]") {
  test::actor_fixture t{false};
  auto w = lone_worker(t, true);
  CHECK(w.run(t, 1).pulls_ahead == 0);
  w.run(t, 2);
  // A step of this model takes well under 50 ms (and the floor is 5 ms):
  // values that waited that long would add more than one step of
  // staleness.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(w.run(t, 3).pulls_ahead == 0);
  // The group moves to server b: what was pulled ahead from the old one is
  // dropped, and the next step pulls from b and pushes there.
  auto b = t.keep(spawn_ps(t.sys, ps_options_of(w.cfg, 1)));
  create_variables(t.sys, *w.layout, {b}, w.cfg, *w.net);
  replica_config promoted;
  promoted.view = 1;
  CHECK(t.ask<bool>(b, configure_atom_v, promoted));
  caf::anon_send(w.worker, route_atom_v,
                 std::vector<group_route>{group_route{
                   0, 1, 1, caf::actor_cast<caf::strong_actor_ptr>(b)}});
  CHECK(w.run(t, 4).pulls_ahead == 0);
  CHECK(t.ask<ps_stats>(b, stats_atom_v, uint32_t{0}).pushes == 1);
  CHECK(w.stats(t).pushes == 3);
}
