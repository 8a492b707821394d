// The parameter server's dense region: clocks, staleness, duplicates,
// consistency modes, checkpoints, errors. Table shards: ps_table_test.cpp.

#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

optimizer_config sgd(float lr) {
  return optimizer_config{"sgd", lr, {}};
}

/// A sync server of 2 workers (SGD, lr 1) holding "w" = (0, 0), with worker
/// 0's push of closure 1, gradient (2, 4), waiting in round 1.
struct sync_round : deterministic {
  ps_actor ps;

  sync_round() {
    ps = spawn(options(sgd(1.0f), sgd(1.0f), consistency::sync, 2));
    create(ps, dense_shard("w", 1, 2, {0, 0}));
    self->send(ps, push_atom_v, make_push(0, 1, {2, 4}, 0));
    sched->run();
  }
};

} // namespace

TEST_CASE_METHOD(deterministic,
                 "a parameter server appends shards and pulls them in order",
                 "[actors][ps]") {
  auto ps = spawn(options(sgd(0.5f), sgd(0.5f)));
  CHECK(refusal<pull_reply>(ps, pull_atom_v, dense_pull()) == errc::no_shards);
  CHECK(ask<uint64_t>(ps, create_atom_v, dense_shard("a", 2, 2, {1, 2, 3, 4}))
        == 0);
  CHECK(ask<uint64_t>(ps, create_atom_v, dense_shard("b", 1, 1, {5})) == 4);
  auto r = pull(ps, dense_pull());
  CHECK(r.clock == 0);
  CHECK(as_vector(r.values.values) == std::vector<float>{1, 2, 3, 4, 5});
  CHECK(r.tables.empty());
  auto s = stats(ps);
  CHECK(s.shards == 2);
  CHECK(s.floats == 5);
}

TEST_CASE_METHOD(deterministic,
                 "a push applies SGD, advances the clock and records staleness",
                 "[actors][ps]") {
  auto ps = spawn(options(sgd(0.5f), sgd(0.5f)));
  create(ps, dense_shard("w", 1, 3, {1, 1, 1}));
  // Two pushes computed on clock 0: the second is one update stale.
  CHECK(push(ps, make_push(0, 1, {2, 0, -2})) == 1);
  CHECK(push(ps, make_push(0, 2, {0, 2, 0})) == 2);
  auto r = pull(ps, dense_pull());
  CHECK(r.clock == 2);
  // 1 - 0.5*2 = 0, 1 - 0.5*2 = 0, 1 + 0.5*2 = 2
  CHECK(as_vector(r.values.values) == std::vector<float>{0, 0, 2});
  auto s = stats(ps);
  CHECK(s.clock == 2);
  CHECK(s.pushes == 2);
  CHECK(s.staleness_sum == 1);
  CHECK(s.staleness_max == 1);
  CHECK(s.duplicates == 0);
  CHECK(s.floats == 3);
}

TEST_CASE_METHOD(sync_round,
                 "under sync a worker's next push while its last one is still "
                 "in the round closes the round with the pushes it has",
                 "[actors][ps]") {
  // (A worker goes on when its closure failed at another, lost server while
  // its push here still waited for the round.)
  CHECK(nothing_received());
  self->send(ps, push_atom_v, make_push(0, 2, {1, 1}, 0));
  sched->run();
  // Round 1 closed with worker 0's first push alone (its mean is itself).
  CHECK(reply<uint64_t>() == 1);
  CHECK(nothing_received());
  CHECK(as_vector(pull(ps, dense_pull()).values.values)
        == std::vector<float>{-2, -4});
  // Round 2: worker 0's second push and worker 1's.
  self->send(ps, push_atom_v, make_push(1, 3, {3, 3}, 1));
  sched->run();
  CHECK(reply<uint64_t>() == 2);
  CHECK(reply<uint64_t>() == 2);
  CHECK(as_vector(pull(ps, dense_pull()).values.values)
        == std::vector<float>{-4, -6});
  CHECK(stats(ps).pushes == 3);
}

TEST_CASE_METHOD(deterministic,
                 "with a staleness-aware rule, a push's step is divided by "
                 "its staleness",
                 "[actors][ps]") {
  auto rule = sgd(0.5f);
  rule.staleness_aware = true;
  auto ps = spawn(options(rule, sgd(0.5f)));
  create(ps, dense_shard("w", 1, 2, {1, 1}));
  // Staleness 0, 1 and 0: a whole step each (1 / tau only from tau = 2).
  CHECK(push(ps, make_push(0, 1, {2, 0})) == 1);
  CHECK(push(ps, make_push(0, 2, {0, 2})) == 2);
  CHECK(push(ps, make_push(2, 3, {0, 2})) == 3);
  auto r = pull(ps, dense_pull());
  // 1 - 0.5*2 = 0; 1 - 0.5*2 - 0.5*2 = -1
  CHECK(as_vector(r.values.values) == std::vector<float>{0, -1});
  // Read at clock 0, arriving at clock 3: a third of the step.
  CHECK(push(ps, make_push(0, 4, {6, 0})) == 4);
  r = pull(ps, dense_pull());
  CHECK(r.values.values.size() == 2);
  CHECK(as_vector(r.values.values)[0] == Approx(0 - 0.5 * 6 / 3));
  CHECK(as_vector(r.values.values)[1] == -1);
}

TEST_CASE_METHOD(deterministic,
                 "a push or shard of the wrong size is refused and changes "
                 "nothing",
                 "[actors][ps]") {
  auto ps = spawn(options(sgd(0.01f), sgd(0.01f)));
  create(ps, dense_shard("w", 2, 1, {1, 2}));
  CHECK(refusal<uint64_t>(ps, push_atom_v, make_push(0, 1, {1, 1, 1}))
        == errc::shape_mismatch);
  CHECK(refusal<uint64_t>(ps, create_atom_v, dense_shard("v", 2, 2, {1, 2, 3}))
        == errc::shape_mismatch);
  auto r = pull(ps, dense_pull());
  CHECK(r.clock == 0);
  CHECK(as_vector(r.values.values) == std::vector<float>{1, 2});
  auto s = stats(ps);
  CHECK(s.shards == 1);
  CHECK(s.pushes == 0);
  // The refused push did not count as applied: its closure id is still free.
  CHECK(push(ps, make_push(0, 1, {1, 1})) == 1);
}

TEST_CASE_METHOD(deterministic, "a duplicate push is applied once",
                 "[actors][ps]") {
  auto ps = spawn(options(sgd(1.0f), sgd(1.0f)));
  create(ps, dense_shard("w", 1, 1, {10}));
  for (int i = 0; i < 3; ++i)
    CHECK(push(ps, make_push(0, 7, {1}, 3)) == 1);
  // The same closure re-run on another worker (its first worker was lost)
  // is the same update: discarded too.
  CHECK(push(ps, make_push(1, 7, {1}, 4)) == 1);
  // Another closure is another update.
  CHECK(push(ps, make_push(1, 8, {1}, 4)) == 2);
  CHECK(pull(ps, dense_pull()).values.values[0] == 8.0f);
  auto s = stats(ps);
  CHECK(s.duplicates == 3);
  CHECK(s.pushes == 2);
}

TEST_CASE_METHOD(sync_round,
                 "under sync a server applies the mean of one push per worker "
                 "and acknowledges the round together",
                 "[actors][ps]") {
  // No ack yet: worker 1 has not pushed for this round.
  CHECK(nothing_received());
  // The same push again (re-sent after a failover) is not a second push:
  // a duplicate, answered at once and applied once (with the round).
  CHECK(push(ps, make_push(0, 1, {2, 4}, 0)) == 0);
  // So is a push of a worker the server was not told about.
  CHECK(refusal<uint64_t>(ps, push_atom_v, make_push(0, 4, {1, 1}, 2))
        == errc::unknown_worker);
  self->send(ps, push_atom_v, make_push(0, 3, {0, 2}, 1));
  sched->run();
  // Both pushes are acknowledged now, with the round's clock.
  CHECK(reply<uint64_t>() == 1);
  CHECK(reply<uint64_t>() == 1);
  CHECK(stats(ps).duplicates == 1);
  // mean gradient (1, 3), one SGD step with lr 1
  auto r = pull(ps, dense_pull());
  CHECK(r.clock == 1);
  CHECK(as_vector(r.values.values) == std::vector<float>{-1, -3});
  // The next round starts empty: worker 0 may push again.
  self->send(ps, push_atom_v, make_push(1, 5, {2, 2}, 0));
  sched->run();
  CHECK(nothing_received());
  self->send(ps, push_atom_v, make_push(1, 6, {0, 0}, 1));
  sched->run();
  CHECK(reply<uint64_t>() == 2);
  CHECK(reply<uint64_t>() == 2);
  CHECK(as_vector(pull(ps, dense_pull()).values.values)
        == std::vector<float>{-2, -4});
}

TEST_CASE_METHOD(deterministic,
                 "under ssp a worker too far ahead waits at its pull until "
                 "the slowest worker pushes",
                 "[actors][ps]") {
  auto ps = spawn(options(sgd(0.01f), sgd(0.01f), consistency::ssp, 2, 1));
  create(ps, dense_shard("w", 1, 1, {0}));
  // Worker 0 pushes twice; worker 1 never: worker 0 is 2 > s = 1 ahead.
  for (uint64_t c = 1; c <= 2; ++c)
    push(ps, make_push(0, c, {1}, 0));
  // The slow worker reads at once.
  CHECK(pull(ps, dense_pull(1)).clock == 2);
  // The fast one is held.
  self->send(ps, pull_atom_v, dense_pull(0));
  sched->run();
  CHECK(nothing_received());
  // The coordinator is never held back.
  CHECK(pull(ps, dense_pull(no_worker)).clock == 2);
  self->send(ps, push_atom_v, make_push(2, 3, {1}, 1));
  sched->run();
  // The push's ack and the released pull both arrive.
  bool got_ack = false;
  bool got_pull = false;
  for (int i = 0; i < 2; ++i)
    self->receive([&](uint64_t clock) { got_ack = clock == 3; },
                  [&](pull_reply& r) { got_pull = r.clock == 3; },
                  [](caf::error&) { FAIL("request failed"); },
                  caf::after(std::chrono::seconds(0)) >> [] {
                    FAIL("expected the ack and the released pull");
                  });
  CHECK(got_ack);
  CHECK(got_pull);
  CHECK(refusal<pull_reply>(ps, pull_atom_v, dense_pull(7))
        == errc::unknown_worker);
  CHECK(refusal<uint64_t>(ps, push_atom_v, make_push(3, 4, {1}, 7))
        == errc::unknown_worker);
}

TEST_CASE_METHOD(deterministic,
                 "under ssp a pull held longer than the round timeout is "
                 "answered past the bound",
                 "[actors][ps]") {
  using namespace std::chrono_literals;
  auto opts = options(sgd(0.01f), sgd(0.01f), consistency::ssp, 2, 1);
  opts.round_timeout = 1000ms;
  auto ps = spawn(opts);
  create(ps, dense_shard("w", 1, 1, {0}));
  for (uint64_t c = 1; c <= 2; ++c)
    push(ps, make_push(0, c, {1}, 0));
  self->send(ps, pull_atom_v, dense_pull(0));
  sched->run();
  CHECK(nothing_received());
  // Worker 1 never pushes (it has no closures): after 1 s the pull goes
  // through.
  CHECK(sched->advance_time(999ms) == 0);
  CHECK(nothing_received());
  sched->advance_time(1ms);
  sched->run();
  CHECK(reply<pull_reply>().clock == 2);
}

TEST_CASE_METHOD(deterministic,
                 "a saved parameter server restores into a fresh one",
                 "[actors][ps][checkpoint]") {
  optimizer_config adam{"adam", 0.1f, {}};
  auto a = spawn(options(adam, sgd(0.1f)));
  auto b = spawn(options(adam, sgd(0.1f)));
  create(a, dense_shard("w", 2, 1, {1, 2}));
  create(b, dense_shard("w", 2, 1, {0, 0}));
  for (uint64_t i = 1; i <= 3; ++i)
    push(a, make_push(0, i, {0.5f, -1.0f}));
  auto snap = save(a);
  CHECK(snap.clock == 3);
  CHECK(snap.optimizer_steps == 3);
  REQUIRE(snap.slots.size() == 2); // Adam's m and v
  CHECK(snap.tables.empty());
  // Snapshots of the wrong size are refused and change nothing.
  auto wrong = snap;
  wrong.values.values.push_back(0);
  CHECK(refusal<uint64_t>(b, restore_atom_v, uint32_t{0}, wrong) == errc::shape_mismatch);
  wrong = snap;
  wrong.slots.pop_back();
  CHECK(refusal<uint64_t>(b, restore_atom_v, uint32_t{0}, wrong) == errc::shape_mismatch);
  wrong = snap;
  wrong.slots[1].values.pop_back();
  CHECK(refusal<uint64_t>(b, restore_atom_v, uint32_t{0}, wrong) == errc::shape_mismatch);
  auto untouched = pull(b, dense_pull());
  CHECK(untouched.clock == 0);
  CHECK(as_vector(untouched.values.values) == std::vector<float>{0, 0});
  CHECK(ask<uint64_t>(b, restore_atom_v, uint32_t{0}, snap) == 3);
  // From here on both servers must compute exactly the same.
  for (auto& ps : {a, b})
    CHECK(push(ps, make_push(3, 9, {0.25f, 0.25f})) == 4);
  auto va = as_vector(pull(a, dense_pull()).values.values);
  auto vb = as_vector(pull(b, dense_pull()).values.values);
  CHECK(va == vb);
  CHECK(va != std::vector<float>{1, 2});
  CHECK(save(b).optimizer_steps == 4);
}
