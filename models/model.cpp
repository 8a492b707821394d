#include "models/model.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/binary_loss.hpp"

namespace actorps {

model_workspace::~model_workspace() = default;

model::~model() = default;

void model::collect_keys(const example_batch&,
                         std::vector<table_lookup>&) const {
  // No tables.
}

std::vector<uint64_t> model::forward_stages() const {
  return {};
}

void model::forward_stage(const model_inputs&, const example_batch&, uint32_t,
                          model_workspace&) const {
  throw std::logic_error("forward_stage: this model's forward pass has no "
                         "stages");
}

uint32_t model::prediction_width() const {
  return 0;
}

void model::predict(const model_inputs&, const example_batch&, float*,
                    model_workspace&) const {
  throw input_error("model.type: this model does not give predictions "
                    "(model::predict), so it cannot be exported or served");
}

uint64_t model::dense_parameters() const {
  uint64_t n = 0;
  for (auto& v : variables())
    n += v.size();
  return n;
}

metric_list multiclass_metrics(const eval_accumulator& acc) {
  return {{"test_loss", acc.mean_loss()}, {"test_accuracy", acc.accuracy()}};
}

metric_list binary_metrics(const eval_accumulator& acc) {
  return {{"test_loss", acc.mean_loss()},
          {"test_auc", roc_auc(acc.scores, acc.labels)},
          {"test_accuracy", acc.accuracy()}};
}

void check_binary_schema(const data_schema& built, const data_schema& given,
                         const char* name) {
  if (given.labels != label_kind::binary)
    throw input_error(fmt::format("model.type: {} needs binary labels; this "
                                  "dataset's are multiclass",
                                  name));
  if (given.fields.size() != built.fields.size()
      || given.dense_dim != built.dense_dim)
    throw input_error(fmt::format("data: the examples have {} fields and {} "
                                  "dense features, the model was built for {} "
                                  "and {}",
                                  given.fields.size(), given.dense_dim,
                                  built.fields.size(), built.dense_dim));
}

void collect_field_keys(const example_batch& batch,
                        std::vector<table_lookup>& tables, size_t fields) {
  for (size_t f = 0; f < fields; ++f) {
    auto& src = batch.fields[f];
    tables[f].occurrences.assign(src.keys.begin(),
                                 src.keys.begin() + src.offsets[batch.rows]);
  }
}

double binary_loss_and_delta(const float* z, uint64_t stride,
                             const int32_t* labels, uint64_t rows,
                             float* dz) {
  double loss = 0;
  auto scale = 1.0 / static_cast<double>(rows);
  for (uint64_t r = 0; r < rows; ++r) {
    double x = z[r * stride];
    loss += binary_log_loss(x, labels[r]);
    dz[r * stride] = static_cast<float>((sigmoid(x) - labels[r]) * scale);
  }
  return loss;
}

void binary_probabilities(const float* z, uint64_t stride, uint64_t rows,
                          float* out) {
  for (uint64_t r = 0; r < rows; ++r)
    out[r] = static_cast<float>(sigmoid(double{z[r * stride]}));
}

void add_binary_predictions(const float* z, uint64_t stride,
                            const int32_t* labels, uint64_t rows,
                            eval_accumulator& acc) {
  for (uint64_t r = 0; r < rows; ++r) {
    double x = z[r * stride];
    acc.loss_sum += binary_log_loss(x, labels[r]);
    if ((x > 0) == (labels[r] == 1))
      ++acc.correct;
    // The logit as the score: AUC needs only the order, and probabilities
    // saturate to equal floats near 0 and 1.
    acc.scores.push_back(static_cast<float>(x));
    acc.labels.push_back(labels[r]);
  }
  acc.count += rows;
}

} // namespace actorps
