#include "cluster/job/stop_request.hpp"

#include <chrono>
#include <filesystem>
#include <memory>

#include <signal.h>

#include <catch2/catch.hpp>

#include "cluster/services/checkpointer.hpp"
#include "cluster/services/fit.hpp"
#include "cluster/topology/trainer.hpp"
#include "core/checkpoint.hpp"
#include "core/job_config.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;
using actorps::test::temp_dir;

namespace {

/// Asks for a stop once `at` closures of the run have finished, as a
/// SIGTERM arriving mid-epoch would.
class stop_at : public fit_callback {
public:
  explicit stop_at(uint64_t at) : at_(at) {
    // nop
  }

  void on_step_end(fit_state&, const step_result&) override {
    if (++seen_ == at_)
      request_stop();
  }

  /// Often, so that the request meets closures still queued (the cancel).
  std::chrono::milliseconds poll_interval(const fit_state&) const override {
    return std::chrono::milliseconds(1);
  }

private:
  uint64_t at_;
  uint64_t seen_ = 0;
};

job_config short_job(const std::string& checkpoint_dir) {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/fashion_mnist.json");
  cfg.train_limit = 2000;
  cfg.test_limit = 500;
  cfg.epochs = 2;
  cfg.checkpoint_dir = checkpoint_dir;
  return cfg;
}

} // namespace

TEST_CASE("SIGTERM and SIGUSR1 request a stop, and a second one does not "
          "kill",
          "[stop]") {
  for (auto sig : {SIGTERM, SIGUSR1}) {
    clear_stop_request();
    stop_on_signals();
    REQUIRE_FALSE(stop_requested());
    ::raise(sig);
    CHECK(stop_requested());
    // Slurm may send several (slurmd, and srun passing its own on): the
    // process lives on to write its checkpoint.
    ::raise(sig);
    CHECK(stop_requested());
    clear_stop_request();
    CHECK_FALSE(stop_requested());
  }
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGTERM, &dfl, nullptr);
  ::sigaction(SIGUSR1, &dfl, nullptr);
}

TEST_CASE("a stop requested mid-epoch writes a checkpoint that --resume "
          "finishes from, every closure counted once",
          "[stop][cluster]") {
  temp_dir dir{"actorps_stop"};
  auto dir_path = dir.path().string();
  auto cfg = short_job(dir_path);
  // 6400 rows / (64 x 2 workers): 50 steps per worker, 100 closures an
  // epoch, 200 in all.
  cfg.train_limit = 6400;
  train_options opts;
  opts.out = nullptr;
  opts.callbacks.push_back(std::make_shared<stop_at>(40));
  clear_stop_request();
  uint64_t stopped_at = 0;
  try {
    train(cfg, opts);
    FAIL("train returned although a stop was requested");
  } catch (const stopped_on_request& e) {
    stopped_at = e.global_step();
    CHECK(e.checkpoint_dir() == dir_path);
    CHECK_THAT(std::string{e.what()}, Catch::Contains("continue with --resume"));
  }
  clear_stop_request();
  // Closures already running when the request was seen may finish, queued
  // ones are cancelled (had the epoch's closures all finished first, the
  // stop comes at the next epoch's start: step 100).
  CHECK(stopped_at >= 40);
  CHECK(stopped_at <= 100);
  auto latest = latest_checkpoint(dir_path);
  REQUIRE_FALSE(latest.empty());
  auto st = read_checkpoint(latest);
  CHECK(st.global_step == stopped_at);
  CHECK(st.epoch * 100 + st.step_in_epoch == stopped_at);
  // Every applied push is in the checkpoint's clocks: one per closure and
  // server (async mode).
  for (auto clock : st.ps_clocks)
    CHECK(clock == stopped_at);
  train_options resume;
  resume.out = nullptr;
  resume.resume = true;
  auto report = train(cfg, resume);
  CHECK(report.start_step == stopped_at);
  CHECK(report.job_closures == 200);
  CHECK(report.closures == 200 - stopped_at);
  CHECK(report.job_pushes == 2 * 200);
}

TEST_CASE("a stop without a checkpoint directory says the job cannot resume",
          "[stop][cluster]") {
  auto cfg = short_job("");
  train_options opts;
  opts.out = nullptr;
  opts.callbacks.push_back(std::make_shared<stop_at>(5));
  clear_stop_request();
  try {
    train(cfg, opts);
    FAIL("train returned although a stop was requested");
  } catch (const stopped_on_request& e) {
    CHECK(e.checkpoint_dir().empty());
    CHECK_THAT(std::string{e.what()}, Catch::Contains("cannot resume"));
  }
  clear_stop_request();
}
