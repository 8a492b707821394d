// Closures per worker (spawn_dispatcher's closures_per_worker,
// cluster.closures_per_worker): a worker holds that many closures at once
// (one runs, the others wait in its queue); a lost worker's closures all
// go back to the queue, in their order, and each runs once more elsewhere.
// Deterministic: every wait is bounded (a closure not done after run() is
// a failure, not a wait).

#include <stdexcept>
#include <utility>
#include <vector>

#include "test/actors/dispatcher_fixture.hpp"

using namespace actorps;
using namespace actorps::test::dispatch;

TEST_CASE_METHOD(deterministic,
                 "with two closures per worker, each worker holds two, a lost "
                 "worker's two run again elsewhere, in their order",
                 "[actors][dispatcher][faults]") {
  for (uint64_t id : {1, 2, 3, 4})
    sc->set(id, action::hold);
  auto workers = add_workers(2);
  auto dispatcher = keep(spawn_dispatcher(sys, std::move(workers), nullptr, 0,
                                          0ms, {}, {}, 2));
  cluster_coordinator coord{sys, dispatcher, 16};
  std::vector<remote_value> rvs;
  for (int i = 0; i < 5; ++i)
    rvs.push_back(coord.schedule("train_step"));
  sched.run();
  // Two places per worker: four closures out, the fifth queued.
  REQUIRE(sc->run_count() == 4);
  CHECK(sc->runs_by(0) == 2);
  CHECK(sc->runs_by(1) == 2);
  std::vector<uint64_t> on0;
  for (auto& [w, id] : sc->runs)
    if (w == 0)
      on0.push_back(id);
  REQUIRE(on0.size() == 2);
  // Worker 0 dies holding both of its closures; they answer at once when
  // run again.
  for (auto id : on0)
    sc->set(id, action::reply);
  caf::anon_send_exit(fakes[0], caf::exit_reason::kill);
  sched.run();
  CHECK(sc->run_count() == 4); // worker 1 has no free place yet
  for (auto& [w, id] : std::vector<std::pair<uint32_t, uint64_t>>(
         sc->runs.begin(), sc->runs.end()))
    if (w == 1)
      caf::anon_send(fakes[1], caf::put_atom_v, id, caf::error{});
  sched.run();
  // Every closure is done now or never (nothing runs after run()): fetch()
  // only where done(), so that a lost closure fails here, not hangs.
  for (auto& rv : rvs) {
    INFO("closure " << rv.closure_id());
    REQUIRE(rv.done());
    CHECK(rv.fetch().worker == 1);
  }
  // The lost worker's closures went first, in their order, then the queued
  // one.
  REQUIRE(sc->run_count() == 7);
  CHECK(sc->runs[4] == std::make_pair(uint32_t{1}, on0[0]));
  CHECK(sc->runs[5] == std::make_pair(uint32_t{1}, on0[1]));
  auto counts = coord.counts();
  CHECK(counts.finished == 5);
  CHECK(counts.reexecuted == 2);
}

TEST_CASE_METHOD(deterministic,
                 "with two closures per worker, a worker that cannot reach a "
                 "server gets both back in the queue, sits out one back-off, "
                 "then holds two again, not more",
                 "[actors][dispatcher][fencing]") {
  std::unique_ptr<cluster_coordinator> owner;
  auto rvs = run_with_worker_cut_off(owner, 2, 20);
  auto& coord = *owner;
  // Worker 0 failed the two closures it held; worker 1 ran all 20.
  for (auto& rv : rvs)
    REQUIRE(rv.done());
  CHECK(coord.counts().finished == 20);
  CHECK(coord.counts().reexecuted == 2);
  CHECK(sc->runs_by(0) == 2);
  // Its link back, its back-off over: it takes its two places again.
  sc->fail_worker = -1;
  sc->fallback = action::hold;
  sched.trigger_timeouts();
  sched.run();
  for (int i = 0; i < 6; ++i)
    rvs.push_back(coord.schedule("train_step"));
  sched.run();
  CHECK(sc->runs_by(0) == 4);
  CHECK(sc->runs_by(1) == 22);
  CHECK(sc->run_count() == 26);
}
