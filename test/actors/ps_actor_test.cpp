#include <catch2/catch.hpp>

#include "caf/actor_system.hpp"
#include "caf/scheduler/test_coordinator.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/local_cluster.hpp"

using namespace actorps;

namespace {

std::vector<float> as_vector(const float_vector& v) {
  return {v.begin(), v.end()};
}


create_shard make_shard(std::string name, uint64_t rows, uint64_t cols,
                        std::vector<float> values) {
  create_shard s;
  s.variable = std::move(name);
  s.row_begin = 0;
  s.row_end = rows;
  s.cols = cols;
  s.values.values.assign(values.begin(), values.end());
  return s;
}

push_request make_push(uint64_t read_clock, uint64_t closure,
                       std::vector<float> grad, uint32_t worker = 0) {
  push_request p;
  p.read_clock = read_clock;
  p.id = update_id{worker, 0, closure};
  p.gradient.values.assign(grad.begin(), grad.end());
  return p;
}

/// An actor system whose scheduler runs nothing until the test says so
/// (caf-0.17-notes.md, section 10).
struct deterministic {
  system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;

  static system_config& prep(system_config& c) {
    c.set("scheduler.policy", caf::atom("testing"));
    return c;
  }

  deterministic()
    : sys(prep(cfg)),
      sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {
    // nop
  }

  /// Creates a shard on `ps` and requires that the server accepts it.
  void create(caf::scoped_actor& self, const ps_actor& ps, create_shard shard) {
    self->send(ps, create_atom_v, std::move(shard));
    sched.run();
    self->receive([](uint64_t) {}, [](caf::error&) { FAIL("create failed"); });
  }
};

} // namespace

TEST_CASE_METHOD(deterministic,
                 "a parameter server appends shards and pulls them in order",
                 "[actors][ps]") {
  optimizer_config sgd;
  sgd.learning_rate = 0.5f;
  auto ps = spawn_ps(sys, ps_options{0, sgd});
  sched.run();
  caf::scoped_actor self{sys};
  self->send(ps, pull_atom_v, no_worker);
  sched.run();
  self->receive([](pull_reply&) { FAIL("pull before any shard succeeded"); },
                [](caf::error& err) { CHECK(err == errc::no_shards); });
  self->send(ps, create_atom_v, make_shard("a", 2, 2, {1, 2, 3, 4}));
  sched.run();
  self->receive([](uint64_t offset) { CHECK(offset == 0); },
                [](caf::error&) { FAIL("create failed"); });
  self->send(ps, create_atom_v, make_shard("b", 1, 1, {5}));
  sched.run();
  self->receive([](uint64_t offset) { CHECK(offset == 4); },
                [](caf::error&) { FAIL("create failed"); });
  self->send(ps, pull_atom_v, no_worker);
  sched.run();
  self->receive(
    [](pull_reply& r) {
      CHECK(r.clock == 0);
      CHECK(as_vector(r.values.values) == std::vector<float>{1, 2, 3, 4, 5});
    },
    [](caf::error&) { FAIL("pull failed"); });
  anon_send_exit(ps, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE_METHOD(deterministic,
                 "a push applies SGD, advances the clock and records staleness",
                 "[actors][ps]") {
  optimizer_config sgd;
  sgd.learning_rate = 0.5f;
  auto ps = spawn_ps(sys, ps_options{0, sgd});
  sched.run();
  caf::scoped_actor self{sys};
  create(self, ps, make_shard("w", 1, 3, {1, 1, 1}));
  // Two pushes computed on clock 0: the second is one update stale.
  self->send(ps, push_atom_v, make_push(0, 1, {2, 0, -2}));
  sched.run();
  self->receive([](uint64_t clock) { CHECK(clock == 1); },
                [](caf::error&) { FAIL("push failed"); });
  self->send(ps, push_atom_v, make_push(0, 2, {0, 2, 0}));
  sched.run();
  self->receive([](uint64_t clock) { CHECK(clock == 2); },
                [](caf::error&) { FAIL("push failed"); });
  self->send(ps, pull_atom_v, no_worker);
  sched.run();
  self->receive(
    [](pull_reply& r) {
      CHECK(r.clock == 2);
      // 1 - 0.5*2 = 0, 1 - 0.5*2 = 0, 1 + 0.5*2 = 2
      CHECK(as_vector(r.values.values) == std::vector<float>{0, 0, 2});
    },
    [](caf::error&) { FAIL("pull failed"); });
  self->send(ps, stats_atom_v);
  sched.run();
  self->receive(
    [](ps_stats& s) {
      CHECK(s.clock == 2);
      CHECK(s.staleness_sum == 1);
      CHECK(s.staleness_max == 1);
      CHECK(s.duplicates == 0);
      CHECK(s.floats == 3);
    },
    [](caf::error&) { FAIL("stats failed"); });
  anon_send_exit(ps, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE_METHOD(deterministic,
                 "a push of the wrong size is refused and changes nothing",
                 "[actors][ps]") {
  auto ps = spawn_ps(sys, ps_options{0, optimizer_config{}});
  sched.run();
  caf::scoped_actor self{sys};
  create(self, ps, make_shard("w", 2, 1, {1, 2}));
  self->send(ps, push_atom_v, make_push(0, 1, {1, 1, 1}));
  sched.run();
  self->receive([](uint64_t) { FAIL("a wrong-size push was applied"); },
                [](caf::error& err) { CHECK(err == errc::shape_mismatch); });
  self->send(ps, create_atom_v, make_shard("v", 2, 2, {1, 2, 3}));
  sched.run();
  self->receive([](uint64_t) { FAIL("a wrong-size shard was created"); },
                [](caf::error& err) { CHECK(err == errc::shape_mismatch); });
  self->send(ps, pull_atom_v, no_worker);
  sched.run();
  self->receive(
    [](pull_reply& r) {
      CHECK(r.clock == 0);
      CHECK(as_vector(r.values.values) == std::vector<float>{1, 2});
    },
    [](caf::error&) { FAIL("pull failed"); });
  anon_send_exit(ps, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE_METHOD(deterministic, "a duplicate push is applied once",
                 "[actors][ps]") {
  optimizer_config sgd;
  sgd.learning_rate = 1.0f;
  auto ps = spawn_ps(sys, ps_options{0, sgd});
  sched.run();
  caf::scoped_actor self{sys};
  create(self, ps, make_shard("w", 1, 1, {10}));
  for (int i = 0; i < 3; ++i) {
    self->send(ps, push_atom_v, make_push(0, 7, {1}, 3));
    sched.run();
    self->receive([](uint64_t clock) { CHECK(clock == 1); },
                  [](caf::error&) { FAIL("push failed"); });
  }
  // The same closure re-run on another worker (its first worker was lost)
  // is the same update: discarded too.
  self->send(ps, push_atom_v, make_push(1, 7, {1}, 4));
  sched.run();
  self->receive([](uint64_t clock) { CHECK(clock == 1); },
                [](caf::error&) { FAIL("push failed"); });
  // Another closure is another update.
  self->send(ps, push_atom_v, make_push(1, 8, {1}, 4));
  sched.run();
  self->receive([](uint64_t clock) { CHECK(clock == 2); },
                [](caf::error&) { FAIL("push failed"); });
  self->send(ps, pull_atom_v, no_worker);
  sched.run();
  self->receive([](pull_reply& r) { CHECK(r.values.values[0] == 8.0f); },
                [](caf::error&) { FAIL("pull failed"); });
  self->send(ps, stats_atom_v);
  sched.run();
  self->receive([](ps_stats& s) { CHECK(s.duplicates == 3); },
                [](caf::error&) { FAIL("stats failed"); });
  anon_send_exit(ps, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE_METHOD(deterministic,
                 "under sync a server applies the mean of one push per worker "
                 "and acknowledges the round together",
                 "[actors][ps]") {
  optimizer_config sgd;
  sgd.learning_rate = 1.0f;
  auto ps = spawn_ps(sys, ps_options{0, sgd, consistency::sync, 2, 0});
  sched.run();
  caf::scoped_actor self{sys};
  create(self, ps, make_shard("w", 1, 2, {0, 0}));
  self->send(ps, push_atom_v, make_push(0, 1, {2, 4}, 0));
  sched.run();
  // No ack yet: worker 1 has not pushed for this round.
  self->receive([](uint64_t) { FAIL("acknowledged before the round ended"); },
                [](caf::error&) { FAIL("push failed"); },
                caf::after(std::chrono::seconds(0)) >> [] {});
  // A second push of worker 0 in the same round is refused.
  self->send(ps, push_atom_v, make_push(0, 2, {1, 1}, 0));
  sched.run();
  self->receive([](uint64_t) { FAIL("second push accepted"); },
                [](caf::error& err) { CHECK(err == errc::step_failed); });
  self->send(ps, push_atom_v, make_push(0, 3, {0, 2}, 1));
  sched.run();
  for (int i = 0; i < 2; ++i)
    self->receive([](uint64_t clock) { CHECK(clock == 1); },
                  [](caf::error&) { FAIL("push failed"); });
  self->send(ps, pull_atom_v, no_worker);
  sched.run();
  // mean gradient (1, 3), one SGD step with lr 1
  self->receive(
    [](pull_reply& r) {
      CHECK(r.clock == 1);
      CHECK(as_vector(r.values.values) == std::vector<float>{-1, -3});
    },
    [](caf::error&) { FAIL("pull failed"); });
  anon_send_exit(ps, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE_METHOD(deterministic,
                 "under ssp a worker too far ahead waits at its pull until "
                 "the slowest worker pushes",
                 "[actors][ps]") {
  auto ps = spawn_ps(sys, ps_options{0, optimizer_config{}, consistency::ssp,
                                     2, 1});
  sched.run();
  caf::scoped_actor self{sys};
  create(self, ps, make_shard("w", 1, 1, {0}));
  // Worker 0 pushes twice; worker 1 never: worker 0 is 2 > s = 1 ahead.
  for (uint64_t c = 1; c <= 2; ++c) {
    self->send(ps, push_atom_v, make_push(0, c, {1}, 0));
    sched.run();
    self->receive([](uint64_t) {}, [](caf::error&) { FAIL("push failed"); });
  }
  self->send(ps, pull_atom_v, uint32_t{1}); // the slow worker reads at once
  sched.run();
  self->receive([](pull_reply& r) { CHECK(r.clock == 2); },
                [](caf::error&) { FAIL("pull failed"); });
  self->send(ps, pull_atom_v, uint32_t{0}); // the fast one is held
  sched.run();
  self->receive([](pull_reply&) { FAIL("a worker 2 ahead was not held"); },
                [](caf::error&) { FAIL("pull failed"); },
                caf::after(std::chrono::seconds(0)) >> [] {});
  self->send(ps, push_atom_v, make_push(2, 3, {1}, 1));
  sched.run();
  // The push's ack and the released pull both arrive.
  bool got_ack = false;
  bool got_pull = false;
  for (int i = 0; i < 2; ++i)
    self->receive([&](uint64_t clock) { got_ack = clock == 3; },
                  [&](pull_reply& r) { got_pull = r.clock == 3; },
                  [](caf::error&) { FAIL("request failed"); });
  CHECK(got_ack);
  CHECK(got_pull);
  self->send(ps, pull_atom_v, uint32_t{7});
  sched.run();
  self->receive([](pull_reply&) { FAIL("unknown worker served"); },
                [](caf::error& err) { CHECK(err == errc::unknown_worker); });
  anon_send_exit(ps, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE_METHOD(deterministic,
                 "a saved parameter server restores into a fresh one",
                 "[actors][ps][checkpoint]") {
  optimizer_config adam;
  adam.type = optimizer_config::kind::adam;
  adam.learning_rate = 0.1f;
  auto a = spawn_ps(sys, ps_options{0, adam});
  auto b = spawn_ps(sys, ps_options{0, adam});
  sched.run();
  caf::scoped_actor self{sys};
  create(self, a, make_shard("w", 2, 1, {1, 2}));
  create(self, b, make_shard("w", 2, 1, {0, 0}));
  for (uint64_t i = 1; i <= 3; ++i) {
    self->send(a, push_atom_v, make_push(0, i, {0.5f, -1.0f}));
    sched.run();
    self->receive([](uint64_t) {}, [](caf::error&) { FAIL("push failed"); });
  }
  ps_snapshot snap;
  self->send(a, save_atom_v);
  sched.run();
  self->receive([&](ps_snapshot& s) { snap = std::move(s); },
                [](caf::error&) { FAIL("save failed"); });
  CHECK(snap.clock == 3);
  CHECK(snap.optimizer_steps == 3);
  REQUIRE(snap.slots.size() == 2); // Adam's m and v
  // A snapshot of the wrong size is refused and changes nothing.
  auto wrong = snap;
  wrong.values.values.push_back(0);
  self->send(b, restore_atom_v, wrong);
  sched.run();
  self->receive([](uint64_t) { FAIL("a wrong snapshot was restored"); },
                [](caf::error& e) { CHECK(e == errc::shape_mismatch); });
  self->send(b, restore_atom_v, snap);
  sched.run();
  self->receive([](uint64_t clock) { CHECK(clock == 3); },
                [](caf::error&) { FAIL("restore failed"); });
  // From here on both servers must compute exactly the same.
  for (auto* ps : {&a, &b}) {
    self->send(*ps, push_atom_v, make_push(3, 9, {0.25f, 0.25f}));
    sched.run();
    self->receive([](uint64_t clock) { CHECK(clock == 4); },
                  [](caf::error&) { FAIL("push failed"); });
  }
  std::vector<float> va;
  std::vector<float> vb;
  self->send(a, pull_atom_v, no_worker);
  sched.run();
  self->receive([&](pull_reply& r) { va = as_vector(r.values.values); },
                [](caf::error&) { FAIL("pull failed"); });
  self->send(b, pull_atom_v, no_worker);
  sched.run();
  self->receive([&](pull_reply& r) { vb = as_vector(r.values.values); },
                [](caf::error&) { FAIL("pull failed"); });
  CHECK(va == vb);
  CHECK(va != std::vector<float>{1, 2});
  anon_send_exit(a, caf::exit_reason::user_shutdown);
  anon_send_exit(b, caf::exit_reason::user_shutdown);
  sched.run();
}
