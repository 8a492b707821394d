#pragma once

#include "models/dense_tower.hpp"
#include "models/model.hpp"

namespace actorps {

/// A recommendation / click-through model in the style of the embedding +
/// MLP family (Covington et al., "Deep Neural Networks for YouTube
/// Recommendations", RecSys 2016; DLRM's embeddings-and-MLP path, Naumov et
/// al., 2019, without its pairwise interactions): every sparse field of the
/// data has an embedding table of `embedding_dim` floats; an example's keys of
/// a field are combined as TensorFlow's `embedding_lookup_sparse` does:
/// `sum` = sum_i v_i e_i, `mean` = sum_i v_i e_i / sum_i v_i (v_i the key's
/// value, 1 in fields without values; a field without keys, or whose values
/// sum to 0, gives zeros); the fields'
/// vectors and the dense features are concatenated (fields * dim + dense_dim
/// floats) and fed to a dense tower (ReLU between layers) whose single output
/// is a logit; binary cross-entropy loss.
///
/// Variables: `embedding/FIELD` (table: the field's vocabulary, or unbounded
/// keys; rows start U(-init_scale, init_scale)), then the tower's
/// `dense_i/kernel` and `dense_i/bias`.
///
/// Options (the model section): embedding_dim (16), combiner ("mean" |
/// "sum", default mean), init_scale (0.05, Keras' Embedding default range);
/// layers: the tower's widths, input first: fields * embedding_dim +
/// dense_dim, ..., 1.
class embedding_mlp final : public model {
public:
  /// @throws input_error naming the option: layers that do not start with
  ///         the concatenated width or do not end in 1, an unknown combiner,
  ///         a schema without fields or with multiclass labels.
  embedding_mlp(const data_schema& schema, std::vector<uint64_t> layers,
                uint64_t embedding_dim, bool mean, float init_scale);

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
  /// One stage per tower layer; the first also combines the rows.
  std::vector<uint64_t> forward_stages() const override;
  void forward_stage(const model_inputs& in, const example_batch& batch,
                     uint32_t s, model_workspace& ws) const override;
  void evaluate(const model_inputs& in, const example_batch& batch,
                eval_accumulator& acc, model_workspace& ws) const override;
  /// 1: the probability of a click (label 1).
  uint32_t prediction_width() const override;
  void predict(const model_inputs& in, const example_batch& batch, float* out,
               model_workspace& ws) const override;
  metric_list metrics(const eval_accumulator& acc) const override;

  /// The model's parts, for an exporter (models/export/).
  const data_schema& schema() const noexcept {
    return schema_;
  }
  uint64_t embedding_dim() const noexcept {
    return dim_;
  }
  bool mean_combiner() const noexcept {
    return mean_;
  }
  const dense_tower& tower() const noexcept {
    return tower_;
  }

private:
  /// The forward pass from stage in.stages_done on (the tower's input
  /// filled first when 0): the logits in ws.act.back(). The one forward
  /// pass of training, evaluation and predict().
  void forward(const model_inputs& in, const example_batch& batch,
               dense_tower::workspace& ws) const;

  /// Fills the tower's input with the combined embeddings and dense features.
  void load_input(const model_inputs& in, const example_batch& batch,
                  dense_tower::workspace& ws) const;

  data_schema schema_;
  uint64_t dim_;
  bool mean_;
  float init_scale_;
  dense_tower tower_;
};

} // namespace actorps
