// The dispatcher when nodes fail (with fake workers and servers,
// test/actors/dispatcher_fixture.hpp): lost workers re-queue their closures
// and come back, lost servers are recovered, fencing.

#include "test/actors/dispatcher_fixture.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace actorps::test::dispatch;
using namespace std::chrono_literals;
using Catch::Contains;

// -- node failures --------------------------------------------------------------------

TEST_CASE_METHOD(deterministic,
                 "a closure whose worker dies runs on another, and the worker "
                 "is restarted after its back-off",
                 "[actors][dispatcher][faults]") {
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
                 "[actors][dispatcher][faults]") {
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
                 "[actors][dispatcher][faults]") {
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
                 "[actors][dispatcher][faults]") {
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
                 "[actors][dispatcher][fencing]") {
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
                 "[actors][dispatcher][fencing]") {
  // Worker 0 answers every closure with ps_lost for ps 0, which the
  // dispatcher is not recovering (its own link is down); worker 1 is fine.
  std::unique_ptr<cluster_coordinator> owner;
  auto rvs = run_with_worker_cut_off(owner, 1, 20);
  auto& coord = *owner;
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
