// The dispatcher's planned moves over real parameter servers (fake workers):
// a group moved to another server at a new view with its state, a server
// joining and one drained and stopped, backups kept with replication, and
// the refusals (the same server, a server the job does not have, the last
// one); a dispatcher started from where the servers hold the groups (a
// restarted coordinator's). Deterministic.

#include "test/actors/server_groups_fixture.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace actorps::test::dispatch;

namespace {

/// `n` parameter servers, server g the primary of group g (a dense shard
/// "w" of 2 floats at {g, g}); with `replicas`, server (g + 1) % n its
/// backup. The dispatcher creates a group on another server by sending it
/// the shard (initial values {0, 0}; the install brings the state).
struct cluster_of_servers : grouped_servers {
  cluster_of_servers(uint32_t n, uint32_t replicas)
    : grouped_servers(n, n, replicas) {
    // nop
  }

  /// A worker's push to group `g` at view `view`.
  uint64_t push_to(const ps_actor& ps, uint32_t g, uint64_t view,
                   uint64_t closure) {
    auto req = make_push(0, closure, {1, 1});
    req.group = g;
    req.view = view;
    return ask<uint64_t>(ps, push_atom_v, std::move(req));
  }

  std::vector<float> values_of(uint32_t p, uint32_t g) {
    return as_vector(ask<ps_snapshot>(servers[p], save_atom_v, g).values.values);
  }

  std::string refusal_text(caf::error err) {
    return sys.render(err);
  }
};

struct three_servers : cluster_of_servers {
  three_servers() : cluster_of_servers(3, 0) {
    // nop
  }
};

struct two_servers : cluster_of_servers {
  two_servers() : cluster_of_servers(2, 0) {
    // nop
  }
};

struct three_replicated : cluster_of_servers {
  three_replicated() : cluster_of_servers(3, 1) {
    // nop
  }
};

} // namespace

TEST_CASE_METHOD(three_servers,
                 "a moved group is served by its new server at a new view "
                 "with every update, and the old server answers moved",
                 "[actors][dispatcher][move]") {
  CHECK(push_to(servers[0], 0, 0, 1) == 1);
  CHECK(push_to(servers[0], 0, 0, 2) == 2);
  auto before = values_of(0, 0);
  CHECK(ask<uint32_t>(d, move_atom_v, uint32_t{0}, uint32_t{2}) == 1);
  CHECK(route(0) == std::make_pair(uint32_t{2}, uint64_t{1}));
  CHECK(route(1) == std::make_pair(uint32_t{1}, uint64_t{0}));
  CHECK(values_of(2, 0) == before);
  auto s = stats_of(2, 0);
  CHECK(s.pushes == 2);
  CHECK(s.primary);
  // A late push at the old route is refused; at the new one a closure
  // already applied is a duplicate.
  auto late = make_push(0, 3, {1, 1});
  CHECK(refusal<uint64_t>(servers[0], push_atom_v, late) == errc::stale_view);
  CHECK(push_to(servers[2], 0, 1, 2) == 2);
  CHECK(push_to(servers[2], 0, 1, 3) == 3);
  CHECK(stats_of(2, 0).duplicates == 1);
}

TEST_CASE_METHOD(two_servers,
                 "a server joins, another is drained onto it and stopped, "
                 "and the last server cannot be removed",
                 "[actors][dispatcher][move]") {
  CHECK(push_to(servers[0], 0, 0, 1) == 1);
  auto added = spawn_server();
  CHECK(refusal<uint32_t>(d, ps_join_atom_v, uint32_t{5}, added)
        == errc::bad_message);
  CHECK(ask<uint32_t>(d, ps_join_atom_v, uint32_t{2}, added) == 2);
  servers.push_back(added);
  // Drained: its group goes to the server holding the fewest replicas (the
  // new one), then it is stopped.
  CHECK(ask<uint32_t>(d, ps_drain_atom_v, uint32_t{0}) == 1);
  CHECK(retired == std::vector<uint32_t>{0});
  CHECK(route(0) == std::make_pair(uint32_t{2}, uint64_t{1}));
  CHECK(stats_of(2, 0).pushes == 1);
  auto again = refusal<uint32_t>(d, ps_drain_atom_v, uint32_t{0});
  CHECK_THAT(refusal_text(again), Catch::Contains("left the job already"));
  CHECK(ask<uint32_t>(d, ps_drain_atom_v, uint32_t{1}) == 1);
  CHECK(route(1) == std::make_pair(uint32_t{2}, uint64_t{1}));
  auto last = refusal<uint32_t>(d, ps_drain_atom_v, uint32_t{2});
  CHECK_THAT(refusal_text(last), Catch::Contains("last parameter server"));
  auto same = refusal<uint32_t>(d, move_atom_v, uint32_t{2}, uint32_t{2});
  CHECK_THAT(refusal_text(same), Catch::Contains("the same server"));
  auto missing = refusal<uint32_t>(d, move_atom_v, uint32_t{2}, uint32_t{9});
  CHECK_THAT(refusal_text(missing),
             Catch::Contains("the job has 3 parameter servers"));
  auto gone = refusal<uint32_t>(d, move_atom_v, uint32_t{2}, uint32_t{0});
  CHECK_THAT(refusal_text(gone), Catch::Contains("cannot take replicas"));
  // Both groups still take pushes where they are.
  CHECK(push_to(servers[2], 1, 1, 2) == 1);
}

TEST_CASE_METHOD(three_replicated,
                 "with replication, moving a server's replicas keeps a "
                 "backup of every group and none on the server left",
                 "[actors][dispatcher][move]") {
  CHECK(push_to(servers[0], 0, 0, 1) == 1);
  // ps0 is group 0's primary and group 2's backup. Its primary copy goes
  // to ps1, group 0's backup (a planned promotion), and its backup copy of
  // group 2 to ps1 too.
  CHECK(ask<uint32_t>(d, move_atom_v, uint32_t{0}, uint32_t{1}) == 2);
  CHECK(route(0) == std::make_pair(uint32_t{1}, uint64_t{1}));
  CHECK(route(2) == std::make_pair(uint32_t{2}, uint64_t{0}));
  CHECK(refusal<ps_stats>(servers[0], stats_atom_v, uint32_t{0})
        == errc::stale_view);
  CHECK(refusal<ps_stats>(servers[0], stats_atom_v, uint32_t{2})
        == errc::stale_view);
  // Group 0 got a new backup (ps2, the next server after its primary), a
  // copy of its primary; group 2's backup is on ps1.
  auto b0 = stats_of(2, 0);
  CHECK_FALSE(b0.primary);
  CHECK(b0.view == 1);
  CHECK(values_of(2, 0) == values_of(1, 0));
  CHECK(b0.pushes == 1);
  CHECK_FALSE(stats_of(1, 2).primary);
  CHECK(values_of(1, 2) == values_of(2, 2));
  // An update to group 0 reaches both copies.
  CHECK(push_to(servers[1], 0, 1, 2) == 2);
  CHECK(values_of(2, 0) == values_of(1, 0));
}

TEST_CASE_METHOD(three_servers,
                 "a dispatcher started from where the servers hold the groups "
                 "serves them there, and a server that left is not expected",
                 "[actors][dispatcher][move]") {
  // The first coordinator's dispatcher moves group 0 to ps2 and drains ps0,
  // then dies.
  CHECK(ask<uint32_t>(d, move_atom_v, uint32_t{0}, uint32_t{2}) == 1);
  CHECK(ask<uint32_t>(d, ps_drain_atom_v, uint32_t{0}) == 0);
  CHECK(retired == std::vector<uint32_t>{0});
  caf::anon_send_exit(d, caf::exit_reason::kill);
  run_all();
  // The next starts at view 2 from the placement the servers reported
  // (cluster/job/group_survey.hpp), ps0 gone (a null handle).
  for (auto [p, g] : {std::pair{2u, 0u}, {1u, 1u}, {2u, 2u}})
    REQUIRE(ask<bool>(servers[p], configure_atom_v,
                      replica_config{g, 2, true, nullptr, false}));
  ps_recovery rec;
  rec.blocking = false;
  rec.initial_view = 2;
  rec.create_group = [](const ps_actor& ps, uint32_t g) {
    auto shard = dense_shard("w", 2, 1, {0, 0});
    shard.group = g;
    caf::anon_send(ps, create_atom_v, std::move(shard));
  };
  rec.placement = {group_place{2, -1}, group_place{1, -1},
                   group_place{2, -1}};
  d = add_dispatcher(add_workers(1), 0ms, nullptr, 0,
                     {ps_actor{}, servers[1], servers[2]}, std::move(rec));
  run_all();
  CHECK(route(0) == std::make_pair(uint32_t{2}, uint64_t{2}));
  CHECK(route(1) == std::make_pair(uint32_t{1}, uint64_t{2}));
  CHECK(route(2) == std::make_pair(uint32_t{2}, uint64_t{2}));
  CHECK(push_to(servers[2], 0, 2, 7) == 1);
  auto again = refusal<uint32_t>(d, ps_drain_atom_v, uint32_t{0});
  CHECK_THAT(refusal_text(again), Catch::Contains("left the job already"));
  auto gone = refusal<uint32_t>(d, move_atom_v, uint32_t{1}, uint32_t{0});
  CHECK_THAT(refusal_text(gone), Catch::Contains("cannot take replicas"));
  // A later join takes the next index; a group moves there as before.
  auto added = spawn_server();
  CHECK(ask<uint32_t>(d, ps_join_atom_v, uint32_t{3}, added) == 3);
  servers.push_back(added);
  CHECK(ask<uint32_t>(d, move_atom_v, uint32_t{1}, uint32_t{3}) == 1);
  CHECK(route(1) == std::make_pair(uint32_t{3}, uint64_t{3}));
}
