// The coordinator API's contract (TensorFlow's ClusterCoordinator),
// checked on the dispatcher and the facade with fake workers whose behaviour
// each test scripts (test/actors/dispatcher_fixture.hpp): results, step
// errors, many threads. Failures of nodes: dispatcher_failure_test.cpp.

#include "test/actors/dispatcher_fixture.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace actorps::test::dispatch;
using namespace std::chrono_literals;
using Catch::Contains;

// -- results ------------------------------------------------------------------------

TEST_CASE_METHOD(deterministic,
                 "a scheduled closure returns its result through remote_value",
                 "[actors][dispatcher]") {
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
                 "[actors][dispatcher]") {
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
                 "[actors][dispatcher][errors]") {
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
                 "[actors][dispatcher][errors]") {
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
                 "schedule raises a pending error once and queues nothing, the "
                 "next schedule runs",
                 "[actors][dispatcher][errors]") {
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
                 "[actors][dispatcher][errors]") {
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
                 "[actors][dispatcher][threads]") {
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
                 "[actors][dispatcher][threads][errors]") {
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
                 "every remote value is done when join returns, and when "
                 "schedule raises a step error",
                 "[actors][dispatcher][threads][errors]") {
  // A race, so repeated: join() once returned while the last closure's
  // value still read not done (its count fell before its flag was set),
  // about one round in five of 200 closures on 2 workers.
  auto dispatcher = add_dispatcher(add_workers(2));
  for (int round = 0; round < 300; ++round) {
    cluster_coordinator coord{sys, dispatcher, 4,
                              1 + 10 * static_cast<uint64_t>(round)};
    std::vector<remote_value> rvs;
    for (int i = 0; i < 10; ++i)
      rvs.push_back(coord.schedule("train_step"));
    REQUIRE(coord.join_for(60s));
    for (auto& rv : rvs) {
      INFO("round " << round << ", closure " << rv.closure_id());
      REQUIRE(rv.done());
    }
  }
  // schedule() raising: TensorFlow waits for the closures in flight first,
  // so none of them may read not done then.
  for (int round = 0; round < 20; ++round) {
    // A dispatcher per round: one that saw a step error cancels what
    // follows.
    auto fresh = add_dispatcher(add_workers(2));
    uint64_t first = 100000 + 100 * static_cast<uint64_t>(round);
    cluster_coordinator coord{sys, fresh, 4, first};
    sc->set(first + 6, action::fail);
    std::vector<remote_value> rvs;
    bool raised = false;
    for (int i = 0; i < 40 && !raised; ++i) {
      try {
        rvs.push_back(coord.schedule("train_step"));
      } catch (const runtime_failure&) {
        raised = true;
        for (auto& rv : rvs) {
          INFO("round " << round << ", closure " << rv.closure_id());
          CHECK(rv.done());
        }
      }
    }
    if (!raised) {
      try {
        coord.join_for(60s);
      } catch (const runtime_failure&) {
        raised = true;
      }
    }
    CHECK(raised);
  }
}

TEST_CASE_METHOD(threaded,
                 "done with a pending error waits for the running closures, "
                 "then raises it",
                 "[actors][dispatcher][threads][errors]") {
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
