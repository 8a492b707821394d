// Replica groups on the parameter server: chain replication from a
// primary to its backup, views that fence a deposed primary, the install of a
// new backup, exactly-once across a failover, and the pruning of applied ids.
// Deterministic: CAF's testing scheduler runs one message at a time where the
// order matters.

#include <memory>

#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

optimizer_config sgd(float lr) {
  return optimizer_config{"sgd", lr, {}};
}

/// A push of closure `closure` to group 0 at view `view`.
push_request push_at(uint64_t view, uint64_t closure, std::vector<float> grad,
                     uint64_t read_clock = 0) {
  auto req = make_push(read_clock, closure, std::move(grad));
  req.view = view;
  return req;
}

pull_request pull_at(uint64_t view) {
  auto req = dense_pull();
  req.view = view;
  return req;
}

replica_config as_primary(uint64_t view, const ps_actor& backup = {}) {
  return replica_config{0, view, true,
                        caf::actor_cast<caf::strong_actor_ptr>(backup), false};
}

replica_config as_backup(uint64_t view) {
  return replica_config{0, view, false, nullptr, false};
}

/// The forwards a silent backup received and never answered.
struct swallowed {
  std::vector<replicate_request> requests;
  std::vector<caf::typed_response_promise<uint64_t>> promises;
};

/// A backup that takes every forward and never answers (a hung process);
/// everything else is refused.
ps_actor::behavior_type silent_backup(ps_actor::pointer self,
                                      std::shared_ptr<swallowed> log) {
  auto no = [] { return caf::make_error(errc::bad_message, "silent backup"); };
  return {
    [=](create_atom, create_shard&) -> caf::result<uint64_t> { return no(); },
    [=](pull_atom, pull_request&) -> caf::result<pull_reply> { return no(); },
    [=](push_atom, push_request&) -> caf::result<uint64_t> { return no(); },
    [=](replicate_atom, replicate_request& req) -> caf::result<uint64_t> {
      log->requests.push_back(req);
      auto rp = self->make_response_promise<uint64_t>();
      log->promises.push_back(rp);
      return rp;
    },
    [=](configure_atom, replica_config&) -> caf::result<bool> { return no(); },
    [=](install_atom, uint32_t, uint64_t,
        ps_snapshot&) -> caf::result<uint64_t> { return no(); },
    [=](stats_atom, uint32_t) -> caf::result<ps_stats> { return no(); },
    [=](save_atom, uint32_t) -> caf::result<ps_snapshot> { return no(); },
    [=](save_atom, uint32_t, uint64_t,
        uint64_t) -> caf::result<ps_snapshot> { return no(); },
    [=](restore_atom, uint32_t, ps_snapshot&) -> caf::result<uint64_t> {
      return no();
    },
    [=](prune_atom, uint64_t, uint64_t) {},
    [=](ping_atom) { return uint32_t{99}; },
    // Not a flush here: the test's way to answer swallowed forward `i` with
    // `clock` from inside the actor (a promise cannot be delivered from the
    // test's thread).
    [=](caf::flush_atom, uint32_t i, uint64_t clock) {
      if (i < log->promises.size())
        log->promises[i].deliver(clock);
    },
    [=](handoff_atom, uint32_t, uint64_t) -> caf::result<uint64_t> {
      return no();
    },
    [=](drop_atom, uint32_t, uint64_t) -> caf::result<bool> { return no(); },
    [=](caf::timeout_atom, uint32_t, uint64_t) {},
  };
}

/// Two servers holding group 0 (a dense shard "w" of 2 floats), the
/// primary's at {1, 2}, the other's at `other`; neither configured yet.
struct two_copies : deterministic {
  ps_actor primary;
  ps_actor backup;

  explicit two_copies(std::vector<float> other) {
    primary = spawn(options(sgd(0.5f), sgd(0.5f)));
    backup = spawn(options(sgd(0.5f), sgd(0.5f)));
    create(primary, dense_shard("w", 2, 1, {1, 2}));
    create(backup, dense_shard("w", 2, 1, std::move(other)));
  }
};

/// `primary` serves group 0 at view 1 and forwards to `backup`.
struct chain : two_copies {
  chain() : two_copies({1, 2}) {
    REQUIRE(ask<bool>(backup, configure_atom_v, as_backup(1)));
    REQUIRE(ask<bool>(primary, configure_atom_v, as_primary(1, backup)));
  }

  std::vector<float> values(const ps_actor& ps) {
    return as_vector(save(ps).values.values);
  }
};

} // namespace

TEST_CASE_METHOD(chain,
                 "a primary acknowledges a push only after its backup applied "
                 "it, and both copies hold the same state",
                 "[actors][ps][replication]") {
  self->send(primary, push_atom_v, push_at(1, 1, {1, -1}));
  // The primary applies the push and forwards it; its ack waits.
  sched->run_once();
  CHECK(nothing_received());
  sched->run();
  CHECK(reply<uint64_t>() == 1);
  CHECK(values(primary) == std::vector<float>{0.5f, 2.5f});
  CHECK(values(backup) == values(primary));
  auto b = stats(backup);
  CHECK(b.clock == 1);
  CHECK(b.pushes == 1);
  CHECK_FALSE(b.primary);
  CHECK(b.view == 1);
  // A backup serves no one but its primary.
  CHECK(refusal<pull_reply>(backup, pull_atom_v, pull_at(1))
        == errc::stale_view);
  CHECK(refusal<uint64_t>(backup, push_atom_v, push_at(1, 2, {1, 1}))
        == errc::stale_view);
  // Requests at an older view are refused by the primary too.
  CHECK(refusal<pull_reply>(primary, pull_atom_v, pull_at(0))
        == errc::stale_view);
}

TEST_CASE_METHOD(chain,
                 "a deposed primary is fenced: the promoted backup refuses its "
                 "forward, the push fails and the primary stops serving",
                 "[actors][ps][replication]") {
  // The coordinator promoted the backup (view 2); the old primary does not
  // know yet and takes one more push.
  REQUIRE(ask<bool>(backup, configure_atom_v, as_primary(2)));
  CHECK(refusal<uint64_t>(primary, push_atom_v, push_at(1, 1, {1, 1}))
        == errc::stale_view);
  // It no longer serves the group at any view it knows.
  CHECK(refusal<pull_reply>(primary, pull_atom_v, pull_at(1))
        == errc::stale_view);
  // The new primary never saw the update: the closure runs again there and
  // is applied once.
  CHECK(values(backup) == std::vector<float>{1, 2});
  CHECK(push(backup, push_at(2, 1, {1, 1})) == 1);
  CHECK(values(backup) == std::vector<float>{0.5f, 1.5f});
  // An older view cannot take the group back.
  CHECK(refusal<bool>(backup, configure_atom_v, as_primary(1))
        == errc::stale_view);
}

TEST_CASE_METHOD(chain,
                 "an update the backup applied before the primary died is not "
                 "applied again when its closure is retried after failover",
                 "[actors][ps][replication]") {
  // The primary applied closure 7 and forwarded it; the backup applied it;
  // the primary died before the worker got its ack.
  self->send(primary, push_atom_v, push_at(1, 7, {2, 2}));
  sched->run();
  REQUIRE(reply<uint64_t>() == 1);
  caf::anon_send_exit(primary, caf::exit_reason::kill);
  sched->run();
  REQUIRE(ask<bool>(backup, configure_atom_v, as_primary(2)));
  // The worker retries closure 7 at the new primary: a duplicate.
  CHECK(push(backup, push_at(2, 7, {2, 2})) == 1);
  auto s = stats(backup);
  CHECK(s.pushes == 1);
  CHECK(s.duplicates == 1);
  CHECK(values(backup) == std::vector<float>{0, 1});
}

TEST_CASE_METHOD(deterministic,
                 "when the backup is lost, the pending and later pushes are "
                 "acknowledged by the primary alone",
                 "[actors][ps][replication]") {
  auto log = std::make_shared<swallowed>();
  auto backup = sys.spawn(silent_backup, log);
  sched->run();
  auto primary = spawn(options(sgd(0.5f), sgd(0.5f)));
  create(primary, dense_shard("w", 2, 1, {1, 2}));
  REQUIRE(ask<bool>(primary, configure_atom_v, as_primary(1, backup)));
  self->send(primary, push_atom_v, push_at(1, 1, {1, 1}));
  sched->run();
  REQUIRE(log->requests.size() == 1);
  CHECK(log->requests[0].clock == 1);
  CHECK(log->requests[0].ids.size() == 1);
  CHECK(nothing_received()); // the backup has not answered
  // A retry of the same closure while its first copy is on the way to the
  // backup waits for that forward too (no ack before the backup has it).
  self->send(primary, push_atom_v, push_at(1, 1, {1, 1}));
  sched->run();
  CHECK(nothing_received());
  caf::anon_send_exit(backup, caf::exit_reason::kill);
  sched->run();
  CHECK(reply<uint64_t>() == 1);
  CHECK(reply<uint64_t>() == 1);
  CHECK(stats(primary).duplicates == 1);
  // Alone now: a push is acknowledged at once.
  CHECK(push(primary, push_at(1, 2, {1, 1})) == 2);
  CHECK(log->requests.size() == 1);
}

namespace {

/// A primary serving group 0 alone and a server with initial values only,
/// to be made its backup.
struct new_backup : two_copies {
  new_backup() : two_copies({0, 0}) {
    // nop
  }

  /// The backup joins at view 1 with a copy of the primary's state.
  void install() {
    REQUIRE(ask<bool>(backup, configure_atom_v, as_backup(1)));
    auto cfg = as_primary(1, backup);
    cfg.install = true;
    REQUIRE(ask<bool>(primary, configure_atom_v, cfg));
  }
};

} // namespace

TEST_CASE_METHOD(new_backup,
                 "a new backup gets its primary's state, applied ids included, "
                 "then every later update",
                 "[actors][ps][replication]") {
  CHECK(push(primary, push_at(0, 1, {1, 1})) == 1);
  CHECK(push(primary, push_at(0, 2, {1, 1})) == 2);
  install();
  CHECK(push(primary, push_at(1, 3, {1, 1}, 2)) == 3);
  auto p = save(primary);
  auto b = save(backup);
  CHECK(as_vector(b.values.values) == as_vector(p.values.values));
  CHECK(as_vector(b.values.values) == std::vector<float>{-0.5f, 0.5f});
  CHECK(b.clock == 3);
  // Promoted, it knows closures 1 to 3 were applied.
  REQUIRE(ask<bool>(backup, configure_atom_v, as_primary(2)));
  for (uint64_t id : {1, 2, 3})
    CHECK(push(backup, push_at(2, id, {1, 1})) == 3);
  CHECK(stats(backup).duplicates == 3);
  CHECK(stats(backup).pushes == 3);
  // An install is refused by a primary and at another view.
  auto snap = save(primary);
  CHECK(refusal<uint64_t>(backup, install_atom_v, uint32_t{0}, uint64_t{2},
                          snap)
        == errc::stale_view);
  CHECK(refusal<uint64_t>(backup, install_atom_v, uint32_t{7}, uint64_t{2},
                          snap)
        == errc::unknown_group);
}

TEST_CASE_METHOD(deterministic,
                 "pruned closure ids still count as applied, within the "
                 "coordinator's own id range",
                 "[actors][ps][replication]") {
  auto ps = spawn(options(sgd(0.5f), sgd(0.5f)));
  create(ps, dense_shard("w", 1, 1, {0}));
  for (uint64_t id = 100; id < 105; ++id)
    push(ps, push_at(0, id, {1}));
  // Closures [100, 104) finished: their ids are forgotten, yet a late copy
  // of one is still a duplicate.
  caf::anon_send(ps, prune_atom_v, uint64_t{100}, uint64_t{104});
  sched->run();
  CHECK(push(ps, push_at(0, 101, {1})) == 5);
  CHECK(push(ps, push_at(0, 104, {1})) == 5); // kept: not pruned
  CHECK(stats(ps).duplicates == 2);
  // A restarted coordinator's ids start elsewhere (here below): they are
  // new updates, not duplicates.
  caf::anon_send(ps, prune_atom_v, uint64_t{10}, uint64_t{12});
  sched->run();
  CHECK(push(ps, push_at(0, 12, {1})) == 6);
  // Ids in the new range below its watermark are finished closures.
  CHECK(push(ps, push_at(0, 11, {1})) == 6);
  // The old range no longer counts (its closures belong to a coordinator
  // that is gone).
  CHECK(push(ps, push_at(0, 101, {1})) == 7);
}

TEST_CASE_METHOD(deterministic,
                 "async replication: a push is acknowledged before the backup "
                 "applied it, and waits only while the backup is more than "
                 "the lag behind",
                 "[actors][ps][replication]") {
  auto log = std::make_shared<swallowed>();
  auto backup = sys.spawn(silent_backup, log);
  sched->run();
  auto opts = options(sgd(0.5f), sgd(0.5f));
  opts.replication_lag = 2;
  auto primary = spawn(opts);
  create(primary, dense_shard("w", 2, 1, {1, 2}));
  REQUIRE(ask<bool>(primary, configure_atom_v, as_primary(1, backup)));
  // Two forwards may wait: their pushes are acknowledged at once.
  CHECK(push(primary, push_at(1, 1, {1, 1})) == 1);
  CHECK(push(primary, push_at(1, 2, {1, 1})) == 2);
  REQUIRE(log->requests.size() == 2);
  // A third would put the backup 3 behind: it is applied and forwarded, and
  // acknowledged once the backup has the first forward.
  self->send(primary, push_atom_v, push_at(1, 3, {1, 1}));
  sched->run();
  REQUIRE(log->requests.size() == 3);
  CHECK(nothing_received());
  CHECK(stats(primary).clock == 3);
  // The backup answers the second forward first: not the one the push needs.
  self->send(backup, caf::flush_atom_v, uint32_t{1}, uint64_t{2});
  sched->run();
  CHECK(nothing_received());
  self->send(backup, caf::flush_atom_v, uint32_t{0}, uint64_t{1});
  sched->run();
  CHECK(reply<uint64_t>() == 1);
  // The backlog is 1 (the third forward): the next push goes through.
  CHECK(push(primary, push_at(1, 4, {1, 1})) == 4);
  CHECK(log->requests.size() == 4);
  // The swallowed promises hold the primary: let go of them and the backup.
  log->promises.clear();
  caf::anon_send_exit(backup, caf::exit_reason::kill);
  sched->run();
}

namespace {

/// Run [from, from + grad.size()) of closure `closure`'s push as a piece.
push_request piece_at(uint64_t view, uint64_t closure, uint64_t from,
                      std::vector<float> grad) {
  auto req = push_at(view, closure, std::move(grad));
  req.piece = true;
  req.offset = from;
  return req;
}

} // namespace

TEST_CASE_METHOD(chain,
                 "a backup applies the pieces of a push as its primary did, "
                 "after failover the pieces sent again are not applied twice",
                 "[actors][ps][replication][pieces]") {
  // Closure 1 in two pieces (layer pushes): the second run first.
  CHECK(push(primary, piece_at(1, 1, 1, {2})) == 0);
  CHECK(values(backup) == std::vector<float>{1, 1});
  CHECK(stats(backup).clock == 0);
  CHECK(push(primary, piece_at(1, 1, 0, {2})) == 1);
  CHECK(values(backup) == values(primary));
  auto b = stats(backup);
  CHECK(b.clock == 1);
  CHECK(b.pushes == 1);
  CHECK(b.pieces == 2);
  // Closure 2: one piece reached both, then the primary died.
  CHECK(push(primary, piece_at(1, 2, 1, {2})) == 1);
  caf::anon_send_exit(primary, caf::exit_reason::kill);
  sched->run();
  REQUIRE(ask<bool>(backup, configure_atom_v, as_primary(2)));
  // The worker sends every piece of closure 2 again: the first is a
  // duplicate, the second completes the update.
  CHECK(push(backup, piece_at(2, 2, 1, {2})) == 1);
  CHECK(push(backup, piece_at(2, 2, 0, {2})) == 2);
  // (Closure 1 took {1, 2} to {0, 1}; closure 2's second run, applied
  // once, takes w[1] to 0.)
  CHECK(values(backup) == std::vector<float>{-1, 0});
  b = stats(backup);
  CHECK(b.pushes == 2);
  CHECK(b.duplicates == 1);
}

TEST_CASE_METHOD(new_backup,
                 "a new backup's install carries the pushes in pieces under "
                 "way, which it completes with the later pieces",
                 "[actors][ps][replication][pieces]") {
  CHECK(push(primary, piece_at(0, 5, 1, {2})) == 0);
  install();
  CHECK(push(primary, piece_at(1, 5, 0, {2})) == 1);
  auto b = stats(backup);
  CHECK(b.clock == 1);
  CHECK(b.pushes == 1);
  CHECK(as_vector(save(backup).values.values)
        == as_vector(save(primary).values.values));
  CHECK(as_vector(save(backup).values.values) == std::vector<float>{0, 1});
}
