#include "models/sparse_logreg.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/binary_loss.hpp"

namespace actorps {

namespace {

class logreg_workspace final : public model_workspace {
public:
  std::vector<float> z;
};

} // namespace

sparse_logreg::sparse_logreg(const data_schema& schema) : schema_(schema) {
  if (schema_.fields.empty() && schema_.dense_dim == 0)
    throw input_error("model.type: sparse_logistic_regression needs sparse "
                      "fields or dense features in the data");
  check_schema(schema_);
}

std::vector<variable_def> sparse_logreg::variables() const {
  std::vector<variable_def> result;
  for (auto& f : schema_.fields)
    result.push_back(
      variable_def::table("weights/" + f.name, f.vocabulary, 1, 0.0f));
  if (schema_.dense_dim > 0)
    result.push_back(
      variable_def::dense("dense_weights", schema_.dense_dim, 1));
  result.push_back(variable_def::dense("bias", 1, 1));
  return result;
}

void sparse_logreg::check_schema(const data_schema& schema) const {
  check_binary_schema(schema_, schema, "sparse_logistic_regression");
}

void sparse_logreg::initialize(float* dense, uint64_t) const {
  // Logistic regression starts at zero (the loss is convex).
  std::fill(dense, dense + schema_.dense_dim + 1, 0.0f);
}

std::unique_ptr<model_workspace>
sparse_logreg::make_workspace(uint64_t max_rows) const {
  auto ws = std::make_unique<logreg_workspace>();
  ws->z.resize(max_rows);
  return ws;
}

void sparse_logreg::collect_keys(const example_batch& batch,
                                 std::vector<table_lookup>& tables) const {
  collect_field_keys(batch, tables, schema_.fields.size());
}

void sparse_logreg::logits(const model_inputs& in, const example_batch& batch,
                           std::vector<float>& z) const {
  auto& tables = *in.tables;
  const float* dense_w = in.dense;
  float bias = in.dense[schema_.dense_dim];
  z.resize(batch.rows);
  for (uint64_t r = 0; r < batch.rows; ++r) {
    double sum = bias;
    for (size_t f = 0; f < schema_.fields.size(); ++f) {
      auto& field = batch.fields[f];
      auto& t = tables[f];
      for (auto i = field.offsets[r]; i < field.offsets[r + 1]; ++i) {
        float v = field.values.empty() ? 1.0f : field.values[i];
        sum += double{*t.row_of(i)} * v;
      }
    }
    const float* x = batch.dense.data() + r * schema_.dense_dim;
    for (uint64_t j = 0; j < schema_.dense_dim; ++j)
      sum += double{dense_w[j]} * x[j];
    z[r] = static_cast<float>(sum);
  }
}

double sparse_logreg::loss_and_gradient(const model_inputs& in,
                                        const example_batch& batch,
                                        float* dense_grad,
                                        model_workspace& base) const {
  auto& z = static_cast<logreg_workspace&>(base).z;
  logits(in, batch, z);
  if (base.predictions)
    add_binary_predictions(z.data(), 1, batch.labels.data(), batch.rows,
                           *base.predictions);
  auto loss = binary_loss_and_delta(z.data(), 1, batch.labels.data(),
                                    batch.rows, z.data());
  // z now holds d(mean loss)/d logit per row.
  auto& tables = *in.tables;
  auto dim = schema_.dense_dim;
  std::fill(dense_grad, dense_grad + dim + 1, 0.0f);
  for (uint64_t r = 0; r < batch.rows; ++r) {
    float dz = z[r];
    for (size_t f = 0; f < schema_.fields.size(); ++f) {
      auto& field = batch.fields[f];
      auto& t = tables[f];
      for (auto i = field.offsets[r]; i < field.offsets[r + 1]; ++i)
        *t.grad_of(i) += dz * (field.values.empty() ? 1.0f : field.values[i]);
    }
    const float* x = batch.dense.data() + r * dim;
    for (uint64_t j = 0; j < dim; ++j)
      dense_grad[j] += dz * x[j];
    dense_grad[dim] += dz;
  }
  return loss / static_cast<double>(batch.rows);
}

void sparse_logreg::evaluate(const model_inputs& in,
                             const example_batch& batch,
                             eval_accumulator& acc,
                             model_workspace& base) const {
  auto& z = static_cast<logreg_workspace&>(base).z;
  logits(in, batch, z);
  add_binary_predictions(z.data(), 1, batch.labels.data(), batch.rows, acc);
}

uint32_t sparse_logreg::prediction_width() const {
  return 1;
}

void sparse_logreg::predict(const model_inputs& in, const example_batch& batch,
                            float* out, model_workspace& base) const {
  auto& z = static_cast<logreg_workspace&>(base).z;
  logits(in, batch, z);
  binary_probabilities(z.data(), 1, batch.rows, out);
}

metric_list sparse_logreg::metrics(const eval_accumulator& acc) const {
  return binary_metrics(acc);
}

} // namespace actorps
