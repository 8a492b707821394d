#include <chrono>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/scoped_actor.hpp"

#include "actors/dispatcher_actor.hpp"
#include "actors/ps_actor.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/job/system_config.hpp"
#include "core/error.hpp"
#include "test/actors/ps_fixture.hpp"

using namespace actorps;

TEST_CASE("the servers' counters read after a server was lost without a "
          "replica: zeros for its group, the others' counters, no throw",
          "[cluster][stats]") {
  system_config cfg; // actorps' message types
  caf::actor_system sys{cfg};
  ps_options opts;
  auto ps = spawn_ps(sys, opts);
  caf::scoped_actor self{sys};
  bool created = false;
  self->request(ps, std::chrono::seconds(5), create_atom_v,
                test::dense_shard("w", 2, 2, {1, 2, 3, 4}))
    .receive([&](uint64_t) { created = true; }, [&](caf::error&) {});
  REQUIRE(created);
  // A dispatcher whose group 1 has no live copy (its server lost, no
  // replica): only group 0 has a route.
  auto routes = std::vector<group_route>{
    group_route{0, 0, 0, caf::actor_cast<caf::strong_actor_ptr>(ps)}};
  auto fake = sys.spawn([routes](caf::event_based_actor*) -> caf::behavior {
    return {[=](route_atom) { return routes; }};
  });
  auto dispatcher = caf::actor_cast<dispatcher_actor>(fake);
  CHECK_THROWS_AS(routes_of(sys, dispatcher, 2), runtime_failure);
  std::vector<ps_stats> stats;
  REQUIRE_NOTHROW(stats = ps_stats_of(sys, dispatcher, 2));
  REQUIRE(stats.size() == 2);
  CHECK(stats[0].peak_rss_bytes > 0); // group 0 answered
  CHECK(stats[0].primary);
  CHECK(stats[1].peak_rss_bytes == 0); // group 1: zeros
  CHECK(stats[1].clock == 0);
  // The dispatcher itself gone: zeros for every group, still no throw.
  caf::anon_send_exit(fake, caf::exit_reason::kill);
  self->wait_for(fake);
  REQUIRE_NOTHROW(stats = ps_stats_of(sys, dispatcher, 2));
  CHECK(stats.size() == 2);
  CHECK(stats[0].peak_rss_bytes == 0);
  caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
}
