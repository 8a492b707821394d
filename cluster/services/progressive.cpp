#include "cluster/services/progressive.hpp"

namespace actorps {

void add_predictions(eval_accumulator& acc, const step_result& r) {
  acc.scores.insert(acc.scores.end(), r.scores.begin(), r.scores.end());
  acc.labels.insert(acc.labels.end(), r.labels.begin(), r.labels.end());
  acc.loss_sum += r.loss * double(r.samples);
  acc.count += r.samples;
}

metric_list progressive_metrics(const eval_accumulator& acc) {
  if (acc.scores.empty())
    return {};
  return {{"progressive_loss", acc.mean_loss()},
          {"progressive_auc", roc_auc(acc.scores, acc.labels)}};
}

std::optional<window_metrics> progressive_windows::add(const step_result& r) {
  if (size_ == 0)
    return std::nullopt;
  add_predictions(open_, r);
  if (open_.count < size_)
    return std::nullopt;
  window_metrics m;
  m.window = ++windows_;
  m.first_example = examples_;
  m.examples = open_.count;
  m.loss = open_.mean_loss();
  m.auc = roc_auc(open_.scores, open_.labels);
  examples_ += open_.count;
  open_ = eval_accumulator{};
  return m;
}

} // namespace actorps
