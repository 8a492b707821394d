// `actorps simulate --timing-only`: the stand-in model moves the
// bytes of the real one, so the virtual timing is the real run's, message
// for message; it computes no gradients and no test metrics.

#include "cluster/sim/simulator.hpp"

#include <catch2/catch.hpp>

#include "core/job_config.hpp"

using namespace actorps;

namespace {

sim_options options(bool timing_only) {
  sim_options o;
  o.network = parse_network("1gbit,100us");
  o.compute = parse_compute("const:2ms");
  o.seed = 5;
  o.timing_only = timing_only;
  return o;
}

void check_same_timing(const sim_report& real, const sim_report& timing) {
  CHECK(timing.virtual_s == real.virtual_s);
  CHECK(timing.samples == real.samples);
  CHECK(timing.events == real.events);
  CHECK(timing.closures == real.closures);
  CHECK(timing.staleness_buckets == real.staleness_buckets);
  REQUIRE(timing.servers.size() == real.servers.size());
  for (size_t p = 0; p < real.servers.size(); ++p) {
    INFO("ps " << p);
    CHECK(timing.servers[p].bytes_in == real.servers[p].bytes_in);
    CHECK(timing.servers[p].bytes_out == real.servers[p].bytes_out);
    CHECK(timing.servers[p].pulls == real.servers[p].pulls);
  }
  REQUIRE(timing.epochs.size() == real.epochs.size());
  for (auto& e : timing.epochs) {
    CHECK(e.metrics.empty());
    CHECK(e.train_loss == 0);
  }
  CHECK_FALSE(real.epochs.back().metrics.empty());
}

} // namespace

TEST_CASE("a timing-only simulation of a dense model has the real run's "
          "timing, without its arithmetic",
          "[simulate]") {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/fashion_mnist.json");
  cfg.train_limit = 1024;
  cfg.test_limit = 200;
  cfg.epochs = 1;
  cfg.workers = 8;
  cfg.ps = 3;
  auto real = simulate(cfg, options(false));
  auto timing = simulate(cfg, options(true));
  check_same_timing(real, timing);
  // The real model's dense values crossed the links: megabytes, though the
  // stand-in holds one float per server.
  CHECK(timing.servers[0].bytes_out > 1'000'000);
  SECTION("in a compressed format, the format's bytes are charged") {
    cfg.push_format = "bf16";
    cfg.pull_format = "bf16";
    check_same_timing(simulate(cfg, options(false)),
                      simulate(cfg, options(true)));
  }
}

TEST_CASE("a timing-only simulation of a model with tables keeps its "
          "tables' traffic",
          "[simulate]") {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/a9a.json");
  cfg.data_dir = ACTORPS_SOURCE_DIR "/data/a9a";
  cfg.train_limit = 512;
  cfg.test_limit = 200;
  cfg.epochs = 2;
  cfg.workers = 4;
  cfg.ps = 2;
  check_same_timing(simulate(cfg, options(false)),
                    simulate(cfg, options(true)));
}
