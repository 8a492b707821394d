#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace actorps {

/// Area under the ROC curve of `scores` (any monotone score, e.g. a
/// probability or a logit) against 0/1 `labels`: the probability that a
/// random positive scores above a random negative, ties counted one half
/// (the Mann-Whitney U statistic, with average ranks for tied scores; Hanley
/// & McNeil, Radiology 1982). O(n log n).
/// @returns 0.5 when either class is absent (AUC is undefined then).
/// @throws std::invalid_argument if scores.size() != labels.size().
/// @pre labels are 0 or 1 (any non-zero label counts as positive); no NaN
///      score.
double roc_auc(const std::vector<float>& scores,
               const std::vector<int32_t>& labels);

/// Binary cross-entropy of one example with logit `z` and label y in {0, 1},
/// computed stably from the logit: log(1 + exp(z)) - y z (nats).
double binary_log_loss(double z, int32_t y);

/// The logistic function 1 / (1 + exp(-z)), without overflow for large |z|.
double sigmoid(double z);

/// What a model's evaluation accumulates over a dataset (several threads may
/// each fill one and merge() them).
struct eval_accumulator {
  double loss_sum = 0;  ///< sum of per-example losses (nats)
  uint64_t count = 0;   ///< examples evaluated
  uint64_t correct = 0; ///< examples whose prediction is the label
  /// Binary models: each example's score and label, for AUC.
  std::vector<float> scores;
  std::vector<int32_t> labels;

  /// Adds `other` to this.
  void merge(const eval_accumulator& other);

  double mean_loss() const {
    return count == 0 ? 0.0 : loss_sum / static_cast<double>(count);
  }

  double accuracy() const {
    return count == 0 ? 0.0 : static_cast<double>(correct) / count;
  }
};

/// Named metric values, in the order a model reports them, e.g.
/// {{"test_loss", 0.41}, {"test_accuracy", 0.85}}.
using metric_list = std::vector<std::pair<std::string, double>>;

/// The value of metric `name` in `m`, or `fallback`.
double metric_value(const metric_list& m, const std::string& name,
                    double fallback = 0.0);

} // namespace actorps
