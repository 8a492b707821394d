// More replica groups than parameter servers (cluster.groups) in one
// process: a server that joins mid-job takes groups from the others, every
// closure's push applied once per group; a checkpoint of six groups written
// on three servers restores onto two (the same groups), and onto a job of
// one group per server (re-sharded offline).

#include <catch2/catch.hpp>

#include "cluster/services/checkpointer.hpp"
#include "cluster/topology/trainer.hpp"
#include "core/checkpoint.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;
using actorps::test::temp_dir;

namespace {

job_config grouped_job(uint32_t ps, uint32_t groups) {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/fashion_mnist.json");
  cfg.train_limit = 2560;
  cfg.test_limit = 1000;
  cfg.epochs = 2;
  cfg.ps = ps;
  cfg.groups = groups;
  return cfg;
}

train_report run_grouped(const job_config& cfg, bool resume = false) {
  train_options opts;
  opts.out = nullptr;
  opts.resume = resume;
  return train(cfg, opts);
}

} // namespace

TEST_CASE("six groups on two parameter servers: a third that joins mid-job "
          "takes two groups, and every closure's push is applied once per "
          "group",
          "[cluster][e2e][groups]") {
  auto cfg = grouped_job(2, 6);
  cfg.faults = {parse_fault("join:ps@30")};
  auto r = run_grouped(cfg);
  REQUIRE(r.epochs.size() == 2);
  CHECK(r.groups == 6);
  CHECK(r.closures == r.scheduled);
  CHECK(r.updates_lost == 0);
  CHECK(r.pushes == 6 * r.closures);
  CHECK(r.moves == 2);
  CHECK(r.moved_floats > 0);
  CHECK(r.epochs[1].train_loss < r.epochs[0].train_loss);
}

TEST_CASE("cluster.groups below cluster.ps is refused naming the field",
          "[cluster][groups]") {
  auto cfg = grouped_job(3, 2);
  CHECK_THROWS_WITH(run_grouped(cfg), Catch::Contains("cluster.groups"));
}

TEST_CASE("under sync, a third parameter server that joins takes two of six "
          "groups, and every closure's push is applied once per group",
          "[cluster][e2e][groups]") {
  auto cfg = grouped_job(2, 6);
  cfg.mode = "sync";
  cfg.faults = {parse_fault("join:ps@30")};
  auto r = run_grouped(cfg);
  REQUIRE(r.epochs.size() == 2);
  CHECK(r.closures == r.scheduled);
  CHECK(r.updates_lost == 0);
  CHECK(r.pushes == 6 * r.closures);
  CHECK(r.moves == 2);
}

TEST_CASE("a checkpoint of six groups written on three parameter servers "
          "restores onto two, and re-sharded onto a job of one group per "
          "server",
          "[cluster][e2e][groups]") {
  temp_dir dir{"actorps_groups"};
  auto cfg = grouped_job(3, 6);
  cfg.epochs = 1;
  cfg.checkpoint_dir = dir.path().string();
  auto first = run_grouped(cfg);
  auto latest = latest_checkpoint(cfg.checkpoint_dir);
  REQUIRE_FALSE(latest.empty());
  auto st = read_checkpoint(latest);
  CHECK(st.ps_clocks.size() == 6);
  CHECK(st.global_step == first.closures);
  // The same six groups on two servers: restored as they are.
  cfg.ps = 2;
  cfg.epochs = 2;
  auto on_two = run_grouped(cfg, true);
  CHECK(on_two.start_step == st.global_step);
  CHECK(on_two.updates_lost == 0);
  CHECK(on_two.job_pushes == 6 * on_two.job_closures);
  CHECK(on_two.epochs.size() == 1);
  // A job of two groups (one per server) from the checkpoint of six:
  // re-sharded offline (core/checkpoint_reshard.hpp), then trained on.
  cfg.groups = 0;
  cfg.epochs = 3;
  auto resharded = run_grouped(cfg, true);
  CHECK(resharded.groups == 2);
  CHECK(resharded.start_step == on_two.job_closures);
  CHECK(resharded.epochs.size() == 1);
  CHECK(resharded.pushes == 2 * resharded.closures);
}
