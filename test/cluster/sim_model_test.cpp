// The simulator's time models (cluster/sim/sim_model.hpp): the network model's
// arithmetic, message by message, and the compute model's determinism and
// stragglers; their parsers' good and bad input.

#include "cluster/sim/sim_model.hpp"

#include <catch2/catch.hpp>

#include "core/error.hpp"

using namespace actorps;

TEST_CASE("a network spec parses rates and latencies with their units",
          "[simulate]") {
  auto n = parse_network("10gbit,50us");
  CHECK(n.bits_per_second == 10e9);
  CHECK(n.latency_ns == 50'000);
  n = parse_network("100mbit");
  CHECK(n.bits_per_second == 100e6);
  CHECK(n.latency_ns == 50'000); // the default
  n = parse_network("1.5gbit,2ms");
  CHECK(n.bits_per_second == 1.5e9);
  CHECK(n.latency_ns == 2'000'000);
  CHECK(parse_network("8bit,0ns").latency_ns == 0);
  for (auto bad : {"", "gbit", "10", "10gbyte", "0gbit", "-1gbit",
                   "10gbit,", "10gbit,5", "10gbit,5parsecs", "10gbit,-5us",
                   "nan", "infgbit"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_network(bad), input_error);
  }
}

TEST_CASE("the network model serialises messages on each link and adds the "
          "latency once",
          "[simulate]") {
  // 8 Mbit/s: one byte takes 1 us; latency 100 us. Nodes: 0, 1 workers,
  // 2 a server.
  network_model net{network_spec{8e6, 100'000}, 3};
  CHECK(net.transmission(1000) == 1'000'000);
  // Worker 0 sends 1000 bytes at 0: the links are free.
  CHECK(net.send(0, 2, 1000, 0) == 1'000'000 + 100'000);
  // Worker 1 sends 500 bytes at 0 too: the server's incoming link is busy
  // until 1 ms, so it starts then.
  CHECK(net.send(1, 2, 500, 0) == 1'000'000 + 500'000 + 100'000);
  // The server's outgoing link is free: a reply to worker 0 at 0.2 ms.
  CHECK(net.send(2, 0, 200, 200'000) == 200'000 + 200'000 + 100'000);
  // Worker 0's outgoing link is free from 1 ms: a message at 0.5 ms waits.
  CHECK(net.send(0, 1, 100, 500'000) == 1'000'000 + 100'000 + 100'000);
  // Later than every link's free time: no wait.
  CHECK(net.send(1, 0, 8, 10'000'000) == 10'000'000 + 8'000 + 100'000);
  CHECK(net.bytes_out() == std::vector<uint64_t>{1100, 508, 200});
  CHECK(net.bytes_in() == std::vector<uint64_t>{208, 100, 1500});
}

TEST_CASE("compute specs and straggler specs parse, and refuse bad input",
          "[simulate]") {
  CHECK(parse_compute("measured").type == compute_spec::kind::measured);
  auto c = parse_compute("const:2.5ms");
  CHECK(c.type == compute_spec::kind::constant);
  CHECK(c.mean_ns == 2'500'000);
  c = parse_compute("normal:2ms,500us");
  CHECK(c.type == compute_spec::kind::normal);
  CHECK(c.mean_ns == 2'000'000);
  CHECK(c.sd_ns == 500'000);
  for (auto bad : {"", "const", "const:", "const:2", "normal:2ms",
                   "uniform:1ms", "measured:1ms"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_compute(bad), input_error);
  }
  parse_stragglers("5%:3x", c);
  CHECK(c.straggler_share == Approx(0.05));
  CHECK(c.straggler_factor == 3);
  for (auto bad : {"5:3x", "5%:3", "5%", "101%:2x", "5%:0.5x", "-5%:2x"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_stragglers(bad, c), input_error);
  }
}

TEST_CASE("the compute model is deterministic per seed, and exactly the "
          "straggler share computes longer",
          "[simulate]") {
  compute_spec spec;
  spec.type = compute_spec::kind::normal;
  spec.mean_ns = 1'000'000;
  spec.sd_ns = 200'000;
  spec.straggler_share = 0.1;
  spec.straggler_factor = 3;
  compute_model a{spec, 100, 7};
  compute_model b{spec, 100, 7};
  compute_model c{spec, 100, 8};
  int stragglers = 0;
  bool differs = false;
  double sum = 0;
  for (uint32_t w = 0; w < 100; ++w) {
    CHECK(a.straggler(w) == b.straggler(w));
    stragglers += a.straggler(w) ? 1 : 0;
    for (uint64_t k = 1; k <= 20; ++k) {
      CHECK(a.step_time(w, k) == b.step_time(w, k));
      differs = differs || a.step_time(w, k) != c.step_time(w, k);
      if (!a.straggler(w))
        sum += static_cast<double>(a.step_time(w, k));
    }
  }
  CHECK(stragglers == 10);
  CHECK(differs);
  // 90 workers x 20 steps of N(1 ms, 0.2 ms): the mean is within 2%.
  CHECK(sum / (90 * 20) == Approx(1'000'000).epsilon(0.02));
  // A straggler computes 3 times as long as its time would be otherwise.
  spec.type = compute_spec::kind::constant;
  compute_model d{spec, 100, 7};
  for (uint32_t w = 0; w < 100; ++w)
    CHECK(d.step_time(w, 1) == (d.straggler(w) ? 3'000'000u : 1'000'000u));
}
