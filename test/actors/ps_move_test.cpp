// Planned moves at the parameter server (actors/ps_move.hpp): a group handed
// over to its backup, the move's target, with pushes racing the view change,
// each applied exactly once; pushes applying while the copy is made; a
// handoff abandoned when the target is lost; a server answering "moved" for
// a group it dropped. Deterministic: CAF's testing scheduler runs one message
// at a time, so every interleaving here is the one written.

#include "caf/scoped_actor.hpp"

#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

optimizer_config sgd(float lr) {
  return optimizer_config{"sgd", lr, {}};
}

/// A push of closure `closure` of worker `worker` to group 0 at view `view`.
push_request push_at(uint64_t view, uint64_t closure, std::vector<float> grad,
                     uint32_t worker = 0) {
  auto req = make_push(0, closure, std::move(grad), worker);
  req.view = view;
  return req;
}

/// The source serves group 0 (a dense shard "w" at {1, 2}) at view 0; the
/// target holds the group's initial values, to be made its backup (the
/// first step of a move). A worker of its own sends pushes, so that the
/// test's own replies (the coordinator's) stay apart from the acks.
struct moving : deterministic {
  ps_actor source;
  ps_actor target;
  caf::scoped_actor worker{sys};

  explicit moving(consistency mode = consistency::async,
                  uint32_t workers = 1) {
    auto opts = options(sgd(0.5f), sgd(0.5f), mode, workers);
    opts.round_timeout = std::chrono::milliseconds{0}; // rounds wait
    source = spawn(opts);
    target = spawn(opts);
    create(source, dense_shard("w", 2, 1, {1, 2}));
    create(target, dense_shard("w", 2, 1, {0, 0}));
  }

  /// The target becomes the backup and gets the source's state.
  void attach() {
    REQUIRE(ask<bool>(target, configure_atom_v,
                      replica_config{0, 0, false, nullptr, false}));
    REQUIRE(ask<bool>(source, configure_atom_v, with_target()));
  }

  replica_config with_target() {
    return replica_config{0, 0, true,
                          caf::actor_cast<caf::strong_actor_ptr>(target),
                          true};
  }

  std::vector<float> values(const ps_actor& ps) {
    return as_vector(save(ps).values.values);
  }

  /// The worker's next ack, if one is queued (else 0: none).
  uint64_t worker_ack() {
    uint64_t clock = 0;
    worker->receive([&](uint64_t x) { clock = x; },
                    [&](caf::error& err) {
                      FAIL("expected an ack, got " << sys.render(err));
                    },
                    caf::after(std::chrono::seconds(0)) >> [] {});
    return clock;
  }

  /// The worker's next reply, which must be an error.
  caf::error worker_error() {
    caf::error result;
    worker->receive([&](uint64_t) { FAIL("expected an error, got an ack"); },
                    [&](caf::error& err) { result = std::move(err); },
                    caf::after(std::chrono::seconds(0)) >> [] {
                      FAIL("expected an error, got nothing");
                    });
    return result;
  }
};

/// The same under sync with two workers: a round closes when both pushed.
struct moving_sync : moving {
  moving_sync() : moving(consistency::sync, 2) {
    // nop
  }
};

} // namespace

TEST_CASE_METHOD(moving,
                 "a push racing the view change of a planned move is applied "
                 "exactly once",
                 "[actors][ps][move]") {
  CHECK(push(source, push_at(0, 1, {1, 1})) == 1);
  attach();
  CHECK(values(target) == std::vector<float>{0.5f, 1.5f});
  // Closure 2's push reaches the source before the handoff: applied there
  // and forwarded. Closure 3's comes after it: it waits at the source.
  worker->send(source, push_atom_v, push_at(0, 2, {1, 1}));
  self->send(source, handoff_atom_v, uint32_t{0}, uint64_t{0});
  worker->send(source, push_atom_v, push_at(0, 3, {1, 1}));
  run();
  // The handoff is answered once the target applied closure 2.
  CHECK(reply<uint64_t>() == 2);
  CHECK(worker_ack() == 2);
  CHECK(worker_ack() == 0); // closure 3 waits
  CHECK(values(target) == values(source));
  // The coordinator makes the target the primary (view 1), tells the
  // workers, and drops the group at the source: the push that waited there
  // is refused, as is every later request naming the group.
  REQUIRE(ask<bool>(target, configure_atom_v,
                    replica_config{0, 1, true, nullptr, false}));
  REQUIRE(ask<bool>(source, drop_atom_v, uint32_t{0}, uint64_t{1}));
  CHECK(worker_error() == errc::stale_view);
  CHECK(refusal<uint64_t>(source, push_atom_v, push_at(1, 4, {1, 1}))
        == errc::stale_view);
  CHECK(refusal<pull_reply>(source, pull_atom_v, dense_pull())
        == errc::stale_view);
  CHECK(refusal<ps_stats>(source, stats_atom_v, uint32_t{0})
        == errc::stale_view);
  // The worker sends both pushes of the group again at the new route (it
  // never saw the ack of closure 2): closure 2 is a duplicate there,
  // closure 3 applies once.
  CHECK(push(target, push_at(1, 2, {1, 1})) == 2);
  CHECK(push(target, push_at(1, 3, {1, 1})) == 3);
  auto s = stats(target);
  CHECK(s.pushes == 3);
  CHECK(s.duplicates == 1);
  CHECK(s.primary);
  CHECK(s.view == 1);
  CHECK(values(target) == std::vector<float>{-0.5f, 0.5f});
}

TEST_CASE_METHOD(moving,
                 "pushes keep applying while the target's copy is made, and "
                 "the handoff waits for the copy",
                 "[actors][ps][move]") {
  REQUIRE(ask<bool>(target, configure_atom_v,
                    replica_config{0, 0, false, nullptr, false}));
  // Configure (the install is sent), the handoff and a push arrive before
  // the target has installed anything.
  self->send(source, configure_atom_v, with_target());
  self->send(source, handoff_atom_v, uint32_t{0}, uint64_t{0});
  worker->send(source, push_atom_v, push_at(0, 1, {1, 1}));
  run();
  CHECK(reply<bool>());
  CHECK(reply<uint64_t>() == 1); // the handoff, after the copy and the push
  CHECK(worker_ack() == 1);      // applied, not held
  CHECK(values(target) == std::vector<float>{0.5f, 1.5f});
  CHECK(stats(target).pushes == 1);
}

TEST_CASE_METHOD(moving,
                 "a handoff is abandoned when the target is lost, and the "
                 "pushes it held apply at the source",
                 "[actors][ps][move]") {
  // Refused: no backup to hand over to, or another view.
  CHECK(refusal<uint64_t>(source, handoff_atom_v, uint32_t{0}, uint64_t{0})
        == errc::bad_message);
  attach();
  CHECK(refusal<uint64_t>(source, handoff_atom_v, uint32_t{0}, uint64_t{3})
        == errc::stale_view);
  CHECK(ask<uint64_t>(source, handoff_atom_v, uint32_t{0}, uint64_t{0}) == 0);
  worker->send(source, push_atom_v, push_at(0, 1, {1, 1}));
  run();
  CHECK(worker_ack() == 0); // held
  caf::anon_send_exit(target, caf::exit_reason::kill);
  run();
  CHECK(worker_ack() == 1); // applied at the source, alone
  CHECK(values(source) == std::vector<float>{0.5f, 1.5f});
  CHECK(push(source, push_at(0, 2, {1, 1})) == 2);
}

TEST_CASE_METHOD(moving,
                 "a group dropped at a server can be created there again",
                 "[actors][ps][move]") {
  REQUIRE(ask<bool>(source, drop_atom_v, uint32_t{0}, uint64_t{2}));
  CHECK(refusal<bool>(source, drop_atom_v, uint32_t{0}, uint64_t{2})
        == errc::stale_view);
  create(source, dense_shard("w", 2, 1, {3, 4}));
  CHECK(values(source) == std::vector<float>{3, 4});
  CHECK(push(source, push_at(0, 1, {2, 2})) == 1);
  // A drop at an older view than the group's is refused.
  REQUIRE(ask<bool>(target, configure_atom_v,
                    replica_config{0, 5, true, nullptr, false}));
  CHECK(refusal<bool>(target, drop_atom_v, uint32_t{0}, uint64_t{4})
        == errc::stale_view);
}

// Under sync a push joins the open round (its id is taken, its gradient
// summed) and is applied when the round closes. A copy made for the target
// while a round is open must not count that round as applied: its
// gradient is not in the values copied, and it reaches the target with the
// round's forward.

TEST_CASE_METHOD(moving_sync,
                 "under sync, a round open when the target's copy is made is "
                 "applied once there and its pushes are counted once",
                 "[actors][ps][move]") {
  // Worker 0's push opens round 1; the copy is made while it is open.
  worker->send(source, push_atom_v, push_at(0, 1, {1, 1}, 0));
  run();
  CHECK(worker_ack() == 0); // waits for the round
  attach();
  CHECK(values(target) == std::vector<float>{1, 2});
  // Worker 1's push closes the round: its mean applies at the source and
  // is forwarded to the target.
  worker->send(source, push_atom_v, push_at(0, 2, {3, 3}, 1));
  run();
  CHECK(worker_ack() == 1);
  CHECK(worker_ack() == 1);
  CHECK(values(source) == std::vector<float>{0, 1});
  CHECK(values(target) == values(source));
  CHECK(stats(source).pushes == 2);
  CHECK(stats(target).pushes == 2);
}

TEST_CASE_METHOD(moving_sync,
                 "under sync, a round closed by the handoff reaches the "
                 "target, and pushes of the next round racing the view change "
                 "apply there exactly once",
                 "[actors][ps][move]") {
  // Round 1 is open (worker 0's push) when the copy is made and when the
  // handoff comes: the handoff closes it with the one push it has.
  worker->send(source, push_atom_v, push_at(0, 1, {1, 1}, 0));
  run();
  attach();
  self->send(source, handoff_atom_v, uint32_t{0}, uint64_t{0});
  // Worker 1's push comes after the handoff: it waits at the source.
  worker->send(source, push_atom_v, push_at(0, 2, {3, 3}, 1));
  run();
  CHECK(reply<uint64_t>() == 1); // once the target applied round 1
  CHECK(worker_ack() == 1);      // closure 1, in round 1 alone
  CHECK(worker_ack() == 0);      // closure 2 waits
  CHECK(values(source) == std::vector<float>{0.5f, 1.5f});
  CHECK(values(target) == values(source));
  // The view change: closure 2 is refused at the source ("moved").
  REQUIRE(ask<bool>(target, configure_atom_v,
                    replica_config{0, 1, true, nullptr, false}));
  REQUIRE(ask<bool>(source, drop_atom_v, uint32_t{0}, uint64_t{1}));
  CHECK(worker_error() == errc::stale_view);
  // At the new route: closure 1 sent again is a duplicate; closure 2 and
  // worker 0's next push (closure 3) make round 2 there.
  CHECK(push(target, push_at(1, 1, {1, 1}, 0)) == 1);
  worker->send(target, push_atom_v, push_at(1, 2, {3, 3}, 1));
  worker->send(target, push_atom_v, push_at(1, 3, {1, 1}, 0));
  run();
  CHECK(worker_ack() == 2);
  CHECK(worker_ack() == 2);
  auto s = stats(target);
  CHECK(s.pushes == 3);
  CHECK(s.duplicates == 1);
  CHECK(s.clock == 2);
  CHECK(values(target) == std::vector<float>{-0.5f, 0.5f});
}
