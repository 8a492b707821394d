// The host model of `actorps simulate --host`: tasks of one node
// run one after another, all nodes share the host's cores, first come
// first served; the costs scale with bytes and floats; bad specs refused.

#include "cluster/sim/sim_host.hpp"

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/job_config.hpp"

using namespace actorps;

TEST_CASE("the host model runs a node's tasks in turn on the host's cores",
          "[simulate]") {
  host_spec spec;
  spec.cores = 2;
  spec.ns_per_message = 7;
  spec.ns_per_byte = 0.5;
  spec.apply_ns_per_float = 2;
  host_model h{spec, 4};
  REQUIRE(h.enabled());
  // Two nodes at once: a core each.
  CHECK(h.run(0, 100, 0) == 100);
  CHECK(h.run(1, 100, 0) == 100);
  // A third node waits for a core; node 0's next task for node 0.
  CHECK(h.run(2, 50, 10) == 150);
  CHECK(h.run(0, 30, 20) == 130);
  // Ready later than everything: starts when ready.
  CHECK(h.run(3, 10, 1000) == 1010);
  CHECK(h.busy()[0] == 130);
  CHECK(h.message_cost(1000) == 507);
  CHECK(h.apply_cost(1000) == 2000);
  CHECK_FALSE(host_model(host_spec{}, 4).enabled());
}

TEST_CASE("host specs parse, and bad ones are refused naming the problem",
          "[simulate]") {
  auto h = parse_host("2:0.35:1.2");
  CHECK(h.cores == 2);
  CHECK(h.ns_per_byte == Approx(0.35));
  CHECK(h.apply_ns_per_float == Approx(1.2));
  auto four = parse_host("4:20000:0.5:1");
  CHECK(four.cores == 4);
  CHECK(four.ns_per_message == Approx(20000));
  CHECK(four.ns_per_byte == Approx(0.5));
  for (auto bad : {"", "2", "2:0.3", "0:1:1", "x:1:1", "2:-1:1", "2:1:y",
                   "2:1:1:1:1", "2::1"})
    CHECK_THROWS_AS(parse_host(bad), input_error);
  CHECK_THROWS_WITH(parse_host("2:abc:1"), Catch::Contains("2:abc:1"));
}

TEST_CASE("this machine's host costs are measured as positive and small",
          "[simulate]") {
  job_config cfg;
  // A small model: measure_host pulls at least 4 MB all the same, which
  // keeps the per-byte cost out of scheduling noise.
  auto h = measure_host(cfg, 1 << 16);
  CHECK(h.cores >= 1);
  // A message costs under 10 ms, a byte well under 100 ns to write or
  // read, a float's update under 1 us, on any machine this runs on.
  CHECK(h.ns_per_message > 0);
  CHECK(h.ns_per_message < 1e7);
  CHECK(h.ns_per_byte > 0);
  CHECK(h.ns_per_byte < 100);
  CHECK(h.apply_ns_per_float > 0);
  CHECK(h.apply_ns_per_float < 1000);
}
