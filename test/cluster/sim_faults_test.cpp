// The fault plan under simulation: kill, stop, drop, delay and
// error have the meaning they have in real runs, in virtual time, and a
// killed ps is recovered as in one process (its backup takes over, or it
// comes back restored from the newest checkpoint), deterministically.

#include "cluster/sim/simulator.hpp"

#include <string>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/job_config.hpp"

using namespace actorps;

namespace {

/// a9a (sparse logistic regression), 4 workers, 2 ps, 2 epochs of 16
/// closures each.
job_config small_job() {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/a9a.json");
  cfg.data_dir = ACTORPS_SOURCE_DIR "/data/a9a";
  cfg.train_limit = 1024;
  cfg.test_limit = 200;
  cfg.epochs = 2;
  cfg.workers = 4;
  cfg.ps = 2;
  return cfg;
}

sim_options options() {
  sim_options o;
  o.network = parse_network("1gbit,100us");
  o.compute = parse_compute("normal:1ms,200us");
  o.seed = 3;
  return o;
}

sim_report run_with(job_config cfg, std::initializer_list<const char*> faults) {
  for (auto f : faults)
    cfg.faults.push_back(parse_fault(f));
  return simulate(cfg, options());
}

} // namespace

TEST_CASE("under simulation a killed ps's backup takes over: every closure "
          "applied once per group, and the run is deterministic",
          "[simulate][faults]") {
  auto cfg = small_job();
  cfg.replicas = 1;
  auto plain = simulate(cfg, options());
  auto a = run_with(cfg, {"kill:ps:0@12"});
  auto b = run_with(cfg, {"kill:ps:0@12"});
  CHECK(a.closures == plain.closures);
  CHECK(a.closures > 12);
  // Exactly once: the new primary knows what the old one forwarded, and a
  // re-sent push is a duplicate there.
  CHECK(a.pushes_applied == a.closures * cfg.ps);
  CHECK(a.digest == b.digest);
  CHECK(a.digest != plain.digest);
}

TEST_CASE("under simulation a killed ps without a copy comes back restored "
          "from the newest checkpoint (kept in memory), losing the updates "
          "since",
          "[simulate][faults]") {
  auto cfg = small_job();
  cfg.checkpoint_dir = "unused: kept in memory";
  cfg.checkpoint_every_steps = 8;
  auto r = run_with(cfg, {"kill:ps:0@13"});
  auto total = r.closures * cfg.ps;
  CHECK(r.closures == 32);
  // Group 0's updates after the checkpoint at step 8 and before the kill
  // (at least the 5 finished steps 9-13, at most those plus one in flight
  // per worker) are lost; group 1 lost nothing.
  CHECK(r.pushes_applied <= total - 5);
  CHECK(r.pushes_applied >= total - 5 - cfg.workers);
  SECTION("without a checkpoint or a copy the job fails, naming why") {
    auto bare = small_job();
    CHECK_THROWS_WITH(run_with(bare, {"kill:ps:0@13"}),
                      Catch::Contains("cannot be restored")
                        && Catch::Contains("reset_lost_ps"));
    bare.reset_lost_ps = true;
    auto reset = run_with(bare, {"kill:ps:0@13"});
    CHECK(reset.closures == 32);
  }
}

TEST_CASE("under simulation a killed worker's closure runs again elsewhere "
          "and is applied once",
          "[simulate][faults]") {
  auto cfg = small_job();
  auto r = run_with(cfg, {"kill:worker:1@6"});
  CHECK(r.closures == 32);
  CHECK(r.pushes_applied == 32 * cfg.ps);
}

TEST_CASE("under simulation a stop holds a node for its virtual seconds",
          "[simulate][faults]") {
  auto cfg = small_job();
  auto plain = simulate(cfg, options());
  for (auto f : {"stop:ps:1@6:0.5", "stop:worker:2@6:0.5"}) {
    auto r = run_with(cfg, {f});
    INFO(f);
    // The job waits for the stopped node once (async: the other workers go
    // on, but every closure needs ps 1, and the epoch needs worker 2's).
    CHECK(r.virtual_s >= plain.virtual_s + 0.45);
    CHECK(r.virtual_s <= plain.virtual_s + 0.55);
    CHECK(r.pushes_applied == 32 * cfg.ps);
  }
}

TEST_CASE("under simulation dropped messages are sent again after the retry "
          "timeout and delayed ones arrive late, none lost or doubled",
          "[simulate][faults]") {
  auto cfg = small_job();
  auto plain = simulate(cfg, options());
  auto dropped = run_with(cfg, {"drop:ps:20%@4"});
  CHECK(dropped.dropped > 0);
  CHECK(dropped.delayed == 0);
  CHECK(dropped.pushes_applied == 32 * cfg.ps);
  // Each drop costs its sender 200 ms: the run is that much longer.
  CHECK(dropped.virtual_s >= plain.virtual_s + 0.2);
  auto delayed = run_with(cfg, {"delay:ps:50%@4:0.01"});
  CHECK(delayed.delayed > 0);
  CHECK(delayed.dropped == 0);
  CHECK(delayed.pushes_applied == 32 * cfg.ps);
  CHECK(delayed.virtual_s >= plain.virtual_s + 0.01);
  CHECK(plain.dropped + plain.delayed == 0);
}

TEST_CASE("under simulation a step error fails the job with the step's own "
          "error, and a fault naming a node the job lacks is refused",
          "[simulate][faults]") {
  auto cfg = small_job();
  CHECK_THROWS_WITH(run_with(cfg, {"error:worker:1@6"}),
                    Catch::Contains("injected step error (fault "
                                    "error:worker:1)"));
  CHECK_THROWS_AS(run_with(cfg, {"kill:worker:4@6"}), input_error);
  CHECK_THROWS_WITH(run_with(cfg, {"stop:ps:2@6:1"}),
                    Catch::Contains("stop:ps:2@6:1")
                      && Catch::Contains("the job has 2 ps"));
}
