// Planned changes of the parameter servers in one process (the fault/event
// plan's move, add and remove): every closure's push applied once per
// group whatever moves, under each consistency mode, with replication and
// with embedding tables; and a run with a move that computes exactly what
// the run without computes.

#include <catch2/catch.hpp>

#include "cluster/topology/trainer.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"

using namespace actorps;

namespace {

job_config small_job(uint32_t ps) {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/fashion_mnist.json");
  cfg.train_limit = 2560;
  cfg.test_limit = 1000;
  cfg.epochs = 2;
  cfg.ps = ps;
  return cfg;
}

train_report run_quietly(const job_config& cfg) {
  train_options opts;
  opts.out = nullptr;
  return train(cfg, opts);
}

/// Every closure's push reached every group exactly once: none lost to a
/// move, none applied twice (a push sent again is a counted duplicate).
void check_once_per_group(const train_report& r, uint32_t groups) {
  CHECK(r.closures == r.scheduled);
  CHECK(r.updates_lost == 0);
  CHECK(r.pushes == uint64_t{groups} * r.closures);
}

} // namespace

TEST_CASE("a group moved to another parameter server in epoch 2 loses no "
          "update and applies none twice, under async, sync and ssp",
          "[cluster][e2e][move]") {
  for (auto mode : {"async", "sync", "ssp"}) {
    INFO("mode " << mode);
    auto cfg = small_job(3);
    cfg.mode = mode;
    cfg.faults = {parse_fault("move:ps:0>2@50")};
    auto r = run_quietly(cfg);
    REQUIRE(r.epochs.size() == 2);
    check_once_per_group(r, 3);
    CHECK(r.epochs[1].train_loss < r.epochs[0].train_loss);
  }
}

TEST_CASE("a parameter server added and another removed mid-job: the "
          "removed one's groups move, every update applied once",
          "[cluster][e2e][move]") {
  for (uint32_t replicas : {0u, 1u}) {
    INFO("replicas " << replicas);
    auto cfg = small_job(2);
    cfg.replicas = replicas;
    cfg.faults = {parse_fault("join:ps@10"), parse_fault("leave:ps:0@30"),
                  parse_fault("move:ps:1>0@55")};
    // ps 0 is gone by step 55: the plan is refused before the job starts.
    CHECK_THROWS_AS(run_quietly(cfg), input_error);
    cfg.faults.back() = parse_fault("move:ps:1>2@55");
    auto r = run_quietly(cfg);
    REQUIRE(r.epochs.size() == 2);
    check_once_per_group(r, 2);
    CHECK(r.epochs[1].train_loss < r.epochs[0].train_loss);
  }
}

TEST_CASE("embedding-table shards move with their rows and slots",
          "[cluster][e2e][move]") {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/synthetic_ctr.json");
  cfg.ps = 2;
  cfg.epochs = 2;
  cfg.train_limit = 20480; // 40 steps of 512 an epoch
  cfg.test_limit = 2000;
  cfg.faults = {parse_fault("join:ps@20"), parse_fault("move:ps:1>2@50")};
  auto r = run_quietly(cfg);
  REQUIRE(r.epochs.size() == 2);
  check_once_per_group(r, 2);
  CHECK(r.table_rows > 0);
}

TEST_CASE("a move changes nothing the job computes: with one worker, the "
          "losses and accuracy of a run with a group moved in epoch 2 equal "
          "those of the run without",
          "[cluster][e2e][move]") {
  // One worker pushes and pulls in order: its run is deterministic, so
  // the run with the move must be the same run, to the last bit of the
  // metrics (a lost, doubled, reordered or stale update, or a slot not
  // moved, would show).
  auto cfg = small_job(2);
  cfg.workers = 1;
  cfg.train_limit = 12000; // 187 steps an epoch
  cfg.test_limit = 2000;
  auto base = run_quietly(cfg);
  cfg.faults = {parse_fault("join:ps@250"), parse_fault("move:ps:0>2@260")};
  auto moved = run_quietly(cfg);
  REQUIRE(base.epochs.size() == 2);
  REQUIRE(moved.epochs.size() == 2);
  check_once_per_group(moved, 2);
  for (size_t e = 0; e < 2; ++e) {
    INFO("epoch " << e + 1);
    CHECK(moved.epochs[e].train_loss == base.epochs[e].train_loss);
    CHECK(moved.epochs[e].test_loss == base.epochs[e].test_loss);
    CHECK(moved.epochs[e].test_accuracy == base.epochs[e].test_accuracy);
  }
  CHECK(moved.epochs[1].test_accuracy > 0.75);
}
