// Fault injection as wrappers (actors/fault_injection.hpp): a proxy in front
// of a parameter server passes the protocol through unchanged, holds
// messages back only when told to, and dies with its server.

#include "actors/fault_injection.hpp"

#include <chrono>
#include <vector>

#include <catch2/catch.hpp>

#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

optimizer_config plain_sgd() {
  return optimizer_config{"sgd", 0.5f, {}};
}

/// A server "w" = {1, 2} behind a proxy.
struct proxied : deterministic {
  ps_actor server = spawn(options(plain_sgd(), plain_sgd()));
  faulty_ps_actor proxy = keep(spawn_ps_proxy(sys, server, 0));

  proxied() {
    run();
    create(proxy, dense_shard("w", 1, 2, {1, 2}));
  }
};

} // namespace

TEST_CASE_METHOD(proxied,
                 "a ps proxy passes every request through: the server answers "
                 "the requester",
                 "[actors][faults]") {
  CHECK(push(proxy, make_push(0, 1, {2, 2})) == 1);
  auto r = pull(proxy, dense_pull());
  CHECK(as_vector(r.values.values) == std::vector<float>{0, 1});
  CHECK(r.clock == 1);
  // Both handles see the same server.
  CHECK(stats(server).pushes == 1);
  CHECK(stats(proxy).pushes == 1);
  CHECK(ask<uint32_t>(proxy, ping_atom_v) == 0);
  CHECK(refusal<uint64_t>(proxy, push_atom_v, make_push(0, 2, {1}))
        == errc::shape_mismatch);
}

TEST_CASE_METHOD(proxied,
                 "a ps proxy told to drop holds a push back for the retry "
                 "timeout, then the server applies it once",
                 "[actors][faults]") {
  self->send(proxy, chaos_atom_v, 1.0, -1.0, uint64_t{0});
  run();
  self->send(proxy, push_atom_v, make_push(0, 1, {2, 2}));
  run();
  CHECK(nothing_received());
  CHECK(stats(server).pushes == 0);
  CHECK(sched->advance_time(199ms) == 0);
  run();
  CHECK(nothing_received());
  sched->advance_time(1ms);
  run();
  CHECK(reply<uint64_t>() == 1);
  CHECK(stats(server).pushes == 1);
  // Told to drop nothing, it passes pushes at once again.
  self->send(proxy, chaos_atom_v, 0.0, -1.0, uint64_t{0});
  CHECK(push(proxy, make_push(1, 2, {2, 2})) == 2);
}

TEST_CASE_METHOD(proxied,
                 "a ps proxy told to delay holds a pull back for the delay",
                 "[actors][faults]") {
  self->send(proxy, chaos_atom_v, -1.0, 1.0, uint64_t{50});
  run();
  self->send(proxy, pull_atom_v, dense_pull());
  run();
  CHECK(nothing_received());
  CHECK(sched->advance_time(49ms) == 0);
  run();
  CHECK(nothing_received());
  sched->advance_time(1ms);
  run();
  CHECK(as_vector(reply<pull_reply>().values.values)
        == std::vector<float>{1, 2});
}

TEST_CASE_METHOD(proxied, "a killed ps proxy takes its server along",
                 "[actors][faults]") {
  self->monitor(server);
  caf::anon_send_exit(proxy, caf::exit_reason::kill);
  run();
  bool down = false;
  self->receive([&](caf::down_msg& dm) {
                  down = true;
                  CHECK(dm.reason == caf::exit_reason::kill);
                },
                caf::after(0s) >> [] {});
  CHECK(down);
}
