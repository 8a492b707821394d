#include "core/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace actorps {

double roc_auc(const std::vector<float>& scores,
               const std::vector<int32_t>& labels) {
  if (scores.size() != labels.size())
    throw std::invalid_argument(fmt::format("roc_auc: {} scores for {} labels",
                                            scores.size(), labels.size()));
  auto n = scores.size();
  std::vector<std::pair<float, int32_t>> sorted(n);
  for (size_t i = 0; i < n; ++i)
    sorted[i] = {scores[i], labels[i]};
  std::sort(sorted.begin(), sorted.end(),
            [](auto& a, auto& b) { return a.first < b.first; });
  // Mann-Whitney: U = (sum of the positives' ranks) - n1 (n1 + 1) / 2, where
  // tied scores share the average of the ranks they span; AUC = U / (n1 n0).
  double positive_rank_sum = 0;
  uint64_t positives = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    uint64_t tied_positives = 0;
    for (; j < n && sorted[j].first == sorted[i].first; ++j)
      tied_positives += sorted[j].second != 0;
    // Ranks i + 1 .. j (1-based); their average:
    double rank = 0.5 * static_cast<double>(i + 1 + j);
    positive_rank_sum += rank * static_cast<double>(tied_positives);
    positives += tied_positives;
    i = j;
  }
  auto negatives = n - positives;
  if (positives == 0 || negatives == 0)
    return 0.5;
  auto n1 = static_cast<double>(positives);
  auto u = positive_rank_sum - n1 * (n1 + 1) / 2;
  return u / (n1 * static_cast<double>(negatives));
}

namespace {

/// log(1 + exp(z)) without overflow, and accurate for large negative z.
double softplus(double z) {
  return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}

} // namespace

double binary_log_loss(double z, int32_t y) {
  // softplus(z) - z = softplus(-z): for y = 1 this form keeps the digits
  // that z + log1p(exp(-z)) - z would cancel.
  if (y == 0)
    return softplus(z);
  if (y == 1)
    return softplus(-z);
  return softplus(z) - static_cast<double>(y) * z;
}

double sigmoid(double z) {
  if (z >= 0)
    return 1.0 / (1.0 + std::exp(-z));
  auto e = std::exp(z);
  return e / (1.0 + e);
}

void eval_accumulator::merge(const eval_accumulator& other) {
  loss_sum += other.loss_sum;
  count += other.count;
  correct += other.correct;
  scores.insert(scores.end(), other.scores.begin(), other.scores.end());
  labels.insert(labels.end(), other.labels.begin(), other.labels.end());
}

double metric_value(const metric_list& m, const std::string& name,
                    double fallback) {
  for (auto& [key, value] : m)
    if (key == name)
      return value;
  return fallback;
}

} // namespace actorps
