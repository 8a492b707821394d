// The dispatcher with more replica groups than parameter servers
// (cluster.groups): group g starts on server g % n and its backup on
// another; a server that joins takes groups from the busiest until the
// primaries differ by at most one; a drain spreads the drained server's
// groups so that the balance holds. Real servers, a fake worker;
// deterministic.

#include "test/actors/dispatcher_fixture.hpp"
#include "test/actors/ps_fixture.hpp"

#include "core/group_balance.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace actorps::test::dispatch;

namespace {

optimizer_config groups_sgd() {
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
    d = add_dispatcher(add_workers(1), 0ms, nullptr, 0, servers,
                       std::move(rec));
    run_all();
  }

  ps_actor spawn_server() {
    auto ps = keep(spawn_ps(sys, options(groups_sgd(), groups_sgd())));
    run_all();
    return ps;
  }

  void place(const ps_actor& ps, uint32_t g, float value) {
    auto shard = dense_shard("w", 2, 1, {value, value});
    shard.group = g;
    ask<uint64_t>(ps, create_atom_v, std::move(shard));
  }

  /// A worker's push of closure `closure` to group `g` where it is served.
  uint64_t push(uint32_t g, uint64_t closure) {
    auto [p, view] = route(g);
    auto req = make_push(0, closure, {1, 1});
    req.group = g;
    req.view = view;
    return ask<uint64_t>(servers[p], push_atom_v, std::move(req));
  }

  /// Where group `g` is served: (server, view).
  std::pair<uint32_t, uint64_t> route(uint32_t g) {
    for (auto& r : ask<std::vector<group_route>>(d, route_atom_v))
      if (r.group == g)
        return {r.ps, r.view};
    FAIL("group " << g << " has no route");
    return {};
  }

  /// The primaries each server serves, by server index.
  std::vector<uint32_t> primaries() {
    std::vector<uint32_t> out(servers.size(), 0);
    auto routes = ask<std::vector<group_route>>(d, route_atom_v);
    CHECK(routes.size() == groups);
    for (auto& r : routes)
      ++out.at(r.ps);
    return out;
  }

  ps_stats stats_of(uint32_t p, uint32_t g) {
    return ask<ps_stats>(servers[p], stats_atom_v, g);
  }

  /// Whether server `p` holds a replica of group `g` as a backup (false:
  /// none, or the primary).
  bool backup_on(uint32_t p, uint32_t g) {
    self->send(servers[p], stats_atom_v, g);
    run_all();
    bool backup = false;
    self->receive([&](ps_stats& s) { backup = !s.primary; },
                  [](caf::error&) {}, caf::after(0ms) >> [] {
                    FAIL("no answer");
                  });
    return backup;
  }

  /// The dispatcher's move totals: moves, floats, table rows, stall (us).
  std::vector<uint64_t> move_totals() {
    self->send(d, move_atom_v);
    run_all();
    std::vector<uint64_t> out;
    self->receive(
      [&](uint64_t c, uint64_t f, uint64_t r, uint64_t s) {
        out = {c, f, r, s};
      },
      [&](caf::error& err) { FAIL(sys.render(err)); },
      caf::after(0ms) >> [] { FAIL("no answer"); });
    return out;
  }

  /// Server `p` joins; the moves it starts run to their end.
  void join() {
    auto added = spawn_server();
    auto index = static_cast<uint32_t>(servers.size());
    CHECK(ask<uint32_t>(d, ps_join_atom_v, index, added) == index);
    servers.push_back(added);
    run_all();
  }
};

struct six_on_two : grouped_servers {
  six_on_two() : grouped_servers(2, 6, 0) {
    // nop
  }
};

struct six_on_two_replicated : grouped_servers {
  six_on_two_replicated() : grouped_servers(2, 6, 1) {
    // nop
  }
};

struct six_on_three : grouped_servers {
  six_on_three() : grouped_servers(3, 6, 0) {
    // nop
  }
};

struct two_on_two : grouped_servers {
  two_on_two() : grouped_servers(2, 2, 0) {
    // nop
  }
};

} // namespace

TEST_CASE_METHOD(six_on_two_replicated,
                 "with more groups than servers, group g starts on server g "
                 "mod n and its backup on the other server",
                 "[actors][dispatcher][groups]") {
  CHECK(primaries() == std::vector<uint32_t>{3, 3});
  for (uint32_t g = 0; g < 6; ++g) {
    INFO("group " << g);
    CHECK(route(g) == std::make_pair(g % 2, uint64_t{0}));
    CHECK(stats_of(g % 2, g).primary);
    CHECK_FALSE(stats_of((g + 1) % 2, g).primary);
  }
}

TEST_CASE_METHOD(six_on_two,
                 "a server that joins takes groups from the busiest until "
                 "the primaries differ by at most one, with every update",
                 "[actors][dispatcher][groups]") {
  for (uint32_t g = 0; g < 6; ++g)
    CHECK(push(g, 1) == 1);
  join();
  CHECK(primaries() == std::vector<uint32_t>{2, 2, 2});
  // The moved groups (the highest of each busiest server) kept their
  // update and take the next push at their new server.
  CHECK(route(4).first == 2);
  CHECK(route(5).first == 2);
  CHECK(stats_of(2, 4).pushes == 1);
  for (uint32_t g = 0; g < 6; ++g)
    CHECK(push(g, 2) == 2);
  // The dispatcher's totals: 2 moves of 2 floats each.
  auto totals = move_totals();
  REQUIRE(totals.size() == 4);
  CHECK(totals[0] == 2);
  CHECK(totals[1] == 4);
  CHECK(totals[2] == 0);
}

TEST_CASE_METHOD(six_on_two_replicated,
                 "with replication a join rebalances the primaries and every "
                 "group keeps a backup on another server",
                 "[actors][dispatcher][groups]") {
  join();
  auto count = primaries();
  CHECK(*std::max_element(count.begin(), count.end())
          - *std::min_element(count.begin(), count.end())
        <= 1);
  for (uint32_t g = 0; g < 6; ++g) {
    INFO("group " << g);
    auto p = route(g).first;
    CHECK(stats_of(p, g).primary);
    uint32_t backups = 0;
    for (uint32_t q = 0; q < servers.size(); ++q)
      if (q != p && backup_on(q, g))
        ++backups;
    CHECK(backups == 1);
  }
}

TEST_CASE_METHOD(two_on_two,
                 "with one group per server a join moves nothing",
                 "[actors][dispatcher][groups]") {
  join();
  CHECK(primaries() == std::vector<uint32_t>{1, 1, 0});
}

TEST_CASE_METHOD(six_on_three,
                 "a drain with more groups than servers spreads the drained "
                 "server's groups over the others evenly",
                 "[actors][dispatcher][groups]") {
  for (uint32_t g = 0; g < 6; ++g)
    CHECK(push(g, 1) == 1);
  CHECK(ask<uint32_t>(d, ps_drain_atom_v, uint32_t{0}) == 2);
  CHECK(retired == std::vector<uint32_t>{0});
  auto count = primaries();
  CHECK(count == std::vector<uint32_t>{0, 3, 3});
  for (uint32_t g = 0; g < 6; ++g)
    CHECK(push(g, 2) == 2);
}
