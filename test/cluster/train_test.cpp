#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "caf/actor_system.hpp"

#include "cluster/topology/local_cluster.hpp"
#include "cluster/topology/trainer.hpp"
#include "core/staleness_histogram.hpp"
#include "core/dataset.hpp"
#include "models/registry.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"

using namespace actorps;
namespace fs = std::filesystem;

namespace {

job_config short_job() {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/fashion_mnist.json");
  cfg.train_limit = 2000;
  cfg.test_limit = 1000;
  cfg.epochs = 2;
  return cfg;
}

} // namespace

TEST_CASE("a short Fashion-MNIST run in one process lowers the loss",
          "[cluster][e2e]") {
  auto cfg = short_job();
  auto metrics = fs::temp_directory_path() / "actorps_train_test.jsonl";
  fs::remove(metrics);
  train_options opts;
  opts.out = nullptr;
  opts.metrics_out = metrics.string();
  auto report = train(cfg, opts);
  REQUIRE(report.epochs.size() == 2);
  // 2000 rows / (64 x 2 workers) = 15 steps per worker and epoch.
  CHECK(report.epochs[0].steps == 30);
  CHECK(report.epochs[1].train_loss < report.epochs[0].train_loss);
  // Initial loss of a 10-class softmax is about ln(10) = 2.30.
  CHECK(report.epochs[1].test_loss < 1.5);
  CHECK(report.epochs[1].test_accuracy > 0.5);
  CHECK(report.pushes == 2 * 60); // 60 closures, each pushing to 2 servers
  // Staleness: the histogram holds every push once, and the mean lies
  // within the bounds its buckets allow (staleness_bounds); a push to a
  // shard is stale by at most the 59 pushes that shard applied before it.
  REQUIRE(report.staleness_histogram.size() == staleness_buckets);
  uint64_t counted = 0;
  double low = 0, high = 0;
  for (size_t i = 0; i < staleness_buckets; ++i) {
    auto n = report.staleness_histogram[i];
    counted += n;
    low += n * double(i == 0 ? 0 : staleness_bounds[i - 1] + 1);
    high += n * double(i < staleness_bounds.size() ? staleness_bounds[i]
                                                   : report.max_staleness);
  }
  CHECK(counted == report.pushes);
  CHECK(report.mean_staleness >= low / counted - 1e-9);
  CHECK(report.mean_staleness <= high / counted + 1e-9);
  CHECK(report.mean_staleness <= double(report.max_staleness));
  CHECK(report.max_staleness < 60);
  // The metrics file: one line per epoch, then the final object.
  std::ifstream in{metrics};
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0]["epoch"] == 1);
  auto& last = lines.back();
  CHECK(last["type"] == "final");
  CHECK(last["test_accuracy"].get<double>()
        == Approx(report.epochs[1].test_accuracy));
  CHECK(last["epochs"] == 2);
  CHECK(last["workers"] == 2);
  CHECK(last["ps"] == 2);
  CHECK(last.contains("mean_staleness"));
  CHECK(last["samples_per_sec"].get<double>() > 0);
  CHECK_FALSE(fs::exists(metrics.string() + ".tmp"));
  fs::remove(metrics);
}

TEST_CASE("a missing dataset is an input error and leaves no metrics file",
          "[cluster][e2e]") {
  auto cfg = short_job();
  auto dir = fs::temp_directory_path() / "actorps_no_such_data_dir";
  cfg.data_dir = dir.string();
  auto metrics = fs::temp_directory_path() / "actorps_missing_data.jsonl";
  {
    std::ofstream old{metrics};
    old << "{\"earlier\": true}\n";
  }
  train_options opts;
  opts.out = nullptr;
  opts.metrics_out = metrics.string();
  CHECK_THROWS_WITH(train(cfg, opts),
                    Catch::Contains("train-images-idx3-ubyte.gz"));
  CHECK_FALSE(fs::exists(metrics.string() + ".tmp"));
  // An older file of that name is left as it was.
  std::ifstream in{metrics};
  std::string line;
  std::getline(in, line);
  CHECK(line == "{\"earlier\": true}");
  fs::remove(metrics);
}

TEST_CASE("a batch larger than a worker's shard is an input error",
          "[cluster][e2e]") {
  auto cfg = short_job();
  cfg.batch_size = 1500; // 2000 rows over 2 workers: 1000 per shard
  train_options opts;
  opts.out = nullptr;
  CHECK_THROWS_AS(train(cfg, opts), input_error);
  CHECK_THROWS_WITH(train(cfg, opts), Catch::Contains("batch_size"));
}

TEST_CASE("a job whose loss explodes fails saying why and what to try, "
          "staleness-aware steps or the guard off let it run",
          "[cluster][e2e][divergence]") {
  auto cfg = short_job();
  cfg.train_limit = 12000;
  cfg.workers = 32; // 32 async workers: pushes about 31 updates stale
  cfg.optimizer.learning_rate = 0.003f; // adam, 3x the config's
  // From 32 async workers on, staleness-aware steps are the default.
  auto resolved = cfg;
  resolve_staleness_aware(resolved);
  CHECK(resolved.optimizer.staleness_aware);
  cfg.optimizer.staleness_aware_chosen = true; // plain steps, as chosen
  train_options opts;
  opts.out = nullptr;
  CHECK_THROWS_WITH(train(cfg, opts),
                    Catch::Contains("training diverged")
                      && Catch::Contains("32 here")
                      && Catch::Contains("staleness_aware"));
  auto aware = cfg;
  aware.optimizer.staleness_aware = true;
  auto r = train(aware, opts);
  REQUIRE(r.epochs.size() == 2);
  // It learns: 3x chance on the test set. (The mean training loss over
  // epoch 2, once asserted below ln(10), ended at 2.37 in one loaded CI
  // run: with 32 workers on 2 cores the epoch mean moves by tenths.)
  CHECK(std::isfinite(r.epochs[1].train_loss));
  CHECK(r.epochs[1].test_accuracy > 0.3);
  cfg.divergence_factor = 0;
  auto unguarded = train(cfg, opts);
  CHECK(unguarded.epochs.size() == 2);
}

TEST_CASE("early stopping from the job config ends training when the "
          "monitored metric stops improving",
          "[cluster][e2e]") {
  auto cfg = short_job();
  cfg.epochs = 6;
  cfg.early_stopping_monitor = "train_loss";
  cfg.early_stopping_patience = 1;
  // No epoch can lower the loss by 100: epoch 1 improves on nothing, epoch
  // 2 does not improve, and training stops there.
  cfg.early_stopping_min_delta = 100;
  train_options opts;
  opts.out = nullptr;
  auto r = train(cfg, opts);
  CHECK(r.epochs.size() == 2);
  cfg.early_stopping_monitor = "no_such_metric";
  CHECK_THROWS_WITH(train(cfg, opts), Catch::Contains("no_such_metric"));
}

TEST_CASE("short runs under sync and ssp lower the loss", "[cluster][e2e]") {
  for (auto mode : {"sync", "ssp"}) {
    auto cfg = short_job();
    cfg.mode = mode;
    cfg.staleness = 1;
    train_options opts;
    opts.out = nullptr;
    auto report = train(cfg, opts);
    INFO("mode " << mode);
    REQUIRE(report.epochs.size() == 2);
    CHECK(report.epochs[1].train_loss < report.epochs[0].train_loss);
    CHECK(report.epochs[1].test_accuracy > 0.5);
    CHECK(report.pushes == 2 * 60);
    if (std::string{mode} == "sync") {
      // Every push of a round is read at the round's clock.
      CHECK(report.max_staleness == 0);
    }
  }
}

TEST_CASE("under sync, join returns when the closures are not a multiple of "
          "the workers",
          "[cluster][e2e][sync]") {
  // 5 closures on 2 workers: the last round has one push per server; it is
  // closed by the round timeout (here 200 ms) instead of waiting forever for
  // a push that never comes.
  auto cfg = short_job();
  cfg.mode = "sync";
  cfg.sync_round_timeout_ms = 200;
  auto data = std::make_shared<const dataset>(
    load_fashion_mnist(cfg.data_dir, "train", 2000));
  dataset_fn fn = [&](const input_context& ctx) {
    return std::make_shared<batch_iterator>(data, ctx, cfg.batch_size, 1);
  };
  system_config sys_cfg{2};
  caf::actor_system sys{sys_cfg};
  {
    local_cluster cluster{sys, cfg, make_model(cfg, data->schema), fn};
    auto& coord = cluster.coordinator();
    std::vector<remote_value> results;
    for (int i = 0; i < 5; ++i)
      results.push_back(coord.schedule(train_step_name));
    // A bounded wait: a hang fails the test instead of reaching ctest's
    // limit.
    REQUIRE(coord.join_for(std::chrono::seconds(20)));
    for (auto& rv : results)
      CHECK(rv.fetch().samples == cfg.batch_size);
    uint64_t pushes = 0;
    for (auto& s : cluster.stats())
      pushes += s.pushes;
    CHECK(pushes == 2 * 5);
  }
}
