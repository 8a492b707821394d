// The dispatcher with more replica groups than parameter servers
// (cluster.groups): group g starts on server g % n and its backup on
// another; a server that joins takes groups from the busiest until the
// primaries differ by at most one; a drain spreads the drained server's
// groups so that the balance holds. Real servers, a fake worker;
// deterministic.

#include "test/actors/server_groups_fixture.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace actorps::test::dispatch;

namespace {

struct grouped_test : grouped_servers {
  using grouped_servers::grouped_servers;

  /// A worker's push of closure `closure` to group `g` where it is served.
  uint64_t push(uint32_t g, uint64_t closure) {
    auto [p, view] = route(g);
    auto req = make_push(0, closure, {1, 1});
    req.group = g;
    req.view = view;
    return ask<uint64_t>(servers[p], push_atom_v, std::move(req));
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

struct six_on_two : grouped_test {
  six_on_two() : grouped_test(2, 6, 0) {
    // nop
  }
};

struct six_on_two_replicated : grouped_test {
  six_on_two_replicated() : grouped_test(2, 6, 1) {
    // nop
  }
};

struct six_on_three : grouped_test {
  six_on_three() : grouped_test(3, 6, 0) {
    // nop
  }
};

struct two_on_two : grouped_test {
  two_on_two() : grouped_test(2, 2, 0) {
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
