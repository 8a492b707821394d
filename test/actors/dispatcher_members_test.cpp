// Workers that join a running job and leave it gracefully, and dynamic data
// shards: the dispatcher with fake workers (test/actors/dispatcher_fixture
// .hpp) under the deterministic scheduler, closures carrying the ranges of
// a dataset_plan. Property: whatever workers join, leave or are lost, and
// in whatever order closures finish, each epoch's examples are trained
// exactly once (every range finishes once; a lost worker's ranges run
// again elsewhere), a leaving worker gets no new closure and nothing it
// finished runs again.

#include <random>

#include "cluster/services/dataset_plan.hpp"
#include "test/actors/dispatcher_fixture.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace actorps::test::dispatch;
using namespace std::chrono_literals;

namespace {

/// The examples of an epoch the finished closures trained, as sorted
/// [begin, end) ranges; `ok` when they tile [0, rows) exactly once.
bool tiles_once(std::vector<std::pair<uint64_t, uint64_t>> ranges,
                uint64_t rows) {
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (auto& [b, e] : ranges) {
    if (b != at || e <= b)
      return false;
    at = e;
  }
  return at == rows;
}

} // namespace

TEST_CASE_METHOD(deterministic,
                 "a worker that joins takes closures and one that leaves "
                 "finishes its own and gets no more",
                 "[actors][dispatcher][elastic]") {
  sc->fallback = action::hold;
  auto dispatcher = add_dispatcher(add_workers(1), 60s);
  cluster_coordinator coord{sys, dispatcher, 64};
  auto a = coord.schedule("train_step");
  auto b = coord.schedule("train_step");
  sched.run();
  CHECK(sc->runs_by(0) == 1); // one place: b waits
  auto joined = add_worker(1);
  CHECK(ask<uint32_t>(dispatcher, enlist_atom_v, uint32_t{1},
                      worker_actor{joined})
        == 2);
  CHECK(sc->runs_by(1) == 1); // b went to the new worker
  // A second join of an index in service is refused.
  CHECK(refusal<uint32_t>(dispatcher, enlist_atom_v, uint32_t{1},
                          worker_actor{joined})
        == errc::shape_mismatch);
  // Worker 0 leaves while it holds a: no reply until a is done.
  self->send(dispatcher, leave_atom_v, uint32_t{0});
  sched.run();
  auto c = coord.schedule("train_step");
  sched.run();
  CHECK(sc->runs_by(0) == 1); // c is not sent to the leaving worker
  self->send(fakes[0], caf::put_atom_v, a.closure_id(), caf::error{});
  sched.run();
  CHECK(reply<uint32_t>() == 1); // it left after finishing a
  CHECK(a.done());
  CHECK_FALSE(a.error());
  // b and c finish on worker 1; nothing ran twice.
  self->send(fakes[1], caf::put_atom_v, b.closure_id(), caf::error{});
  sched.run();
  self->send(fakes[1], caf::put_atom_v, c.closure_id(), caf::error{});
  sched.run();
  CHECK(coord.join_for(0ms));
  CHECK(coord.counts().reexecuted == 0);
  CHECK(sc->runs_by(1) == 2);
  // A worker that left cannot leave again; the one left can.
  CHECK(refusal<uint32_t>(dispatcher, leave_atom_v, uint32_t{0})
        == errc::no_workers);
  CHECK(ask<uint32_t>(dispatcher, leave_atom_v, uint32_t{1}) == 0);
}

TEST_CASE_METHOD(deterministic,
                 "every example is trained once per epoch under random "
                 "joins, leaves and losses of workers",
                 "[actors][dispatcher][elastic]") {
  sc->fallback = action::hold;
  for (uint32_t seed = 1; seed <= 25; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng{seed};
    auto pick = [&](uint64_t n) {
      return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng);
    };
    auto rows = 200 + pick(800);
    auto batch = 5 + pick(60);
    dataset_plan plan{rows, batch};
    fakes.clear();
    auto first = static_cast<uint32_t>(1 + pick(3));
    auto dispatcher = add_dispatcher(add_workers(first), 60s);
    cluster_coordinator coord{sys, dispatcher, 4096};
    std::vector<bool> alive(first, true), leaving(first, false);
    // Runs of each worker when its leave was asked: none may come after.
    std::map<uint32_t, size_t> runs_at_leave;
    uint64_t lost = 0, joins = 0, leaves = 0;
    auto in_service = [&] {
      size_t n = 0;
      for (size_t w = 0; w < alive.size(); ++w)
        n += alive[w] && !leaving[w];
      return n;
    };
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      std::map<uint64_t, data_range> range_of; // by closure id
      std::map<uint64_t, remote_value> value_of_id;
      std::vector<remote_value> rvs;
      for (uint64_t k = 0; k < plan.closures(epoch); ++k) {
        auto r = plan.range(epoch, k);
        rvs.push_back(coord.schedule("train_step", r));
        range_of[rvs.back().closure_id()] = r;
        value_of_id[rvs.back().closure_id()] = rvs.back();
      }
      sched.run();
      for (int guard = 0; !coord.join_for(0ms); ++guard) {
        REQUIRE(guard < 100000);
        auto event = pick(20);
        if (event == 0 && in_service() > 1) { // a worker is lost
          auto w = pick(alive.size());
          if (alive[w] && !leaving[w]) {
            alive[w] = false;
            ++lost;
            self->send_exit(fakes[w], caf::exit_reason::kill);
          }
        } else if (event == 1 && alive.size() < 12) { // one joins
          auto w = static_cast<uint32_t>(alive.size());
          add_worker(w);
          alive.push_back(true);
          leaving.push_back(false);
          ++joins;
          self->send(dispatcher, enlist_atom_v, w, worker_actor{fakes[w]});
        } else if (event == 2 && in_service() > 1) { // one leaves
          auto w = static_cast<uint32_t>(pick(alive.size()));
          if (alive[w] && !leaving[w]) {
            leaving[w] = true;
            ++leaves;
            runs_at_leave[w] = sc->runs_by(w);
            caf::anon_send(dispatcher, leave_atom_v, w);
          }
        } else { // a held closure finishes
          std::vector<std::pair<uint32_t, uint64_t>> held;
          {
            std::lock_guard<std::mutex> g{sc->mtx};
            for (auto& [w, id] : sc->runs)
              if (alive[w] && value_of_id.count(id) > 0
                  && !value_of_id[id].done())
                held.emplace_back(w, id);
          }
          if (!held.empty()) {
            auto [w, id] = held[pick(held.size())];
            self->send(fakes[w], caf::put_atom_v, id, caf::error{});
          }
        }
        sched.run();
        // Drain the replies of joins (the test keeps no count of them).
        for (bool more = true; more;)
          self->receive([](uint32_t) {}, [](caf::error&) {},
                        caf::after(0ms) >> [&] { more = false; });
      }
      std::vector<std::pair<uint64_t, uint64_t>> trained;
      for (auto& rv : rvs) {
        REQUIRE_FALSE(rv.error());
        auto r = rv.fetch();
        auto& want = range_of.at(rv.closure_id());
        CHECK(r.data_epoch == epoch);
        CHECK(r.data_offset == want.end);
        CHECK(r.samples == want.rows());
        trained.emplace_back(want.end - r.samples, r.data_offset);
      }
      CHECK(tiles_once(trained, rows));
    }
    // A leaving worker got no closure after its leave was asked beyond
    // those it held (which it had been sent before).
    for (auto& [w, runs] : runs_at_leave)
      CHECK(sc->runs_by(w) == runs);
    auto counts = coord.counts();
    CHECK(counts.finished == 2 * plan.closures(0));
    CHECK(counts.failed == 0);
    // Only closures of lost workers ran again.
    if (lost == 0)
      CHECK(counts.reexecuted == 0);
    INFO("joins " << joins << ", leaves " << leaves << ", lost " << lost);
    caf::anon_send_exit(dispatcher, caf::exit_reason::user_shutdown);
    sched.run();
    std::lock_guard<std::mutex> g{sc->mtx};
    sc->runs.clear();
  }
}
