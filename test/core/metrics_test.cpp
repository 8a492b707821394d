#include "core/metrics.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

using namespace actorps;

namespace {

/// AUC by definition: over all (positive, negative) pairs, 1 if the positive
/// scores higher, 1/2 on a tie.
double pairwise_auc(const std::vector<float>& scores,
                    const std::vector<int32_t>& labels) {
  double wins = 0;
  double pairs = 0;
  for (size_t i = 0; i < scores.size(); ++i)
    for (size_t j = 0; j < scores.size(); ++j)
      if (labels[i] == 1 && labels[j] == 0) {
        pairs += 1;
        wins += scores[i] > scores[j] ? 1.0 : scores[i] == scores[j] ? 0.5 : 0;
      }
  return wins / pairs;
}

} // namespace

TEST_CASE("roc_auc matches a hand-computed case with tied scores",
          "[core][metrics]") {
  std::vector<float> scores{0.1f, 0.4f, 0.35f, 0.8f, 0.4f, 0.1f};
  std::vector<int32_t> labels{0, 0, 1, 1, 1, 0};
  // Sorted: 0.1(-) 0.1(-) | 0.35(+) | 0.4(-) 0.4(+) | 0.8(+)
  // Ranks:  1.5   1.5    | 3       | 4.5    4.5   | 6   (ties averaged)
  // Positives' rank sum R1 = 3 + 4.5 + 6 = 13.5; n1 = n0 = 3;
  // U = R1 - n1 (n1 + 1) / 2 = 13.5 - 6 = 7.5; AUC = U / (n1 n0) = 7.5 / 9.
  CHECK(roc_auc(scores, labels) == Approx(7.5 / 9).epsilon(1e-12));
  CHECK(pairwise_auc(scores, labels) == Approx(7.5 / 9).epsilon(1e-12));
}

TEST_CASE("roc_auc is 1 for a perfect ranking, 0 for an inverted one and 1/2 "
          "when all scores tie or a class is absent",
          "[core][metrics]") {
  std::vector<int32_t> labels{0, 1, 0, 1, 1};
  std::vector<float> perfect{-2.0f, 3.0f, 0.5f, 0.7f, 9.0f};
  std::vector<float> inverted;
  for (auto s : perfect)
    inverted.push_back(-s);
  CHECK(roc_auc(perfect, labels) == 1.0);
  CHECK(roc_auc(inverted, labels) == 0.0);
  CHECK(roc_auc(std::vector<float>(5, 0.3f), labels) == 0.5);
  CHECK(roc_auc({0.1f, 0.9f}, {1, 1}) == 0.5);
  CHECK(roc_auc({0.1f, 0.9f}, {0, 0}) == 0.5);
  CHECK(roc_auc({}, {}) == 0.5);
  CHECK_THROWS_AS(roc_auc({0.1f}, {0, 1}), std::invalid_argument);
}

TEST_CASE("roc_auc equals the pairwise definition on random scores with "
          "many ties",
          "[core][metrics]") {
  std::mt19937 rng{5};
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> scores(200);
    std::vector<int32_t> labels(200);
    for (size_t i = 0; i < scores.size(); ++i) {
      labels[i] = rng() % 3 == 0;
      // Scores on a coarse grid (many ties), higher for positives.
      scores[i] = static_cast<float>(rng() % 10 + 3 * labels[i]) / 4;
    }
    CHECK(roc_auc(scores, labels)
          == Approx(pairwise_auc(scores, labels)).epsilon(1e-12));
  }
}

TEST_CASE("binary_log_loss is exact at 0 and finite and accurate for large "
          "logits",
          "[core][metrics]") {
  CHECK(binary_log_loss(0, 0) == Approx(std::log(2.0)));
  CHECK(binary_log_loss(0, 1) == Approx(std::log(2.0)));
  for (double z : {-3.0, -0.5, 0.25, 2.0, 7.0}) {
    double p = 1 / (1 + std::exp(-z));
    CHECK(binary_log_loss(z, 1) == Approx(-std::log(p)).epsilon(1e-12));
    CHECK(binary_log_loss(z, 0) == Approx(-std::log(1 - p)).epsilon(1e-12));
  }
  for (double z : {1000.0, -1000.0, 1e300}) {
    INFO("z " << z);
    CHECK(std::isfinite(binary_log_loss(z, 0)));
    CHECK(std::isfinite(binary_log_loss(z, 1)));
  }
  CHECK(binary_log_loss(1000, 0) == Approx(1000));
  CHECK(binary_log_loss(-1000, 1) == Approx(1000));
  CHECK(binary_log_loss(1000, 1) >= 0);
  CHECK(binary_log_loss(1000, 1) < 1e-300);
  // A confident right answer keeps its digits: -log(sigmoid(40)) ~ e^-40.
  CHECK(binary_log_loss(40, 1) == Approx(std::exp(-40.0)).epsilon(1e-9));
  CHECK(binary_log_loss(-40, 0) == Approx(std::exp(-40.0)).epsilon(1e-9));
}

TEST_CASE("sigmoid saturates without overflow and is symmetric",
          "[core][metrics]") {
  CHECK(sigmoid(0) == 0.5);
  CHECK(sigmoid(1000) == 1.0);
  CHECK(sigmoid(-1000) == 0.0);
  CHECK(sigmoid(-700) > 0.0); // e^-700 ~ 1e-304, still a normal double
  for (double z : {0.1, 2.0, 30.0}) {
    CHECK(sigmoid(z) + sigmoid(-z) == Approx(1.0).epsilon(1e-15));
    CHECK(sigmoid(z) == Approx(1 / (1 + std::exp(-z))).epsilon(1e-15));
  }
}

TEST_CASE("eval_accumulator merges sums, counts and scores",
          "[core][metrics]") {
  eval_accumulator a;
  a.loss_sum = 2.0;
  a.count = 4;
  a.correct = 3;
  a.scores = {0.1f, 0.9f};
  a.labels = {0, 1};
  eval_accumulator b;
  b.loss_sum = 1.0;
  b.count = 2;
  b.correct = 0;
  b.scores = {0.4f};
  b.labels = {1};
  a.merge(b);
  CHECK(a.loss_sum == 3.0);
  CHECK(a.count == 6);
  CHECK(a.correct == 3);
  CHECK(a.mean_loss() == 0.5);
  CHECK(a.accuracy() == 0.5);
  CHECK(a.scores == std::vector<float>{0.1f, 0.9f, 0.4f});
  CHECK(a.labels == std::vector<int32_t>{0, 1, 1});
  CHECK(eval_accumulator{}.mean_loss() == 0.0);
}

TEST_CASE("metric_value finds a metric by name or returns the fallback",
          "[core][metrics]") {
  metric_list m{{"test_loss", 0.41}, {"test_accuracy", 0.85}};
  CHECK(metric_value(m, "test_accuracy") == 0.85);
  CHECK(metric_value(m, "test_auc") == 0.0);
  CHECK(metric_value(m, "test_auc", -1.0) == -1.0);
}
