#pragma once

// Real parameter servers holding replica groups, a dispatcher over them and
// a fake worker, for the dispatcher's tests of moves and of more groups
// than servers (dispatcher_move_test, dispatcher_groups_test).
// Deterministic.

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "test/actors/dispatcher_fixture.hpp"
#include "test/actors/ps_fixture.hpp"

#include "core/group_balance.hpp"

namespace actorps::test::dispatch {

inline optimizer_config servers_sgd() {
  return optimizer_config{"sgd", 0.5f, {}};
}

/// `n` servers and `groups` groups (a dense shard "w" of 2 floats at
/// {g, g} each), group g's primary on server g % n; with `replicas`, its
/// backup on the next server.
struct grouped_servers : dispatch::deterministic {
  std::vector<ps_actor> servers;
  std::vector<uint32_t> retired;
  dispatcher_actor d;
  uint32_t groups;

  grouped_servers(uint32_t n, uint32_t groups_, uint32_t replicas)
    : groups(groups_) {
    for (uint32_t p = 0; p < n; ++p)
      servers.push_back(spawn_server());
    for (uint32_t g = 0; g < groups; ++g) {
      auto home = group_home(g, n);
      place(servers[home], g, float(g));
      if (replicas == 0)
        continue;
      auto b = group_backup_home(g, n);
      place(servers[b], g, float(g));
      REQUIRE(ask<bool>(servers[b], configure_atom_v,
                        replica_config{g, 0, false, nullptr, false}));
      REQUIRE(ask<bool>(servers[home], configure_atom_v,
                        replica_config{g, 0, true,
                                       caf::actor_cast<caf::strong_actor_ptr>(
                                         servers[b]),
                                       false}));
    }
    ps_recovery rec;
    rec.replicas = replicas;
    rec.groups = groups;
    rec.blocking = false;
    rec.create_group = [](const ps_actor& ps, uint32_t g) {
      auto shard = dense_shard("w", 2, 1, {0, 0});
      shard.group = g;
      caf::anon_send(ps, create_atom_v, std::move(shard));
    };
    rec.retire = [this](uint32_t p, const ps_actor& ps) {
      retired.push_back(p);
      caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
    };
    d = add_dispatcher(add_workers(1), std::chrono::milliseconds(0), nullptr,
                       0, servers, std::move(rec));
    run_all();
  }

  ps_actor spawn_server() {
    auto ps = keep(spawn_ps(sys, options(servers_sgd(), servers_sgd())));
    run_all();
    return ps;
  }

  void place(const ps_actor& ps, uint32_t g, float value) {
    auto shard = dense_shard("w", 2, 1, {value, value});
    shard.group = g;
    ask<uint64_t>(ps, create_atom_v, std::move(shard));
  }

  /// Where group `g` is served: (server, view).
  std::pair<uint32_t, uint64_t> route(uint32_t g) {
    for (auto& r : ask<std::vector<group_route>>(d, route_atom_v))
      if (r.group == g)
        return {r.ps, r.view};
    FAIL("group " << g << " has no route");
    return {};
  }

  ps_stats stats_of(uint32_t p, uint32_t g) {
    return ask<ps_stats>(servers[p], stats_atom_v, g);
  }

  std::vector<float> values_of(uint32_t p, uint32_t g) {
    return as_vector(ask<ps_snapshot>(servers[p], save_atom_v, g).values.values);
  }
};

} // namespace actorps::test::dispatch
