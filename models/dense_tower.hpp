#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "core/placement.hpp"
#include "models/model.hpp"

namespace actorps {

/// A stack of dense layers widths[0] -> widths[1] -> ... -> widths[n] with
/// ReLU between layers and none after the last (its outputs are logits), the
/// building block of the MLP and of the embedding models' top tower.
///
/// Variables, in this order (Keras' names, `prefix` first): `dense_i/kernel`
/// of shape widths[i] x widths[i+1] and `dense_i/bias` of shape widths[i+1]
/// x 1. Kernels start Glorot-uniform (Glorot & Bengio, 2010: U(-l, l),
/// l = sqrt(6 / (fan_in + fan_out))), biases at zero, as Keras' Dense layer.
/// Parameters are one flat buffer in that order, each variable row-major.
class dense_tower {
public:
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                               Eigen::RowMajor>;

  /// Activations and deltas of every layer for up to max_rows examples.
  struct workspace {
    uint64_t max_rows = 0;
    std::vector<matrix> act;   ///< act[0] = input, act[i] = layer i output
    std::vector<matrix> delta; ///< delta[i] = d loss / d pre-activation of
                               ///< layer i (delta[0]: d loss / d input)
  };

  /// @throws input_error ("model.layers...") if fewer than two widths are
  ///         given or one is zero.
  explicit dense_tower(std::vector<uint64_t> widths, std::string prefix = "");

  std::vector<variable_def> variables() const;

  /// Floats of all kernels and biases.
  uint64_t parameters() const;

  const std::vector<uint64_t>& widths() const noexcept {
    return widths_;
  }

  /// Writes initial values into `params` (parameters() floats).
  void initialize(float* params, std::mt19937_64& rng) const;

  workspace make_workspace(uint64_t max_rows) const;

  /// Forward pass over the first `rows` rows of ws.act[0]; leaves the last
  /// layer's outputs (logits) in ws.act.back().
  void forward(const float* params, workspace& ws, Eigen::Index rows) const;

  /// Layer i of the forward pass: ws.act[i + 1] from ws.act[i] (first
  /// `rows` rows), reading only params[0, layer_end(i)).
  void forward_layer(const float* params, workspace& ws, Eigen::Index rows,
                     size_t i) const;

  /// The end of layer i's kernel and bias in the flat buffer (i < layers).
  uint64_t layer_end(size_t i) const;

  /// layer_end(i) of every layer, in order (model::forward_stages of a
  /// model whose dense part is this tower).
  std::vector<uint64_t> layer_ends() const;

  /// Dense layers: widths().size() - 1.
  size_t layers() const noexcept {
    return widths_.size() - 1;
  }

  /// Back-propagation from ws.delta.back() (d loss / d logits, first `rows`
  /// rows) after forward(): writes every parameter's gradient into `grad`
  /// (same layout as params, overwritten) and, with `input_grad`, d loss /
  /// d input into ws.delta[0]. With `ready` set, calls it with each layer's
  /// run of `grad` (kernel and bias) as soon as that run is final, last
  /// layer first (model_workspace::gradient_ready).
  void backward(const float* params, workspace& ws, Eigen::Index rows,
                float* grad, bool input_grad,
                const gradient_ready_fn* ready = nullptr) const;

private:
  std::vector<uint64_t> widths_;
  std::string prefix_;
  /// Offset of each layer's kernel in the flat buffer (its bias follows).
  std::vector<uint64_t> offsets_;
};

} // namespace actorps
