#include "models/mlp.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

using matrix = dense_tower::matrix;
using const_matrix_map = Eigen::Map<const matrix>;

class mlp_workspace final : public model_workspace {
public:
  explicit mlp_workspace(dense_tower::workspace w) : tower(std::move(w)) {
    // nop
  }

  dense_tower::workspace tower;
};

/// Turns the logits in `z` into softmax probabilities in place; with labels
/// `y` (null: none) returns the summed cross-entropy loss and the number of
/// arg-max hits ({0, 0} without labels). The one softmax of the model:
/// training, evaluation and predict() all take it.
std::pair<double, uint64_t> softmax_xent(Eigen::Ref<matrix> z,
                                         const int32_t* y) {
  double loss = 0;
  uint64_t correct = 0;
  for (Eigen::Index r = 0; r < z.rows(); ++r) {
    auto row = z.row(r);
    Eigen::Index arg = 0;
    float mx = row.maxCoeff(&arg);
    if (y != nullptr && arg == y[r])
      ++correct;
    // log p_y = (z_y - max) - log(sum): taken from the logit, not from
    // exp(z_y - max), which underflows to 0 (loss inf) ~90-100 nats below
    // the max.
    float shifted_y = y != nullptr ? row(y[r]) - mx : 0.0f;
    row.array() = (row.array() - mx).exp();
    float sum = row.sum();
    if (y != nullptr)
      loss += std::log(double{sum}) - double{shifted_y};
    row /= sum;
  }
  return {loss, correct};
}

/// Copies the batch's features into the tower's input.
void load_input(dense_tower::workspace& ws, const example_batch& batch) {
  auto rows = static_cast<Eigen::Index>(batch.rows);
  ws.act[0].topRows(rows) = const_matrix_map{
    batch.dense.data(), rows, static_cast<Eigen::Index>(batch.dense_dim)};
}

} // namespace

mlp::mlp(std::vector<uint64_t> layers) : tower_(std::move(layers)) {
  if (tower_.widths().back() < 2)
    throw input_error("model.layers: the last layer (classes) must be at "
                      "least 2");
}

std::vector<variable_def> mlp::variables() const {
  return tower_.variables();
}

void mlp::check_schema(const data_schema& schema) const {
  if (schema.dense_dim != input_dim())
    throw input_error(fmt::format("model.layers[0]: is {} but the examples "
                                  "have {} dense features",
                                  input_dim(), schema.dense_dim));
  if (schema.labels != label_kind::multiclass)
    throw input_error("model.type: mlp is a softmax classifier and needs "
                      "multiclass labels; this dataset's are binary (use "
                      "embedding_mlp or sparse_logistic_regression)");
  if (schema.classes != classes())
    throw input_error(fmt::format("model.layers: the last width is {} but "
                                  "the dataset has {} classes",
                                  classes(), schema.classes));
}

void mlp::initialize(float* dense, uint64_t seed) const {
  std::mt19937_64 rng{seed};
  tower_.initialize(dense, rng);
}

std::unique_ptr<model_workspace> mlp::make_workspace(uint64_t max_rows) const {
  return std::make_unique<mlp_workspace>(tower_.make_workspace(max_rows));
}

Eigen::Ref<matrix> mlp::forward(const model_inputs& in,
                                const example_batch& batch,
                                dense_tower::workspace& ws) const {
  auto rows = static_cast<Eigen::Index>(batch.rows);
  if (in.stages_done == 0)
    load_input(ws, batch);
  for (size_t i = in.stages_done; i < tower_.layers(); ++i)
    tower_.forward_layer(in.dense, ws, rows, i);
  return ws.act.back().topRows(rows);
}

double mlp::loss_and_gradient(const model_inputs& in,
                              const example_batch& batch, float* dense_grad,
                              model_workspace& base) const {
  auto& ws = static_cast<mlp_workspace&>(base).tower;
  auto rows = static_cast<Eigen::Index>(batch.rows);
  auto probs = forward(in, batch, ws);
  // Softmax cross-entropy: d loss / d logits = (softmax - onehot) / rows.
  auto loss = softmax_xent(probs, batch.labels.data()).first;
  auto& top = ws.delta.back();
  top.topRows(rows) = probs;
  for (Eigen::Index r = 0; r < rows; ++r)
    top(r, batch.labels[r]) -= 1.0f;
  top.topRows(rows) *= 1.0f / static_cast<float>(rows);
  tower_.backward(in.dense, ws, rows, dense_grad, false,
                  &base.gradient_ready);
  return loss / static_cast<double>(rows);
}

std::vector<uint64_t> mlp::forward_stages() const {
  return tower_.layer_ends();
}

void mlp::forward_stage(const model_inputs& in, const example_batch& batch,
                        uint32_t s, model_workspace& base) const {
  if (s >= tower_.layers())
    throw std::logic_error(fmt::format("mlp::forward_stage: stage {} of {}",
                                       s, tower_.layers()));
  auto& ws = static_cast<mlp_workspace&>(base).tower;
  if (s == 0)
    load_input(ws, batch);
  tower_.forward_layer(in.dense, ws, static_cast<Eigen::Index>(batch.rows), s);
}

void mlp::evaluate(const model_inputs& in, const example_batch& batch,
                   eval_accumulator& acc, model_workspace& base) const {
  auto& ws = static_cast<mlp_workspace&>(base).tower;
  model_inputs from_start{in.dense, in.tables};
  auto [loss, correct] = softmax_xent(forward(from_start, batch, ws),
                                      batch.labels.data());
  acc.loss_sum += loss;
  acc.correct += correct;
  acc.count += batch.rows;
}

uint32_t mlp::prediction_width() const {
  return static_cast<uint32_t>(classes());
}

void mlp::predict(const model_inputs& in, const example_batch& batch,
                  float* out, model_workspace& base) const {
  auto& ws = static_cast<mlp_workspace&>(base).tower;
  model_inputs from_start{in.dense, in.tables};
  auto probs = forward(from_start, batch, ws);
  softmax_xent(probs, nullptr);
  Eigen::Map<matrix>{out, probs.rows(), probs.cols()} = probs;
}

metric_list mlp::metrics(const eval_accumulator& acc) const {
  return multiclass_metrics(acc);
}

} // namespace actorps
