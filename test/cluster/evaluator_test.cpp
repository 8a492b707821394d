#include "cluster/topology/evaluator.hpp"

#include <catch2/catch.hpp>

#include "cluster/topology/local_cluster.hpp"
#include "cluster/topology/trainer.hpp"
#include "core/data_registry.hpp"
#include "core/job_config.hpp"
#include "models/registry.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

namespace {

/// Trains `cfg` in one process with a checkpoint at every epoch end, then
/// evaluates the last checkpoint (written after the last evaluation, with
/// nothing trained in between) in this process: its metrics must be the
/// ones the coordinator computed on the servers' values.
void same_metrics_as_the_servers(job_config cfg, bool last_is_delta = false) {
  test::temp_dir dir{"actorps_evaluator"};
  cfg.checkpoint_dir = dir.file("ck");
  train_options opts;
  opts.out = nullptr;
  auto report = train(cfg, opts);
  auto last = latest_checkpoint(cfg.checkpoint_dir);
  REQUIRE_FALSE(last.empty());
  CHECK(read_checkpoint_dir(last).delta == last_is_delta);
  auto st = read_checkpoint(last);
  CHECK(st.epoch == cfg.epochs);
  auto data = open_dataset(cfg);
  auto net = make_model(cfg, data->schema());
  auto layout = job_placement(cfg, *net);
  auto m = evaluate_checkpoint(st, layout, *net, cfg, *data->test_set(), 2);
  auto& servers = report.epochs.back().test;
  REQUIRE(m.size() == servers.size());
  for (size_t i = 0; i < m.size(); ++i) {
    INFO(m[i].first);
    CHECK(m[i].first == servers[i].first);
    CHECK(m[i].second == Approx(servers[i].second).epsilon(1e-6));
  }
}

} // namespace

TEST_CASE("a checkpoint evaluated in-process gives the servers' metrics: "
          "dense variables",
          "[evaluator]") {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/fashion_mnist.json");
  cfg.train_limit = 1000;
  cfg.test_limit = 500;
  cfg.epochs = 1;
  same_metrics_as_the_servers(cfg);
}

TEST_CASE("a checkpoint evaluated in-process gives the servers' metrics: "
          "table rows, and initial rows for keys no push touched",
          "[evaluator]") {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/a9a.json");
  cfg.data_dir = ACTORPS_SOURCE_DIR "/data/a9a";
  // Few training rows: the test set uses keys the training never touched.
  cfg.train_limit = 256;
  cfg.test_limit = 2000;
  cfg.epochs = 1;
  same_metrics_as_the_servers(cfg);
}

TEST_CASE("a chain of delta checkpoints evaluated in-process gives the "
          "servers' metrics: the chain replays to the servers' table rows",
          "[evaluator][checkpoint]") {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/a9a.json");
  cfg.data_dir = ACTORPS_SOURCE_DIR "/data/a9a";
  cfg.train_limit = 512;
  cfg.test_limit = 2000;
  cfg.epochs = 4; // a full checkpoint, then three deltas
  cfg.delta_checkpoints = 4;
  cfg.keep_checkpoints = 1;
  same_metrics_as_the_servers(cfg, true);
}
