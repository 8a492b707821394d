#include "cluster/services/fit.hpp"

#include <random>
#include <utility>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cluster/services/fit_callbacks.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "models/registry.hpp"

using namespace actorps;

namespace {

/// 8 uniform features; the class is the arg-max of the first four.
std::shared_ptr<const dataset> argmax_data(uint64_t rows, uint32_t seed) {
  auto d = std::make_shared<dataset>();
  d->schema.dense_dim = 8;
  d->schema.classes = 4;
  d->examples.reset(8, 0);
  std::mt19937 rng{seed};
  std::uniform_real_distribution<float> u{0.0f, 1.0f};
  for (uint64_t i = 0; i < rows; ++i) {
    float best = -1;
    int32_t label = 0;
    for (int j = 0; j < 8; ++j) {
      auto x = u(rng);
      d->examples.dense.push_back(x);
      if (j < 4 && x > best)
        best = x, label = j;
    }
    d->examples.labels.push_back(label);
    ++d->examples.rows;
  }
  return d;
}

/// A small job: an MLP 8-16-4, 2 workers, 2 ps.
struct small_job {
  job_config cfg;
  std::shared_ptr<const dataset> train = argmax_data(2000, 1);
  std::shared_ptr<const dataset> test = argmax_data(500, 2);
  std::shared_ptr<const model> net;
  dataset_fn fn;

  small_job() {
    cfg.layers = {8, 16, 4};
    cfg.optimizer = optimizer_config{"adam", 0.01f, {}};
    net = make_model(cfg, train->schema);
    fn = [this](const input_context& ctx) {
      return std::make_shared<batch_iterator>(train, ctx, 16, 7);
    };
  }
};

/// Writes one letter per event: B(egin) e(poch begin) s(tep) p(ause)
/// E(poch end) T(rain end).
struct recorder : fit_callback {
  std::string events;
  uint64_t steps = 0;
  void on_train_begin(fit_state&) override {
    events += 'B';
  }
  void on_epoch_begin(fit_state&) override {
    events += 'e';
  }
  void on_step_end(fit_state&, const step_result&) override {
    ++steps;
  }
  void on_pause(fit_state&) override {
    events += 'p';
  }
  void on_epoch_end(fit_state&, epoch_metrics&) override {
    events += 'E';
  }
  void on_train_end(fit_state&) override {
    events += 'T';
  }
};

} // namespace

TEST_CASE("fit calls its callbacks in order: once per closure, pause and "
          "epoch",
          "[fit]") {
  small_job job;
  auto rec = std::make_shared<recorder>();
  fit_options opts;
  opts.epochs = 3;
  opts.steps_per_epoch = 5; // x 2 workers = 10 closures per epoch
  opts.callbacks = {rec};
  opts.validation_data = job.test;
  auto h = fit(job.cfg, job.net, job.fn, opts);
  CHECK(rec->events == "BepEepEepET");
  CHECK(rec->steps == 30);
  REQUIRE(h.epochs.size() == 3);
  CHECK(h.epochs[2].epoch == 3);
  CHECK(h.epochs[0].steps == 10);
  CHECK(h.progress.global_step == 30);
  CHECK(h.progress.epoch == 3);
  CHECK(h.samples == 30 * 16);
  CHECK_FALSE(h.stopped);
  // The test metrics of every epoch, the model's (test_loss first).
  REQUIRE(h.epochs[2].test.size() == 2);
  CHECK(h.epochs[2].test[0].first == "test_loss");
  CHECK(h.epochs[2].test_accuracy > 0.25); // better than chance
}

TEST_CASE("closures run in chunks that end at a callback's pauses, with "
          "none running there",
          "[fit]") {
  small_job job;
  // Asks for a pause every 7 global steps; records where pauses happen and
  // how many closures were unfinished then.
  struct every_seven : fit_callback {
    std::vector<uint64_t> at;
    uint64_t unfinished = 0;
    uint64_t next_pause(const fit_state& st) const override {
      return st.progress.global_step + 7 - st.progress.global_step % 7;
    }
    void on_pause(fit_state& st) override {
      at.push_back(st.progress.global_step);
      auto c = st.cl->coordinator().counts();
      unfinished += c.scheduled - c.finished - c.failed - c.cancelled;
    }
  };
  auto cb = std::make_shared<every_seven>();
  fit_options opts;
  opts.epochs = 3;
  opts.steps_per_epoch = 5;
  opts.callbacks = {cb};
  fit(job.cfg, job.net, job.fn, opts);
  // Epochs end at 10, 20, 30; pauses also at the multiples of 7.
  CHECK(cb->at == std::vector<uint64_t>{7, 10, 14, 20, 21, 28, 30});
  CHECK(cb->unfinished == 0);
}

TEST_CASE("early stopping stops once a monitored metric has not improved "
          "for patience epochs",
          "[fit][early_stopping]") {
  small_job job;
  // A metric set by a callback: it improves until epoch 2, then stalls.
  auto metric = std::make_shared<lambda_callback>();
  metric->epoch_end = [](fit_state&, epoch_metrics& m) {
    const double values[] = {3.0, 2.0, 2.5, 2.2, 1.0, 0.5};
    m.test.emplace_back("made_up", values[(m.epoch - 1) % 6]);
  };
  auto stop = std::make_shared<early_stopping>("made_up", 2);
  fit_options opts;
  opts.epochs = 6;
  opts.steps_per_epoch = 2;
  opts.callbacks = {metric, stop};
  auto h = fit(job.cfg, job.net, job.fn, opts);
  CHECK(h.epochs.size() == 4); // epochs 3 and 4 did not improve on 2.0
  CHECK(h.stopped);
  CHECK_THAT(h.stop_reason, Catch::Contains("made_up"));
  CHECK(stop->best() == 2.0);
  CHECK(stop->best_epoch() == 2);
  CHECK(h.progress.epoch == 4);
}

TEST_CASE("early stopping on the test loss with a min_delta nothing reaches "
          "stops after the patience",
          "[fit][early_stopping]") {
  small_job job;
  SECTION("test_loss, minimized") {
    fit_options opts;
    opts.epochs = 5;
    opts.steps_per_epoch = 5;
    opts.validation_data = job.test;
    opts.callbacks = {std::make_shared<early_stopping>("test_loss", 1, 100.0)};
    auto h = fit(job.cfg, job.net, job.fn, opts);
    CHECK(h.epochs.size() == 2);
    CHECK(h.stopped);
  }
  SECTION("test_accuracy, maximized: a fall is no improvement") {
    auto fall = std::make_shared<lambda_callback>();
    fall->epoch_end = [](fit_state&, epoch_metrics& m) {
      m.test.emplace_back("fake_accuracy", 1.0 - 0.1 * m.epoch);
    };
    fit_options opts;
    opts.epochs = 5;
    opts.steps_per_epoch = 2;
    opts.callbacks = {fall, std::make_shared<early_stopping>("fake_accuracy",
                                                             0)};
    auto h = fit(job.cfg, job.net, job.fn, opts);
    CHECK(h.epochs.size() == 2);
  }
}

TEST_CASE("closures a callback cancels are not counted, and the epoch is "
          "completed with new ones",
          "[fit]") {
  small_job job;
  // Cancels the queued and running closures once, while the first chunk of
  // 1000 closures runs (it looks every millisecond).
  struct canceller : fit_callback {
    bool done = false;
    std::chrono::milliseconds poll_interval(const fit_state&) const override {
      return std::chrono::milliseconds(1);
    }
    void on_wait(fit_state& st, uint64_t) override {
      if (!std::exchange(done, true))
        st.cl->coordinator().cancel();
    }
  };
  auto rec = std::make_shared<recorder>();
  fit_options opts;
  opts.epochs = 2;
  opts.steps_per_epoch = 500;
  opts.callbacks = {std::make_shared<canceller>(), rec};
  uint64_t cancelled = 0;
  auto counts = std::make_shared<lambda_callback>();
  counts->train_end = [&](fit_state& st) {
    cancelled = st.cl->coordinator().counts().cancelled;
  };
  opts.callbacks.push_back(counts);
  auto h = fit(job.cfg, job.net, job.fn, opts);
  REQUIRE(cancelled > 0);
  REQUIRE(h.epochs.size() == 2);
  CHECK(h.epochs[0].steps == 1000); // finished ones only
  CHECK(h.epochs[1].steps == 1000);
  CHECK(h.progress.global_step == 2000);
  CHECK(rec->steps == 2000);
  CHECK(rec->events.substr(0, 4) == "Bepp"); // a second chunk in epoch 1
}

TEST_CASE("fit refuses what it cannot do, naming it", "[fit]") {
  small_job job;
  fit_options opts;
  opts.epochs = 2;
  opts.steps_per_epoch = 2;
  opts.callbacks = {std::make_shared<early_stopping>("test_auc", 1)};
  try {
    fit(job.cfg, job.net, job.fn, opts); // no validation data: no test_auc
    FAIL("no error");
  } catch (const input_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("\"test_auc\"")
                           && Catch::Contains("train_loss"));
  }
  opts.callbacks.clear();
  opts.epochs = 0;
  CHECK_THROWS_AS(fit(job.cfg, job.net, job.fn, opts), input_error);
  opts.epochs = 1;
  opts.steps_per_epoch = 0;
  CHECK_THROWS_AS(fit(job.cfg, job.net, job.fn, opts), input_error);
  CHECK_THROWS_AS(early_stopping("", 1), input_error);
  CHECK_THROWS_AS(early_stopping("test_loss", 1, -0.5), input_error);
}
