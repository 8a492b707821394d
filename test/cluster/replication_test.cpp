// Replicated parameter servers in one process: a killed ps fails
// over to its backup with no update lost or applied twice, under every
// consistency mode and with embedding tables; with both copies gone the job
// falls back to the newest checkpoint and reports what it lost.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include "cluster/topology/trainer.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"

using namespace actorps;
namespace fs = std::filesystem;

namespace {

/// data/movielens, or, where it has no export yet (a fresh clone), a folder
/// of this test's own with one made by scripts/export_movielens.sh.
std::string movielens_dir() {
  std::string shipped = ACTORPS_SOURCE_DIR "/data/movielens";
  if (fs::exists(shipped + "/movielens.csv"))
    return shipped;
  // Removed when the test program exits.
  struct export_dir {
    fs::path path = fs::temp_directory_path()
                    / ("actorps-replication-movielens-"
                       + std::to_string(getpid()));
    ~export_dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static export_dir made;
  if (!fs::exists(made.path / "movielens.csv")) {
    auto cmd = "bash " ACTORPS_SOURCE_DIR "/scripts/export_movielens.sh "
               + made.path.string() + " >/dev/null";
    if (std::system(cmd.c_str()) != 0)
      FAIL("scripts/export_movielens.sh failed (r-cran-dslabs installed?)");
  }
  return made.path.string();
}

job_config replicated_job(const std::string& config = "fashion_mnist") {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/" + config
                             + ".json");
  if (config == "movielens")
    cfg.data_dir = movielens_dir();
  cfg.train_limit = config == "movielens" ? 20000 : 2560;
  cfg.test_limit = 1000;
  cfg.epochs = 2;
  cfg.replicas = 1;
  return cfg;
}

train_report run(const job_config& cfg) {
  train_options opts;
  opts.out = nullptr;
  return train(cfg, opts);
}

/// Every closure's push reached every server exactly once: none lost to the
/// failover, none applied twice.
void check_exactly_once(const train_report& r, uint32_t ps) {
  CHECK(r.closures == r.scheduled);
  CHECK(r.updates_lost == 0);
  CHECK(r.pushes == uint64_t{ps} * r.closures);
}

} // namespace

TEST_CASE("with replicas, a killed ps fails over to its backup: no update "
          "lost or applied twice, and the loss still falls",
          "[cluster][e2e][replication]") {
  for (auto mode : {"async", "sync", "ssp"}) {
    INFO("mode " << mode);
    auto cfg = replicated_job();
    cfg.mode = mode;
    cfg.staleness = 2;
    cfg.faults = {parse_fault("kill:ps:0@15")};
    auto r = run(cfg);
    REQUIRE(r.epochs.size() == 2);
    check_exactly_once(r, 2);
    CHECK(r.epochs[1].train_loss < r.epochs[0].train_loss);
    CHECK(r.epochs[1].test_accuracy > 0.5);
  }
}

TEST_CASE("with replicas, embedding-table rows survive a killed ps",
          "[cluster][e2e][replication]") {
  auto cfg = replicated_job("movielens");
  cfg.faults = {parse_fault("kill:ps:1@20")};
  auto r = run(cfg);
  REQUIRE(r.epochs.size() == 2);
  check_exactly_once(r, 2);
  CHECK(r.table_rows > 0);
  CHECK(r.epochs[1].train_loss < r.epochs[0].train_loss);
}

TEST_CASE("with async replication, a killed ps fails over too and loses at "
          "most the lag of acknowledged updates, all accounted for",
          "[cluster][e2e][replication]") {
  for (uint32_t lag : {1u, 16u}) {
    INFO("replication_lag " << lag);
    auto cfg = replicated_job();
    cfg.replication = "async";
    cfg.replication_lag = lag;
    cfg.faults = {parse_fault("kill:ps:0@15")};
    auto r = run(cfg);
    REQUIRE(r.epochs.size() == 2);
    CHECK(r.closures == r.scheduled);
    // One group lost its primary: what its backup had not applied is gone,
    // at most `lag` updates, and counted.
    CHECK(r.updates_lost <= lag);
    CHECK(r.pushes + r.updates_lost == 2 * r.closures);
    CHECK(r.epochs[1].train_loss < r.epochs[0].train_loss);
  }
}

TEST_CASE("with both copies of a group killed, the job restores it from the "
          "newest checkpoint and reports the updates lost",
          "[cluster][e2e][replication]") {
  auto dir = fs::temp_directory_path()
             / ("actorps_replication_test_ckpt_" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto cfg = replicated_job();
  cfg.checkpoint_dir = dir.string();
  cfg.checkpoint_every_steps = 10;
  cfg.faults = {parse_fault("kill:ps:0@25"), parse_fault("kill:ps:1@25")};
  auto r = run(cfg);
  REQUIRE(r.epochs.size() == 2);
  CHECK(r.closures == r.scheduled);
  CHECK(r.updates_lost > 0);
  // What was lost is accounted for: applied + lost = one push per server
  // and closure.
  CHECK(r.pushes + r.updates_lost == 2 * r.closures);
  fs::remove_all(dir);
}

TEST_CASE("with both copies killed and no checkpoint, the job fails naming "
          "the variables it lost",
          "[cluster][e2e][replication]") {
  auto cfg = replicated_job();
  cfg.faults = {parse_fault("kill:ps:0@15"), parse_fault("kill:ps:1@15")};
  CHECK_THROWS_WITH(run(cfg),
                    Catch::Contains("were lost (no live copy) and cannot be "
                                    "restored")
                      && Catch::Contains("dense_0/kernel"));
}
