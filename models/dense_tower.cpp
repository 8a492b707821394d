#include "models/dense_tower.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

using matrix = dense_tower::matrix;
using matrix_map = Eigen::Map<matrix>;
using const_matrix_map = Eigen::Map<const matrix>;
using row_vector = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using row_map = Eigen::Map<row_vector>;
using const_row_map = Eigen::Map<const row_vector>;

} // namespace

dense_tower::dense_tower(std::vector<uint64_t> widths, std::string prefix)
  : widths_(std::move(widths)), prefix_(std::move(prefix)) {
  if (widths_.size() < 2)
    throw input_error("model.layers: needs at least an input and an output "
                      "width");
  for (size_t i = 0; i < widths_.size(); ++i)
    if (widths_[i] == 0)
      throw input_error(fmt::format("model.layers[{}]: width must be > 0", i));
  uint64_t off = 0;
  for (size_t i = 0; i + 1 < widths_.size(); ++i) {
    offsets_.push_back(off);
    off += widths_[i] * widths_[i + 1] + widths_[i + 1];
  }
}

std::vector<variable_def> dense_tower::variables() const {
  std::vector<variable_def> result;
  for (size_t i = 0; i + 1 < widths_.size(); ++i) {
    result.push_back(variable_def::dense(
      fmt::format("{}dense_{}/kernel", prefix_, i), widths_[i],
      widths_[i + 1]));
    result.push_back(variable_def::dense(
      fmt::format("{}dense_{}/bias", prefix_, i), widths_[i + 1], 1));
  }
  return result;
}

uint64_t dense_tower::parameters() const {
  auto n = widths_.size() - 1;
  return offsets_.back() + widths_[n - 1] * widths_[n] + widths_[n];
}

void dense_tower::initialize(float* params, std::mt19937_64& rng) const {
  float* p = params;
  for (size_t i = 0; i + 1 < widths_.size(); ++i) {
    auto in = widths_[i];
    auto out = widths_[i + 1];
    auto limit = static_cast<float>(std::sqrt(6.0 / double(in + out)));
    std::uniform_real_distribution<float> dist{-limit, limit};
    for (uint64_t k = 0; k < in * out; ++k)
      *p++ = dist(rng);
    std::fill(p, p + out, 0.0f);
    p += out;
  }
}

dense_tower::workspace dense_tower::make_workspace(uint64_t max_rows) const {
  workspace ws;
  ws.max_rows = max_rows;
  for (auto width : widths_)
    ws.act.emplace_back(static_cast<Eigen::Index>(max_rows),
                        static_cast<Eigen::Index>(width));
  ws.delta.resize(ws.act.size());
  for (size_t i = 0; i < ws.act.size(); ++i)
    ws.delta[i].resize(ws.act[i].rows(), ws.act[i].cols());
  return ws;
}

void dense_tower::forward(const float* params, workspace& ws,
                          Eigen::Index rows) const {
  for (size_t i = 0; i < layers(); ++i)
    forward_layer(params, ws, rows, i);
}

void dense_tower::forward_layer(const float* params, workspace& ws,
                                Eigen::Index rows, size_t i) const {
  auto in = static_cast<Eigen::Index>(widths_[i]);
  auto out = static_cast<Eigen::Index>(widths_[i + 1]);
  const float* p = params + offsets_[i];
  const_matrix_map w{p, in, out};
  const_row_map b{p + in * out, out};
  auto a_in = ws.act[i].topRows(rows);
  auto a_out = ws.act[i + 1].topRows(rows);
  a_out.noalias() = a_in * w;
  a_out.rowwise() += b;
  if (i + 1 < layers())
    a_out = a_out.cwiseMax(0.0f);
}

uint64_t dense_tower::layer_end(size_t i) const {
  return offsets_[i] + widths_[i] * widths_[i + 1] + widths_[i + 1];
}

std::vector<uint64_t> dense_tower::layer_ends() const {
  std::vector<uint64_t> ends;
  for (size_t i = 0; i < layers(); ++i)
    ends.push_back(layer_end(i));
  return ends;
}

void dense_tower::backward(const float* params, workspace& ws,
                           Eigen::Index rows, float* grad, bool input_grad,
                           const gradient_ready_fn* ready) const {
  auto n = widths_.size() - 1;
  for (size_t i = n; i-- > 0;) {
    auto in = static_cast<Eigen::Index>(widths_[i]);
    auto out = static_cast<Eigen::Index>(widths_[i + 1]);
    auto d_out = ws.delta[i + 1].topRows(rows);
    matrix_map gw{grad + offsets_[i], in, out};
    row_map gb{grad + offsets_[i] + in * out, out};
    gw.noalias() = ws.act[i].topRows(rows).transpose() * d_out;
    // The bias gradient adds the rows in order, the same order for every
    // column. Not d_out.colwise().sum(): Eigen sums the columns that land
    // in whole packets of `gb` four rows at a time ((a + b) + (c + d) added
    // to the sum) and the others row after row, so which columns rounded
    // which way followed the address of `grad` (the caller's buffer), and a
    // run's results where the heap had put it (a simulated run changed
    // with the length of --out). Costs one pass over d_out, as the sum did.
    gb.setZero();
    for (Eigen::Index r = 0; r < rows; ++r)
      gb += d_out.row(r);
    // The layer's gradient is final: a worker may push it while the layers
    // below are still being computed.
    if (ready != nullptr && *ready)
      (*ready)(grad + offsets_[i], grad + offsets_[i] + in * out + out);
    if (i > 0 || input_grad) {
      const_matrix_map w{params + offsets_[i], in, out};
      auto d_in = ws.delta[i].topRows(rows);
      d_in.noalias() = d_out * w.transpose();
      // ReLU: the gradient passes where the activation was positive (the
      // input layer has no ReLU).
      if (i > 0)
        d_in.array() = (ws.act[i].topRows(rows).array() > 0.0f)
                         .select(d_in.array(), 0.0f);
    }
  }
}

} // namespace actorps
