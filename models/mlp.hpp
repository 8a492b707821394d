#pragma once

#include "models/dense_tower.hpp"
#include "models/model.hpp"

namespace actorps {

/// A multi-layer perceptron for classification of dense features: dense
/// layers of widths layers[0] -> layers[1] -> ... -> layers[n], ReLU between
/// them, and a softmax cross-entropy loss on the last layer's logits
/// (layers[n] classes). Variables: see dense_tower (`dense_i/kernel`,
/// `dense_i/bias`). Needs a dataset with layers[0] dense features and
/// multiclass labels of layers[n] classes.
class mlp final : public model {
public:
  /// @throws input_error if fewer than two widths are given, one is zero, or
  ///         the last (the classes) is below 2.
  explicit mlp(std::vector<uint64_t> layers);

  std::vector<variable_def> variables() const override;
  void check_schema(const data_schema& schema) const override;
  void initialize(float* dense, uint64_t seed) const override;
  std::unique_ptr<model_workspace>
  make_workspace(uint64_t max_rows) const override;
  double loss_and_gradient(const model_inputs& in, const example_batch& batch,
                           float* dense_grad,
                           model_workspace& ws) const override;
  /// One stage per layer (its kernel and bias).
  std::vector<uint64_t> forward_stages() const override;
  void forward_stage(const model_inputs& in, const example_batch& batch,
                     uint32_t s, model_workspace& ws) const override;
  void evaluate(const model_inputs& in, const example_batch& batch,
                eval_accumulator& acc, model_workspace& ws) const override;
  /// The number of classes (softmax probabilities).
  uint32_t prediction_width() const override;
  void predict(const model_inputs& in, const example_batch& batch, float* out,
               model_workspace& ws) const override;
  metric_list metrics(const eval_accumulator& acc) const override;

  uint64_t input_dim() const {
    return tower_.widths().front();
  }

  uint64_t classes() const {
    return tower_.widths().back();
  }

  /// Its layers, for an exporter (models/export/).
  const dense_tower& tower() const noexcept {
    return tower_;
  }

private:
  /// The forward pass from stage in.stages_done on (the batch's features
  /// copied in first when 0): the logits, batch.rows x classes, in `ws`.
  /// The one forward pass of training, evaluation and predict().
  Eigen::Ref<dense_tower::matrix> forward(const model_inputs& in,
                                          const example_batch& batch,
                                          dense_tower::workspace& ws) const;

  dense_tower tower_;
};

} // namespace actorps
