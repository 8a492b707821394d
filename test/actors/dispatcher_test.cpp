// The coordinator API's contract (TensorFlow's ClusterCoordinator, issue 17),
// checked on the dispatcher and the facade with fake workers whose behaviour
// each test scripts. Deterministic (CAF's testing scheduler) where one thread
// suffices; the multi-threaded cases use bounded waits, so that a missing
// reply fails a test instead of hanging it.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/scheduler/test_coordinator.hpp"
#include "caf/send.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/cluster_coordinator.hpp"
#include "actors/dispatcher_actor.hpp"
#include "test/actor_fixture.hpp"
#include "core/error.hpp"

using namespace actorps;
using namespace std::chrono_literals;
using Catch::Contains;

namespace {

// -- the test's actor system ----------------------------------------------------

/// Registers what cluster/local_cluster.cpp's system_config registers (the
/// message types, the "actorps" error renderer), on CAF's testing scheduler
/// or on a real one with 4 threads.

// -- fake workers ---------------------------------------------------------------

/// What a fake worker does with a closure.
enum class action {
  reply,                /// replies with a value at once
  fail,                 /// replies with script::fail_code at once
  hold,                 /// keeps it until put_atom; honours cancel_atom
  hold_ignoring_cancel, /// keeps it until put_atom (its push was sent)
};

/// Shared by the test and its fake workers (locked: the threaded tests
/// read it while workers write it).
struct script {
  std::mutex mtx;
  action fallback = action::reply;
  std::map<uint64_t, action> by_id;
  /// Workers that die (exit_reason::kill) on the next closure they get.
  std::set<uint32_t> die_next;
  errc fail_code = errc::step_failed;
  /// A worker that answers every closure with ps_lost for ps 0, as one whose
  /// link to that server is down (-1: none).
  int64_t fail_worker = -1;
  /// (worker, closure) of every closure a worker got, and every cancel.
  std::vector<std::pair<uint32_t, uint64_t>> runs;
  std::vector<std::pair<uint32_t, uint64_t>> cancels;

  void set(uint64_t id, action a) {
    std::lock_guard<std::mutex> guard{mtx};
    by_id[id] = a;
  }

  size_t runs_of(uint64_t id) {
    std::lock_guard<std::mutex> guard{mtx};
    return std::count_if(runs.begin(), runs.end(),
                         [&](auto& r) { return r.second == id; });
  }

  size_t run_count() {
    std::lock_guard<std::mutex> guard{mtx};
    return runs.size();
  }

  size_t runs_by(uint32_t worker) {
    std::lock_guard<std::mutex> guard{mtx};
    return std::count_if(runs.begin(), runs.end(),
                         [&](auto& r) { return r.first == worker; });
  }
};

/// A worker with one more message, for the test: answers held closure `id`
/// with `err`, or with a value if `err` is empty.
using fake_worker_actor = worker_actor::extend<
  caf::reacts_to<caf::put_atom, uint64_t, caf::error>>;

struct held_closure {
  caf::typed_response_promise<step_result> promise;
  bool ignore_cancel = false;
};

struct fake_worker_state {
  std::map<uint64_t, held_closure> held;
  static constexpr const char* name = "fake-worker";
};

step_result value_of(uint32_t worker, uint64_t id) {
  step_result r;
  r.closure = id;
  r.worker = worker;
  r.loss = 1.0 / double(id);
  r.samples = 8;
  return r;
}

fake_worker_actor::behavior_type
fake_worker(fake_worker_actor::stateful_pointer<fake_worker_state> self,
            uint32_t index, std::shared_ptr<script> sc) {
  return {
    [=](run_atom, closure_request& req) -> caf::result<step_result> {
      action act;
      {
        std::lock_guard<std::mutex> guard{sc->mtx};
        sc->runs.emplace_back(index, req.id);
        if (sc->die_next.erase(index) > 0) {
          auto rp = self->make_response_promise<step_result>();
          self->quit(caf::exit_reason::kill);
          return rp;
        }
        auto i = sc->by_id.find(req.id);
        act = i != sc->by_id.end() ? i->second : sc->fallback;
        if (sc->fail_worker == int64_t{index})
          return caf::make_error(errc::ps_lost, "ps", uint32_t{0},
                                 "link down");
      }
      switch (act) {
        case action::reply:
          return value_of(index, req.id);
        case action::fail:
          return caf::make_error(sc->fail_code,
                                 "worker " + std::to_string(index)
                                   + ": the step threw: bad batch");
        default: {
          auto rp = self->make_response_promise<step_result>();
          self->state.held.emplace(
            req.id, held_closure{rp, act == action::hold_ignoring_cancel});
          return rp;
        }
      }
    },
    [=](cancel_atom, uint64_t id) {
      {
        std::lock_guard<std::mutex> guard{sc->mtx};
        sc->cancels.emplace_back(index, id);
      }
      auto i = self->state.held.find(id);
      if (i != self->state.held.end() && !i->second.ignore_cancel) {
        i->second.promise.deliver(
          caf::make_error(errc::cancelled, "closure", id));
        self->state.held.erase(i);
      }
    },
    [=](caf::put_atom, uint64_t id, caf::error& err) {
      auto i = self->state.held.find(id);
      if (i == self->state.held.end())
        return;
      if (err)
        i->second.promise.deliver(err);
      else
        i->second.promise.deliver(value_of(index, id));
      self->state.held.erase(i);
    },
    [=](seek_atom, uint64_t, uint64_t) { return true; },
    [=](redial_atom, uint32_t) {},
    [=](dialed_atom, uint32_t, caf::strong_actor_ptr&, uint64_t) {},
    [=](ping_atom) { return index; },
    [=](route_atom, std::vector<group_route>&) {},
  };
}

/// A parameter server that answers everything with nothing (only its loss
/// matters here).
ps_actor::behavior_type fake_ps(ps_actor::pointer) {
  return {
    [=](create_atom, create_shard&) { return uint64_t{0}; },
    [=](pull_atom, pull_request&) { return pull_reply{}; },
    [=](push_atom, push_request&) { return uint64_t{0}; },
    [=](replicate_atom, replicate_request&) { return uint64_t{0}; },
    [=](configure_atom, replica_config&) { return true; },
    [=](install_atom, uint32_t, uint64_t, ps_snapshot&) { return uint64_t{0}; },
    [=](stats_atom, uint32_t) { return ps_stats{}; },
    [=](save_atom, uint32_t) { return ps_snapshot{}; },
    [=](restore_atom, uint32_t, ps_snapshot&) { return uint64_t{0}; },
    [=](prune_atom, uint64_t, uint64_t) {},
    [=](ping_atom) { return uint32_t{0}; },
    [=](caf::flush_atom, uint32_t, uint64_t) {},
  };
}

// -- fixtures -------------------------------------------------------------------

/// An actor system (test/actor_fixture.hpp) with fake workers; stops every
/// actor it knows at the end.
struct fixture : test::actor_fixture {
  std::shared_ptr<script> sc = std::make_shared<script>();
  std::vector<fake_worker_actor> fakes;

  explicit fixture(bool deterministic) : actor_fixture(deterministic) {
    // nop
  }

  fake_worker_actor add_worker(uint32_t index) {
    auto w = keep(sys.spawn(fake_worker, index, sc));
    fakes.push_back(w);
    return w;
  }

  std::vector<worker_actor> add_workers(uint32_t n) {
    std::vector<worker_actor> result;
    for (uint32_t i = 0; i < n; ++i)
      result.emplace_back(add_worker(i));
    return result;
  }

  dispatcher_actor
  add_dispatcher(std::vector<worker_actor> workers,
                 std::chrono::milliseconds grace = 0ms,
                 worker_respawn respawn = nullptr, uint32_t budget = 0,
                 std::vector<ps_actor> servers = {},
                 ps_recovery recover = {}) {
    return keep(spawn_dispatcher(sys, std::move(workers), std::move(respawn),
                                 budget, grace, std::move(servers),
                                 std::move(recover)));
  }
};

struct deterministic : fixture {
  caf::scheduler::test_coordinator& sched;

  deterministic() : fixture(true), sched(*fixture::sched) {
    // nop
  }
};

struct threaded : fixture {
  threaded() : fixture(false) {
    // nop
  }
};

bool is(const remote_value& rv, errc code) {
  return rv.done() && rv.error() == code;
}

} // namespace

// -- results ------------------------------------------------------------------------

TEST_CASE_METHOD(deterministic,
                 "a scheduled closure returns its result through remote_value",
                 "[actors][coordinator]") {
  auto dispatcher = add_dispatcher(add_workers(1));
  cluster_coordinator coord{sys, dispatcher, 16};
  auto rv = coord.schedule("train_step");
  CHECK_FALSE(rv.done());
  CHECK_FALSE(rv.get().has_value()); // not run yet: get() does not block
  CHECK_FALSE(coord.join_for(0ms));
  sched.run();
  REQUIRE(rv.done());
  auto r = rv.get();
  REQUIRE(r.has_value());
  CHECK(r->closure == rv.closure_id());
  CHECK(rv.fetch().closure == rv.closure_id());
  CHECK(rv.fetch().samples == 8);
  CHECK(coord.join_for(0ms));
  CHECK(coord.done());
}

TEST_CASE_METHOD(threaded,
                 "join waits for every closure and every worker takes some",
                 "[actors][coordinator]") {
  auto dispatcher = add_dispatcher(add_workers(2));
  cluster_coordinator coord{sys, dispatcher, 32};
  std::vector<remote_value> rvs;
  for (int i = 0; i < 400; ++i)
    rvs.push_back(coord.schedule("train_step"));
  REQUIRE(coord.join_for(30s));
  CHECK(coord.done());
  auto results = fetch(rvs);
  REQUIRE(results.size() == 400);
  std::set<uint32_t> workers;
  for (size_t i = 0; i < rvs.size(); ++i) {
    CHECK(results[i].closure == rvs[i].closure_id());
    workers.insert(results[i].worker);
  }
  CHECK(workers == std::set<uint32_t>{0, 1});
  auto counts = coord.counts();
  CHECK(counts.scheduled == 400);
  CHECK(counts.finished == 400);
  CHECK(sc->run_count() == 400);
}

// -- step errors ----------------------------------------------------------------------

TEST_CASE_METHOD(deterministic,
                 "a step error completes its closure, is not retried, and its "
                 "worker stays in service",
                 "[actors][coordinator][errors]") {
  auto code = GENERATE(errc::step_failed, errc::unknown_function);
  sc->fail_code = code;
  auto dispatcher = add_dispatcher(add_workers(2));
  cluster_coordinator coord{sys, dispatcher, 16};
  sc->set(1, action::fail);
  auto bad = coord.schedule("train_step");
  sched.run();
  REQUIRE(is(bad, code));
  CHECK_THROWS_WITH(bad.fetch(), Contains("closure 1 (train_step) failed "
                                          "on worker 0")
                                   && Contains(to_string(code))
                                   && Contains("bad batch"));
  CHECK(sc->runs_of(1) == 1); // not retried on the other worker
  CHECK(coord.counts().reexecuted == 0);
  // Raised once by join, then cleared.
  CHECK_THROWS_WITH(coord.join_for(0ms), Contains("closure 1")
                                           && Contains(to_string(code)));
  CHECK(coord.join_for(0ms));
  // Worker 0 still takes closures.
  std::vector<remote_value> rvs;
  for (int i = 0; i < 4; ++i)
    rvs.push_back(coord.schedule("train_step"));
  sched.run();
  std::set<uint32_t> workers;
  for (auto& r : fetch(rvs))
    workers.insert(r.worker);
  CHECK(workers == std::set<uint32_t>{0, 1});
  auto counts = coord.counts();
  CHECK(counts.failed == 1);
  CHECK(counts.finished == 4);
  CHECK(coord.done());
}

TEST_CASE_METHOD(deterministic,
                 "the first error cancels queued and running closures and is "
                 "raised once, only after none runs",
                 "[actors][coordinator][errors]") {
  auto dispatcher = add_dispatcher(add_workers(3));
  cluster_coordinator coord{sys, dispatcher, 16};
  sc->set(1, action::hold);                 // fails when the test says so
  sc->set(2, action::hold);                 // honours the cancel
  sc->set(3, action::hold_ignoring_cancel); // its push was already sent
  std::vector<remote_value> rvs;
  for (int i = 0; i < 5; ++i)
    rvs.push_back(coord.schedule("train_step"));
  sched.run();
  REQUIRE(sc->run_count() == 3); // 1, 2, 3 run; 4, 5 queued
  // Closure 1 fails; closure 6 is scheduled before the dispatcher hears of
  // it (the facade does not know yet, so schedule() cannot refuse it).
  caf::anon_send(fakes[0], caf::put_atom_v, uint64_t{1},
                 caf::make_error(errc::step_failed, "worker 0: NaN loss"));
  sched.run_once(); // worker 0 replies; the dispatcher has not run
  rvs.push_back(coord.schedule("train_step"));
  sched.run();
  CHECK(is(rvs[0], errc::step_failed));
  CHECK(is(rvs[1], errc::cancelled)); // running: cancelled by its worker
  CHECK_FALSE(rvs[2].done());         // running: ignores the cancel
  CHECK(is(rvs[3], errc::cancelled)); // queued
  CHECK(is(rvs[4], errc::cancelled)); // queued
  CHECK(is(rvs[5], errc::cancelled)); // scheduled after the error
  {
    std::lock_guard<std::mutex> guard{sc->mtx};
    using cancel = std::pair<uint32_t, uint64_t>;
    CHECK(sc->cancels == std::vector<cancel>{{1, 2}, {2, 3}});
    CHECK(sc->runs.size() == 3); // 4, 5 and 6 never ran
  }
  CHECK_THROWS_WITH(rvs[3].fetch(), Contains("closure 4 cancelled")
                                      && Contains("closure 1 (train_step)"));
  CHECK_THROWS_WITH(rvs[1].get(), Contains("cancelled"));
  // Closure 3 still runs: nothing is raised yet.
  CHECK_FALSE(coord.join_for(0ms));
  caf::anon_send(fakes[2], caf::put_atom_v, uint64_t{3}, caf::error{});
  sched.run();
  CHECK(rvs[2].fetch().closure == 3); // finished: its push was applied
  CHECK_THROWS_WITH(coord.done(), Contains("closure 1 (train_step) failed on "
                                           "worker 0")
                                    && Contains("step_failed")
                                    && Contains("NaN loss"));
  CHECK(coord.done()); // raised once, then cleared
  CHECK(coord.join_for(0ms));
  auto counts = coord.counts();
  CHECK(counts.scheduled == 6);
  CHECK(counts.finished == 1);
  CHECK(counts.failed == 1);
  CHECK(counts.cancelled == 4);
  // Later closures run normally.
  auto later = coord.schedule("train_step");
  sched.run();
  CHECK(later.fetch().closure == 7);
  counts = coord.counts();
  CHECK(counts.scheduled
        == counts.finished + counts.failed + counts.cancelled);
}

TEST_CASE_METHOD(deterministic,
                 "schedule raises a pending error once and queues nothing; the "
                 "next schedule runs",
                 "[actors][coordinator][errors]") {
  auto dispatcher = add_dispatcher(add_workers(1));
  cluster_coordinator coord{sys, dispatcher, 16};
  sc->set(1, action::fail);
  auto a = coord.schedule("train_step");
  auto b = coord.schedule("train_step");
  sched.run();
  CHECK(is(a, errc::step_failed));
  CHECK(is(b, errc::cancelled));
  CHECK_THROWS_WITH(coord.schedule("train_step"), Contains("closure 1"));
  CHECK(coord.counts().scheduled == 2);
  CHECK_FALSE(sched.has_job()); // nothing was sent
  auto c = coord.schedule("train_step");
  sched.run();
  CHECK(c.fetch().closure == 3);
  CHECK(coord.join_for(0ms));
}

TEST_CASE_METHOD(deterministic,
                 "schedule refuses an unknown step function at once",
                 "[actors][coordinator][errors]") {
  auto dispatcher = add_dispatcher(add_workers(1));
  sched.run();
  cluster_coordinator coord{sys, dispatcher, 16};
  CHECK_THROWS_AS(coord.schedule("no_such_step"), unknown_step_function);
  CHECK_THROWS_AS(coord.schedule("no_such_step"), runtime_failure);
  CHECK_THROWS_WITH(coord.schedule("no_such_step"),
                    Contains("\"no_such_step\"") && Contains("train_step")
                      && Contains("loss_step"));
  CHECK_FALSE(sched.has_job()); // nothing reached the dispatcher
  CHECK(coord.counts().scheduled == 0);
  CHECK(coord.done());
  auto rv = coord.schedule("loss_step");
  sched.run();
  CHECK(rv.fetch().closure == 1);
  CHECK(sc->run_count() == 1);
}

// -- threads --------------------------------------------------------------------------

TEST_CASE_METHOD(threaded,
                 "schedule from four threads gives unique ids and loses no "
                 "closure",
                 "[actors][coordinator][threads]") {
  auto dispatcher = add_dispatcher(add_workers(3));
  cluster_coordinator coord{sys, dispatcher, 64}; // schedulers block often
  constexpr int threads = 4;
  constexpr int per_thread = 5000;
  std::vector<std::vector<remote_value>> rvs(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i)
        rvs[t].push_back(coord.schedule("train_step"));
    });
  for (auto& t : pool)
    t.join();
  REQUIRE(coord.join_for(60s));
  std::vector<uint64_t> ids;
  for (auto& xs : rvs) {
    for (auto& r : fetch(xs))
      ids.push_back(r.closure);
    for (size_t i = 1; i < xs.size(); ++i) // in order within one thread
      CHECK(xs[i - 1].closure_id() < xs[i].closure_id());
  }
  std::sort(ids.begin(), ids.end());
  CHECK(std::unique(ids.begin(), ids.end()) == ids.end());
  REQUIRE(ids.size() == threads * per_thread);
  CHECK(ids.front() == 1);
  CHECK(ids.back() == threads * per_thread);
  auto counts = coord.counts();
  CHECK(counts.scheduled == threads * per_thread);
  CHECK(counts.finished == threads * per_thread);
  CHECK(sc->run_count() == threads * per_thread); // each ran once
}

TEST_CASE_METHOD(threaded,
                 "an error is raised exactly once among threads that schedule",
                 "[actors][coordinator][threads][errors]") {
  auto dispatcher = add_dispatcher(add_workers(3));
  cluster_coordinator coord{sys, dispatcher, 64};
  sc->set(2500, action::fail);
  constexpr int threads = 4;
  constexpr int per_thread = 2000;
  std::vector<int> raised(threads, 0);
  std::vector<std::string> texts(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        try {
          coord.schedule("train_step");
        } catch (const runtime_failure& e) {
          ++raised[t];
          texts[t] = e.what();
        }
      }
    });
  for (auto& t : pool)
    t.join();
  int total = 0;
  std::string text;
  for (int t = 0; t < threads; ++t) {
    total += raised[t];
    text += texts[t];
  }
  bool joined = false;
  try {
    joined = coord.join_for(60s);
  } catch (const runtime_failure& e) {
    joined = true;
    ++total;
    text += e.what();
  }
  REQUIRE(joined);
  CHECK(total == 1);
  CHECK_THAT(text, Contains("closure 2500 (train_step) failed"));
  CHECK(coord.join_for(0ms));
  auto counts = coord.counts();
  CHECK(counts.failed == 1);
  CHECK(counts.scheduled + total == threads * per_thread);
  CHECK(counts.scheduled
        == counts.finished + counts.failed + counts.cancelled);
  CHECK(sc->runs_of(2500) == 1);
}

TEST_CASE_METHOD(threaded,
                 "done with a pending error waits for the running closures, "
                 "then raises it",
                 "[actors][coordinator][threads][errors]") {
  auto dispatcher = add_dispatcher(add_workers(2));
  cluster_coordinator coord{sys, dispatcher, 16};
  sc->set(1, action::hold_ignoring_cancel);
  sc->set(2, action::fail);
  auto a = coord.schedule("train_step");
  REQUIRE(eventually([&] { return sc->run_count() == 1; }));
  auto b = coord.schedule("train_step");
  REQUIRE(eventually([&] { return b.done(); }));
  REQUIRE(eventually([&] {
    std::lock_guard<std::mutex> guard{sc->mtx};
    return sc->cancels.size() == 1; // closure 1 was told, and ignores it
  }));
  // Closure 1 is released later by another thread; done() must not return
  // before it is done (the pause only makes a wrong done() likely to fail).
  std::thread releaser{[&] {
    std::this_thread::sleep_for(50ms);
    caf::anon_send(fakes[0], caf::put_atom_v, uint64_t{1}, caf::error{});
  }};
  bool raised = false;
  bool a_done_then = false;
  try {
    coord.done();
  } catch (const runtime_failure& e) {
    raised = true;
    a_done_then = a.done();
    CHECK_THAT(std::string{e.what()}, Contains("closure 2 (train_step)"));
  }
  releaser.join();
  CHECK(raised);
  CHECK(a_done_then);
  CHECK(a.fetch().closure == 1);
  CHECK(coord.done());
}

// -- node failures --------------------------------------------------------------------

TEST_CASE_METHOD(deterministic,
                 "a closure whose worker dies runs on another, and the worker "
                 "is restarted after its back-off",
                 "[actors][coordinator][faults]") {
  std::vector<uint32_t> respawned;
  worker_respawn respawn = [&](uint32_t w, uint32_t incarnation) {
    respawned.push_back(w);
    CHECK(incarnation == 1);
    return worker_actor{add_worker(w)};
  };
  sc->die_next.insert(0);
  auto dispatcher = add_dispatcher(add_workers(2), 0ms, respawn, 1);
  cluster_coordinator coord{sys, dispatcher, 16};
  auto a = coord.schedule("train_step");
  auto b = coord.schedule("train_step");
  sched.run();
  // Worker 0 died holding closure 1; worker 1 ran both.
  CHECK(a.fetch().worker == 1);
  CHECK(b.fetch().worker == 1);
  CHECK(sc->runs_of(1) == 2);
  auto counts = coord.counts();
  CHECK(counts.finished == 2);
  CHECK(counts.reexecuted == 1);
  CHECK(respawned.empty()); // the restart waits for its back-off
  sched.trigger_timeouts();
  sched.run();
  REQUIRE(respawned == std::vector<uint32_t>{0});
  // The restarted worker takes closures again.
  std::vector<remote_value> rvs;
  for (int i = 0; i < 2; ++i)
    rvs.push_back(coord.schedule("train_step"));
  sched.run();
  std::set<uint32_t> workers;
  for (auto& r : fetch(rvs))
    workers.insert(r.worker);
  CHECK(workers == std::set<uint32_t>{0, 1});
  CHECK(coord.counts().finished == 4);
}

TEST_CASE_METHOD(deterministic,
                 "with every worker lost, queued closures wait the grace "
                 "period, then fail with no_workers",
                 "[actors][coordinator][faults]") {
  auto dispatcher = add_dispatcher(add_workers(1), 1000ms);
  cluster_coordinator coord{sys, dispatcher, 16};
  sc->set(1, action::hold);
  auto a = coord.schedule("train_step");
  sched.run();
  caf::anon_send_exit(fakes[0], caf::exit_reason::kill);
  auto b = coord.schedule("train_step");
  sched.run();
  CHECK(sched.advance_time(999ms) == 0);
  sched.run();
  CHECK_FALSE(a.done());
  CHECK_FALSE(b.done());
  CHECK(sched.advance_time(1ms) == 1);
  sched.run();
  CHECK(is(a, errc::no_workers));
  CHECK(is(b, errc::no_workers));
  CHECK_THROWS_WITH(b.fetch(), Contains("closure 2 (train_step) not run: no "
                                        "worker in service for 1 s")
                                 && Contains("worker 0: "));
  CHECK_THROWS_WITH(coord.join_for(0ms), Contains("no worker"));
  CHECK(coord.join_for(0ms));
  // Still none: a new closure fails at once.
  auto c = coord.schedule("train_step");
  sched.run();
  CHECK(is(c, errc::no_workers));
  auto counts = coord.counts();
  CHECK(counts.failed == 3);
  CHECK(counts.scheduled == 3);
}

TEST_CASE_METHOD(deterministic,
                 "a worker back within the grace period takes the queued "
                 "closures, and the grace restarts when it is lost again",
                 "[actors][coordinator][faults]") {
  auto dispatcher = add_dispatcher(add_workers(1), 1000ms);
  cluster_coordinator coord{sys, dispatcher, 16};
  sc->set(1, action::hold);
  auto a = coord.schedule("train_step");
  sched.run();
  caf::anon_send_exit(fakes[0], caf::exit_reason::kill); // t = 0
  sched.run();
  CHECK(sched.advance_time(500ms) == 0);
  sc->set(1, action::reply);
  caf::anon_send(dispatcher, replace_atom_v, uint32_t{0},
                 worker_actor{add_worker(0)}, false);
  sched.run();
  CHECK(a.fetch().closure == 1);
  CHECK(coord.counts().reexecuted == 1);
  sc->set(2, action::hold);
  auto b = coord.schedule("train_step");
  sched.run();
  CHECK(sched.advance_time(100ms) == 0);
  caf::anon_send_exit(fakes[1], caf::exit_reason::kill); // t = 600
  sched.run();
  CHECK(sched.advance_time(400ms) == 1); // the first period's timer
  sched.run();
  CHECK_FALSE(b.done());
  CHECK(sched.advance_time(599ms) == 0);
  sched.run();
  CHECK_FALSE(b.done());
  CHECK(sched.advance_time(1ms) == 1); // t = 1600
  sched.run();
  CHECK(is(b, errc::no_workers));
}

TEST_CASE_METHOD(threaded,
                 "a parameter server that cannot be recovered fails the "
                 "closures with an error naming it, raised once",
                 "[actors][coordinator][faults]") {
  auto ps = sys.spawn(fake_ps);
  ps_recovery recover;
  recover.bring_back = [](uint32_t) -> std::pair<ps_actor,
                                                 std::vector<uint32_t>> {
    throw std::runtime_error("no checkpoint to restore from");
  };
  auto dispatcher = add_dispatcher(add_workers(1), 0ms, nullptr, 0, {ps},
                                   recover);
  cluster_coordinator coord{sys, dispatcher, 16};
  sc->set(1, action::hold);
  auto a = coord.schedule("train_step");
  auto b = coord.schedule("train_step");
  REQUIRE(eventually([&] { return sc->run_count() == 1; }));
  caf::anon_send_exit(ps, caf::exit_reason::kill);
  bool raised = false;
  try {
    coord.join_for(10s); // false (timed out) fails the CHECK below
  } catch (const runtime_failure& e) {
    raised = true;
    CHECK_THAT(std::string{e.what()},
               Contains("ps0 lost and not recovered")
                 && Contains("no checkpoint to restore from"));
  }
  CHECK(raised);
  CHECK(coord.join_for(0ms)); // raised once
  CHECK_THROWS_WITH(a.fetch(), Contains("closure 1 (train_step) failed")
                                 && Contains("ps0"));
  CHECK_THROWS_WITH(b.fetch(), Contains("ps0"));
  {
    std::lock_guard<std::mutex> guard{sc->mtx};
    CHECK(sc->cancels.size() == 1); // the running closure was cancelled
  }
  // The job cannot go on: a later closure fails the same way.
  auto c = coord.schedule("train_step");
  CHECK_THROWS_WITH(c.fetch(), Contains("ps0"));
  auto counts = coord.counts();
  CHECK(counts.failed == 3);
  CHECK(sc->run_count() == 1);
}

// -- fencing --------------------------------------------------------------------

TEST_CASE_METHOD(deterministic,
                 "a late reply from a worker's earlier incarnation is dropped",
                 "[actors][coordinator][fencing]") {
  // Worker 0 runs closure 1 and falls silent; it is taken out of service
  // and comes back as a new incarnation (another actor), which runs closure 1
  // again. The old incarnation's reply then arrives: it answers an earlier
  // attempt and must not complete the closure (the closure is running again
  // on the same worker index).
  auto old_incarnation = add_worker(0);
  auto dispatcher = add_dispatcher({worker_actor{old_incarnation}}, 60s);
  cluster_coordinator coord{sys, dispatcher, 16};
  sched.run();
  sc->set(1, action::hold);
  auto rv = coord.schedule("train_step");
  sched.run();
  REQUIRE(sc->runs_of(1) == 1);
  caf::anon_send(dispatcher, lost_atom_v, uint32_t{0});
  sched.run();
  auto new_incarnation = add_worker(0);
  caf::anon_send(dispatcher, replace_atom_v, uint32_t{0},
                 worker_actor{new_incarnation}, false);
  sched.run();
  REQUIRE(sc->runs_of(1) == 2);
  // The old incarnation answers its attempt: dropped.
  caf::anon_send(old_incarnation, caf::put_atom_v, uint64_t{1}, caf::error{});
  sched.run();
  CHECK_FALSE(rv.done());
  // The new incarnation answers: the closure completes, once.
  caf::anon_send(new_incarnation, caf::put_atom_v, uint64_t{1}, caf::error{});
  sched.run();
  REQUIRE(rv.done());
  CHECK(rv.fetch().closure == 1);
  CHECK(coord.counts().finished == 1);
  CHECK(coord.counts().reexecuted == 1);
}

TEST_CASE_METHOD(deterministic,
                 "a worker that cannot reach a healthy server sits out a "
                 "back-off instead of failing closures in a loop",
                 "[actors][coordinator][fencing]") {
  // Worker 0 answers every closure with ps_lost for ps 0, which the
  // dispatcher is not recovering (its own link is down); worker 1 is fine.
  auto workers = add_workers(2);
  ps_actor server = sys.spawn(fake_ps);
  keep(server);
  ps_recovery recover;
  recover.bring_back = [](uint32_t) -> std::pair<ps_actor,
                                                 std::vector<uint32_t>> {
    throw std::runtime_error("not used");
  };
  auto dispatcher = add_dispatcher(workers, 60s, nullptr, 0, {server},
                                   recover);
  cluster_coordinator coord{sys, dispatcher, 64};
  sched.run();
  sc->fail_code = errc::ps_lost;
  sc->fail_worker = 0;
  std::vector<remote_value> rvs;
  for (int i = 0; i < 20; ++i)
    rvs.push_back(coord.schedule("train_step"));
  sched.run();
  // Worker 0 failed one closure and is benched; worker 1 ran the rest.
  for (auto& rv : rvs)
    REQUIRE(rv.done());
  CHECK(coord.counts().finished == 20);
  CHECK(coord.counts().reexecuted == 1);
  CHECK(sc->runs_by(0) == 1);
  // Its back-off over, it takes closures again (and fails once more).
  sched.trigger_timeouts();
  sched.run();
  rvs.push_back(coord.schedule("train_step"));
  rvs.push_back(coord.schedule("train_step"));
  sched.run();
  CHECK(rvs.back().done());
  CHECK(sc->runs_by(0) == 2);
}
