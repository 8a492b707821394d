#include "models/embedding_mlp.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/binary_loss.hpp"

namespace actorps {

namespace {

class embedding_workspace final : public model_workspace {
public:
  explicit embedding_workspace(dense_tower::workspace w)
    : tower(std::move(w)) {
    // nop
  }

  dense_tower::workspace tower;
};

/// What multiplies the value of each key of row r in a field's combined
/// vector: 1 for sum; 1 / (sum of the row's values) for mean, TensorFlow's
/// `embedding_lookup_sparse` combiner "mean" (a weighted mean; 0 when the
/// weights sum to 0, as its div_no_nan).
float row_scale(const example_batch::field& field, uint64_t r, bool mean) {
  if (!mean)
    return 1.0f;
  auto first = field.offsets[r];
  auto last = field.offsets[r + 1];
  float total = 0;
  if (field.values.empty())
    total = static_cast<float>(last - first);
  else
    for (auto i = first; i < last; ++i)
      total += field.values[i];
  return total == 0.0f ? 0.0f : 1.0f / total;
}

float value_of(const example_batch::field& field, uint64_t i) {
  return field.values.empty() ? 1.0f : field.values[i];
}

} // namespace

embedding_mlp::embedding_mlp(const data_schema& schema,
                             std::vector<uint64_t> layers,
                             uint64_t embedding_dim, bool mean,
                             float init_scale)
  : schema_(schema),
    dim_(embedding_dim),
    mean_(mean),
    init_scale_(init_scale),
    tower_(std::move(layers)) {
  if (schema_.fields.empty())
    throw input_error("model.type: embedding_mlp needs sparse fields in the "
                      "data");
  auto width = schema_.fields.size() * dim_ + schema_.dense_dim;
  if (tower_.widths().front() != width)
    throw input_error(fmt::format(
      "model.layers[0]: must be {} ({} fields x embedding_dim {} + {} dense "
      "features), got {}",
      width, schema_.fields.size(), dim_, schema_.dense_dim,
      tower_.widths().front()));
  if (tower_.widths().back() != 1)
    throw input_error(fmt::format("model.layers: the last width must be 1 "
                                  "(one logit), got {}",
                                  tower_.widths().back()));
  check_schema(schema_);
}

std::vector<variable_def> embedding_mlp::variables() const {
  std::vector<variable_def> result;
  for (auto& f : schema_.fields)
    result.push_back(variable_def::table("embedding/" + f.name, f.vocabulary,
                                         dim_, init_scale_));
  for (auto& v : tower_.variables())
    result.push_back(v);
  return result;
}

void embedding_mlp::check_schema(const data_schema& schema) const {
  check_binary_schema(schema_, schema, "embedding_mlp");
}

void embedding_mlp::initialize(float* dense, uint64_t seed) const {
  std::mt19937_64 rng{seed};
  tower_.initialize(dense, rng);
}

std::unique_ptr<model_workspace>
embedding_mlp::make_workspace(uint64_t max_rows) const {
  return std::make_unique<embedding_workspace>(
    tower_.make_workspace(max_rows));
}

void embedding_mlp::collect_keys(const example_batch& batch,
                                 std::vector<table_lookup>& tables) const {
  collect_field_keys(batch, tables, schema_.fields.size());
}

void embedding_mlp::load_input(const model_inputs& in,
                               const example_batch& batch,
                               dense_tower::workspace& ws) const {
  auto& tables = *in.tables;
  auto& x = ws.act[0];
  auto nf = schema_.fields.size();
  for (uint64_t r = 0; r < batch.rows; ++r) {
    float* out = x.data() + r * x.cols();
    for (size_t f = 0; f < nf; ++f) {
      auto& field = batch.fields[f];
      auto& t = tables[f];
      float* v = out + f * dim_;
      std::fill(v, v + dim_, 0.0f);
      auto scale = row_scale(field, r, mean_);
      for (auto i = field.offsets[r]; i < field.offsets[r + 1]; ++i) {
        auto w = value_of(field, i) * scale;
        const float* row = t.row_of(i);
        for (uint64_t j = 0; j < dim_; ++j)
          v[j] += w * row[j];
      }
    }
    const float* d = batch.dense.data() + r * schema_.dense_dim;
    std::copy(d, d + schema_.dense_dim, out + nf * dim_);
  }
}

void embedding_mlp::forward(const model_inputs& in,
                            const example_batch& batch,
                            dense_tower::workspace& ws) const {
  if (in.stages_done == 0)
    load_input(in, batch, ws);
  for (size_t i = in.stages_done; i < tower_.layers(); ++i)
    tower_.forward_layer(in.dense, ws, static_cast<Eigen::Index>(batch.rows),
                         i);
}

double embedding_mlp::loss_and_gradient(const model_inputs& in,
                                        const example_batch& batch,
                                        float* dense_grad,
                                        model_workspace& base) const {
  auto& ws = static_cast<embedding_workspace&>(base).tower;
  auto rows = static_cast<Eigen::Index>(batch.rows);
  forward(in, batch, ws);
  auto& z = ws.act.back();
  auto& dz = ws.delta.back();
  if (base.predictions)
    add_binary_predictions(z.data(), z.cols(), batch.labels.data(),
                           batch.rows, *base.predictions);
  auto loss = binary_loss_and_delta(z.data(), z.cols(), batch.labels.data(),
                                    batch.rows, dz.data());
  tower_.backward(in.dense, ws, rows, dense_grad, true,
                  &base.gradient_ready);
  // d loss / d input -> each occurrence's row, scaled by its weight.
  auto& tables = *in.tables;
  auto& dx = ws.delta[0];
  for (uint64_t r = 0; r < batch.rows; ++r) {
    const float* g = dx.data() + r * dx.cols();
    for (size_t f = 0; f < schema_.fields.size(); ++f) {
      auto& field = batch.fields[f];
      auto& t = tables[f];
      auto scale = row_scale(field, r, mean_);
      for (auto i = field.offsets[r]; i < field.offsets[r + 1]; ++i) {
        auto w = value_of(field, i) * scale;
        float* out = t.grad_of(i);
        const float* gf = g + f * dim_;
        for (uint64_t j = 0; j < dim_; ++j)
          out[j] += w * gf[j];
      }
    }
  }
  return loss / static_cast<double>(batch.rows);
}

std::vector<uint64_t> embedding_mlp::forward_stages() const {
  // The tower is the only dense part: its layers' ends are the stages'.
  return tower_.layer_ends();
}

void embedding_mlp::forward_stage(const model_inputs& in,
                                  const example_batch& batch, uint32_t s,
                                  model_workspace& base) const {
  if (s >= tower_.layers())
    throw std::logic_error(fmt::format(
      "embedding_mlp::forward_stage: stage {} of {}", s, tower_.layers()));
  auto& ws = static_cast<embedding_workspace&>(base).tower;
  if (s == 0)
    load_input(in, batch, ws);
  tower_.forward_layer(in.dense, ws, static_cast<Eigen::Index>(batch.rows),
                       s);
}

void embedding_mlp::evaluate(const model_inputs& in,
                             const example_batch& batch,
                             eval_accumulator& acc,
                             model_workspace& base) const {
  auto& ws = static_cast<embedding_workspace&>(base).tower;
  forward(model_inputs{in.dense, in.tables}, batch, ws);
  auto& z = ws.act.back();
  add_binary_predictions(z.data(), z.cols(), batch.labels.data(), batch.rows,
                         acc);
}

uint32_t embedding_mlp::prediction_width() const {
  return 1;
}

void embedding_mlp::predict(const model_inputs& in,
                            const example_batch& batch, float* out,
                            model_workspace& base) const {
  auto& ws = static_cast<embedding_workspace&>(base).tower;
  forward(model_inputs{in.dense, in.tables}, batch, ws);
  auto& z = ws.act.back();
  binary_probabilities(z.data(), z.cols(), batch.rows, out);
}

metric_list embedding_mlp::metrics(const eval_accumulator& acc) const {
  return binary_metrics(acc);
}

} // namespace actorps
