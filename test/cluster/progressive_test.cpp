#include "cluster/services/progressive.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "cluster/services/fit.hpp"
#include "cluster/topology/trainer.hpp"
#include "core/job_config.hpp"
#include "core/stream_gen.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

// Every expected number here is computed in this file from the scores and
// labels themselves: the log loss by its formula, the AUC by counting pairs.
// Nothing calls binary_log_loss or roc_auc.

namespace {

/// log(1 + e^z) - y z, the log loss of logit z for label y (|z| small here).
double log_loss(double z, int32_t y) {
  return std::log(1.0 + std::exp(z)) - double(y) * z;
}

/// Positive-negative pairs ordered right, ties one half, over all pairs.
double pair_auc(const std::vector<float>& z, const std::vector<int32_t>& y) {
  double right = 0;
  double pairs = 0;
  for (size_t i = 0; i < z.size(); ++i)
    for (size_t j = 0; j < z.size(); ++j)
      if (y[i] == 1 && y[j] == 0) {
        pairs += 1;
        right += z[i] > z[j] ? 1.0 : z[i] == z[j] ? 0.5 : 0.0;
      }
  return pairs == 0 ? 0.5 : right / pairs;
}

double mean_loss(const std::vector<float>& z, const std::vector<int32_t>& y) {
  double sum = 0;
  for (size_t i = 0; i < z.size(); ++i)
    sum += log_loss(z[i], y[i]);
  return sum / double(z.size());
}

/// A closure's result as a worker reports it: its examples' logits and
/// labels, and its minibatch loss (the mean over its examples).
step_result closure(std::vector<float> z, std::vector<int32_t> y) {
  step_result r;
  r.samples = z.size();
  r.loss = mean_loss(z, y);
  r.scores = std::move(z);
  r.labels = std::move(y);
  return r;
}

/// The examples of several closures, in order.
struct examples {
  std::vector<float> z;
  std::vector<int32_t> y;

  examples(std::initializer_list<const step_result*> rs) {
    for (auto* r : rs) {
      z.insert(z.end(), r->scores.begin(), r->scores.end());
      y.insert(y.end(), r->labels.begin(), r->labels.end());
    }
  }
};

double metric(const metric_list& m, const std::string& name) {
  for (auto& [key, value] : m)
    if (key == name)
      return value;
  FAIL("no metric " << name);
  return 0;
}

} // namespace

TEST_CASE("a part's progressive loss is the mean log loss per example and "
          "its AUC counts every positive-negative pair, ties one half",
          "[progressive]") {
  SECTION("by hand: four examples in two closures") {
    // Positives 0 and 2, negatives 0 and -1: the pairs (0, 0) tie, the
    // other three are ordered right: AUC 3.5 / 4. Losses: ln 2 twice,
    // ln(1 + e^-2) and ln(1 + e^-1).
    eval_accumulator acc;
    add_predictions(acc, closure({0.0f, 0.0f}, {1, 0}));
    add_predictions(acc, closure({2.0f, -1.0f}, {1, 0}));
    auto m = progressive_metrics(acc);
    REQUIRE(m.size() == 2);
    CHECK(m[0].first == "progressive_loss");
    CHECK(m[1].first == "progressive_auc");
    CHECK(m[1].second == Approx(0.875).margin(1e-12));
    auto expected = (2 * std::log(2.0) + std::log1p(std::exp(-2.0))
                     + std::log1p(std::exp(-1.0)))
                    / 4;
    CHECK(m[0].second == Approx(expected).margin(1e-12));
    CHECK(m[0].second == Approx(0.4566211).margin(1e-6));
  }
  SECTION("closures of different sizes weigh by their examples") {
    auto a = closure({1.5f}, {0});                        // 1 example
    auto b = closure({0.3f, -0.2f, 2.0f, -1.0f, 0.3f},    // 5, a tie
                     {1, 0, 1, 0, 0});
    auto c = closure({-0.5f, 0.8f, 0.3f}, {1, 1, 0});     // ties with b
    eval_accumulator acc;
    for (auto* r : {&a, &b, &c})
      add_predictions(acc, *r);
    CHECK(acc.count == 9);
    examples all{&a, &b, &c};
    auto m = progressive_metrics(acc);
    auto loss = metric(m, "progressive_loss");
    CHECK(loss == Approx(mean_loss(all.z, all.y)).margin(1e-12));
    // The mean of the closures' means is another number: these closures
    // tell the two apart.
    auto of_means = (a.loss + b.loss + c.loss) / 3;
    CHECK(std::abs(loss - of_means) > 0.05);
    CHECK(metric(m, "progressive_auc")
          == Approx(pair_auc(all.z, all.y)).margin(1e-12));
  }
  SECTION("one class only: AUC one half; no scores: no metrics") {
    eval_accumulator acc;
    add_predictions(acc, closure({0.4f, -2.0f}, {1, 1}));
    CHECK(metric(progressive_metrics(acc), "progressive_auc") == 0.5);
    CHECK(progressive_metrics(eval_accumulator{}).empty());
  }
}

TEST_CASE("progressive windows close with the closure that fills them and "
          "run on across closures and parts",
          "[progressive]") {
  // Two parts of three closures (3, 4, 2 and 3, 3, 1 examples), handed out
  // in this order, windows of 5 examples: window 1 is closures 1-2 (7
  // examples), window 2 closures 3-4 (5, across the parts' boundary), and
  // closures 5-6 (4) stay open.
  auto c1 = closure({0.9f, -0.4f, 0.1f}, {1, 0, 0});
  auto c2 = closure({0.2f, 0.2f, -1.3f, 1.1f}, {0, 1, 1, 1});
  auto c3 = closure({-0.7f, 0.5f}, {0, 1});
  auto c4 = closure({0.0f, 1.7f, -0.1f}, {1, 0, 0});
  auto c5 = closure({1.6f, -0.6f, 0.6f}, {1, 0, 1});
  auto c6 = closure({2.2f}, {1});
  progressive_windows w{5};
  std::vector<window_metrics> closed;
  for (auto* r : {&c1, &c2, &c3, &c4, &c5, &c6}) {
    auto m = w.add(*r);
    if (m)
      closed.push_back(*m);
  }
  REQUIRE(closed.size() == 2);
  CHECK(w.windows() == 2);
  CHECK(w.examples() == 12);
  CHECK(w.open_examples() == 4);
  examples first{&c1, &c2};
  examples second{&c3, &c4};
  CHECK(closed[0].window == 1);
  CHECK(closed[0].first_example == 0);
  CHECK(closed[0].examples == 7);
  CHECK(closed[0].loss == Approx(mean_loss(first.z, first.y)).margin(1e-12));
  CHECK(closed[0].auc == Approx(pair_auc(first.z, first.y)).margin(1e-12));
  CHECK(closed[1].window == 2);
  CHECK(closed[1].first_example == 7);
  CHECK(closed[1].examples == 5);
  CHECK(closed[1].loss == Approx(mean_loss(second.z, second.y)).margin(1e-12));
  CHECK(closed[1].auc == Approx(pair_auc(second.z, second.y)).margin(1e-12));
  // The window across the boundary is neither part: part 1 (closures 1-3)
  // and part 2 (closures 4-6) have other numbers.
  examples part1{&c1, &c2, &c3};
  examples part2{&c4, &c5, &c6};
  CHECK(std::abs(closed[1].auc - pair_auc(part1.z, part1.y)) > 0.05);
  CHECK(std::abs(closed[1].auc - pair_auc(part2.z, part2.y)) > 0.05);
  SECTION("the next window starts where the last one closed") {
    auto c7 = closure({0.6f}, {0}); // ties with a positive of c5
    auto m = w.add(c7);
    REQUIRE(m);
    examples third{&c5, &c6, &c7};
    CHECK(m->window == 3);
    CHECK(m->first_example == 12);
    CHECK(m->examples == 5);
    CHECK(m->loss == Approx(mean_loss(third.z, third.y)).margin(1e-12));
    CHECK(m->auc == Approx(pair_auc(third.z, third.y)).margin(1e-12));
  }
  SECTION("size 0: no windows") {
    progressive_windows none;
    for (auto* r : {&c1, &c2, &c3})
      CHECK_FALSE(none.add(*r));
    CHECK(none.windows() == 0);
  }
}

TEST_CASE("fit's progressive metrics per part and per window are those of "
          "its closures' own predictions, in handing-out order",
          "[progressive][cluster][e2e]") {
  // 3 parts of 1,000 examples, batches of 256 (4 closures a part: 256, 256,
  // 256, 232), windows of 700 examples: 768 (part 1's first 3 closures),
  // then 744, 744 and 744 (the 2nd and 3rd across a part's end).
  test::temp_dir dir{"progressive_test"};
  stream_gen_config gen;
  gen.out = dir.file("parts");
  gen.parts = 3;
  gen.rows_per_part = 1000;
  gen.new_id_rate = 0.02;
  gen.drift = 100;
  gen.ctr.seed = 9;
  generate_stream(gen);
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/stream_ctr.json");
  cfg.stream_dir = gen.out;
  cfg.stream_end_after = 3;
  cfg.batch_size = 256;
  cfg.progressive_window = 700;
  struct recorder : fit_callback {
    std::vector<step_result> closures;
    std::vector<window_metrics> windows;
    void on_step_end(fit_state&, const step_result& r) override {
      closures.push_back(r);
    }
    void on_window(fit_state&, const window_metrics& w) override {
      windows.push_back(w);
    }
  };
  auto rec = std::make_shared<recorder>();
  train_options opts;
  opts.out = nullptr;
  opts.callbacks.push_back(rec);
  auto report = train(cfg, opts);
  REQUIRE(report.epochs.size() == 3);
  REQUIRE(rec->closures.size() == 12);
  // A closure's data position is (part, end of its rows): handing-out order.
  auto& cs = rec->closures;
  std::sort(cs.begin(), cs.end(), [](auto& a, auto& b) {
    return std::make_pair(a.data_epoch, a.data_offset)
           < std::make_pair(b.data_epoch, b.data_offset);
  });
  // Each closure's loss is the mean log loss of its own scores.
  for (auto& r : cs) {
    REQUIRE(r.scores.size() == r.samples);
    CHECK(r.loss == Approx(mean_loss(r.scores, r.labels)).margin(1e-9));
  }
  auto part_of = [&](size_t p) {
    std::vector<float> z;
    std::vector<int32_t> y;
    for (size_t i = 4 * p; i < 4 * p + 4; ++i) {
      z.insert(z.end(), cs[i].scores.begin(), cs[i].scores.end());
      y.insert(y.end(), cs[i].labels.begin(), cs[i].labels.end());
    }
    return std::make_pair(z, y);
  };
  for (size_t p = 0; p < 3; ++p) {
    INFO("part " << p + 1);
    auto [z, y] = part_of(p);
    REQUIRE(z.size() == 1000);
    auto& m = report.epochs[p];
    CHECK(metric(m.test, "progressive_loss")
          == Approx(mean_loss(z, y)).margin(1e-9));
    CHECK(metric(m.test, "progressive_auc")
          == Approx(pair_auc(z, y)).margin(1e-9));
  }
  // The windows: whole closures in order, closed at 700 examples or more.
  REQUIRE(rec->windows.size() == 4);
  size_t next = 0;
  uint64_t before = 0;
  for (auto& w : rec->windows) {
    INFO("window " << w.window);
    std::vector<float> z;
    std::vector<int32_t> y;
    while (z.size() < 700 && next < cs.size()) {
      z.insert(z.end(), cs[next].scores.begin(), cs[next].scores.end());
      y.insert(y.end(), cs[next].labels.begin(), cs[next].labels.end());
      ++next;
    }
    CHECK(w.first_example == before);
    CHECK(w.examples == z.size());
    CHECK(w.loss == Approx(mean_loss(z, y)).margin(1e-9));
    CHECK(w.auc == Approx(pair_auc(z, y)).margin(1e-9));
    before += z.size();
  }
  CHECK(rec->windows[0].examples == 768);
  CHECK(rec->windows[1].examples == 744);
  CHECK(before == 3000);
}
