#pragma once

#include "models/model.hpp"

namespace actorps {

/// Logistic regression on sparse (and optionally dense) features, the
/// classic click-through model (e.g. McMahan et al., KDD 2013, trained with
/// FTRL-Proximal): logit = bias + sum over fields f and keys k of the example
/// of w_f[k] * value(k) + dense_features . d; binary cross-entropy loss.
///
/// Variables: one embedding table `weights/FIELD` of dimension 1 per sparse
/// field of the dataset (its vocabulary; rows start at 0), `dense_weights`
/// (dense_dim x 1, zeros) if the examples have dense features, and `bias`
/// (1 x 1, zero). Needs binary labels.
class sparse_logreg final : public model {
public:
  /// @throws input_error if the schema has neither fields nor dense features
  ///         or its labels are not binary.
  explicit sparse_logreg(const data_schema& schema);

  std::vector<variable_def> variables() const override;
  void check_schema(const data_schema& schema) const override;
  void initialize(float* dense, uint64_t seed) const override;
  std::unique_ptr<model_workspace>
  make_workspace(uint64_t max_rows) const override;
  void collect_keys(const example_batch& batch,
                    std::vector<table_lookup>& tables) const override;
  double loss_and_gradient(const model_inputs& in, const example_batch& batch,
                           float* dense_grad,
                           model_workspace& ws) const override;
  void evaluate(const model_inputs& in, const example_batch& batch,
                eval_accumulator& acc, model_workspace& ws) const override;
  /// 1: the probability of label 1.
  uint32_t prediction_width() const override;
  void predict(const model_inputs& in, const example_batch& batch, float* out,
               model_workspace& ws) const override;
  metric_list metrics(const eval_accumulator& acc) const override;

  /// The schema the model was built for (its fields and dense width).
  const data_schema& schema() const noexcept {
    return schema_;
  }

private:
  /// Writes the logit of every row of `batch` into `z`.
  void logits(const model_inputs& in, const example_batch& batch,
              std::vector<float>& z) const;

  data_schema schema_;
};

} // namespace actorps
