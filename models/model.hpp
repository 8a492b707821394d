#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/example_batch.hpp"
#include "core/metrics.hpp"
#include "core/placement.hpp"
#include "core/table_lookup.hpp"

namespace actorps {

/// Called by a model's backpropagation once the dense gradient floats
/// [first, last) of loss_and_gradient's `dense_grad` are final (a layer's
/// kernel and bias), in the order backpropagation produces them (last layer
/// first); see model_workspace::gradient_ready.
using gradient_ready_fn = std::function<void(const float* first,
                                             const float* last)>;

/// Scratch memory of one model user (one worker, one evaluation thread);
/// opaque to callers except for `gradient_ready`.
class model_workspace {
public:
  virtual ~model_workspace();

  /// Set by a worker that pushes each layer's gradient as soon as
  /// backpropagation produces it (job_config::layer_pushes; Jayarajan et
  /// al., "Priority-based Parameter Propagation", SysML 2019); empty
  /// otherwise. A model may call it during loss_and_gradient for any run of
  /// dense_grad it will not write again; one that never calls it has its
  /// gradient pushed whole after loss_and_gradient returns, as without the
  /// setting. Must not throw into the model (the worker's callback does not).
  gradient_ready_fn gradient_ready;
  /// Set by a worker for progressive evaluation (test, then train: a
  /// stream's closures); null otherwise. A binary model adds each example's
  /// log loss and score (its logit) during loss_and_gradient, from the
  /// values before the update (add_binary_predictions); a model that does
  /// not leaves it untouched, and the stream reports no AUC.
  eval_accumulator* predictions = nullptr;
};

/// What a model computes with for one batch: the dense variables in one flat
/// buffer laid out as placement::variable_offsets says (the dense variables
/// of variables(), one after another, each row-major), and the pulled rows
/// of each table, one table_lookup per table variable in variable order.
struct model_inputs {
  const float* dense = nullptr;
  std::vector<table_lookup>* tables = nullptr;
  /// The forward stages (model::forward_stage) already run on this batch
  /// with this workspace; loss_and_gradient goes on from the next. 0: none.
  uint32_t stages_done = 0;
};

/// A differentiable model whose variables live on the parameter servers.
///
/// A model declares its variables (dense tensors and embedding tables), says
/// which table keys a batch needs, and computes the loss and its gradients:
/// dense gradients in the flat layout, row gradients into each
/// table_lookup's `grad`. It owns its loss and its metrics. Implementations
/// are immutable and shared by all workers of a process; per-worker scratch
/// lives in a model_workspace. Adding a model: a file pair in models/ and one
/// line in models/registry.cpp.
class model {
public:
  virtual ~model();

  /// The model's variables. Dense ones are laid out in the flat buffer in
  /// this order; tables appear in model_inputs::tables in this order.
  virtual std::vector<variable_def> variables() const = 0;

  /// Checks that the examples of `schema` fit this model (dense width,
  /// fields, label kind, classes).
  /// @throws input_error naming the model field or the dataset.
  virtual void check_schema(const data_schema& schema) const = 0;

  /// Fills the flat dense buffer (model_size floats) with initial values
  /// drawn from a generator seeded with `seed`. Table rows are initialised by
  /// the parameter servers (table_store), not here.
  virtual void initialize(float* dense, uint64_t seed) const = 0;

  /// Creates scratch memory for batches of up to `max_rows` examples.
  virtual std::unique_ptr<model_workspace>
  make_workspace(uint64_t max_rows) const = 0;

  /// Sets each table's `occurrences` for `batch`: the key of every lookup
  /// loss_and_gradient() and evaluate() will make, in the order they read
  /// `inverse`. `tables` has one entry per table variable (variable and dim
  /// set). The default (no tables) does nothing.
  virtual void collect_keys(const example_batch& batch,
                            std::vector<table_lookup>& tables) const;

  /// Computes the mean loss over `batch`, writes the gradient of every dense
  /// parameter into `dense_grad` (same layout as in.dense) and the row
  /// gradients into each table's `grad` (zeroed by the caller). Units:
  /// d(mean loss)/d(parameter).
  /// @pre batch.rows <= the workspace's max_rows; the tables' rows pulled
  ///      for the keys of collect_keys(batch); the dense features as floats
  ///      in batch.dense (batches built by example_batch::append_row, as
  ///      every batch_source's are, even from a dataset held as bytes).
  /// @throws std::exception only for bugs or unusable batches (the worker
  ///         turns it into the closure's error).
  virtual double loss_and_gradient(const model_inputs& in,
                                   const example_batch& batch,
                                   float* dense_grad,
                                   model_workspace& ws) const
    = 0;

  /// A staged forward pass (cluster.priority_pulls; after Jayarajan et
  /// al., "Priority-based Parameter Propagation", SysML 2019: the forward
  /// pass starts on the first layers' values while the later layers' are
  /// still on their way). Its stages in order, each given as the end of the
  /// prefix of the flat dense buffer it reads: stage s reads only
  /// in.dense[0, result[s]) (and every table's rows). Non-decreasing, each
  /// at most dense_parameters(). Empty (the default): one stage, run by
  /// loss_and_gradient; the worker then pulls the values whole.
  virtual std::vector<uint64_t> forward_stages() const;

  /// Runs forward stage `s` of loss_and_gradient on `batch`, stages 0..s-1
  /// having run just before on the same batch and workspace; reads only
  /// in.dense[0, forward_stages()[s]) (the rest may still be on the wire).
  /// loss_and_gradient then goes on with in.stages_done = s + 1.
  /// @throws std::logic_error for a model without stages (the default);
  ///         otherwise as loss_and_gradient.
  virtual void forward_stage(const model_inputs& in, const example_batch& batch,
                             uint32_t s, model_workspace& ws) const;

  /// Adds the loss and predictions of `batch` to `acc` (no gradients).
  /// Same preconditions as loss_and_gradient().
  virtual void evaluate(const model_inputs& in, const example_batch& batch,
                        eval_accumulator& acc, model_workspace& ws) const
    = 0;

  /// Floats predict() writes per example: 1 for a binary model (the
  /// probability of label 1), the number of classes for a multiclass one;
  /// 0 (the default) for a model that does not predict (it cannot be
  /// exported or served).
  virtual uint32_t prediction_width() const;

  /// Writes the model's outputs for every example of `batch` into `out`:
  /// batch.rows x prediction_width() floats, row-major; a binary model the
  /// probability of label 1 (sigmoid of the logit), a multiclass one the
  /// softmax probabilities (summing to 1). Runs the same forward pass as
  /// loss_and_gradient() and evaluate() (labels are not read). Same
  /// preconditions as evaluate().
  /// @throws input_error for a model without predictions (the default).
  virtual void predict(const model_inputs& in, const example_batch& batch,
                       float* out, model_workspace& ws) const;

  /// The model's test metrics from an accumulator, in report order; the
  /// first is the loss: multiclass {test_loss, test_accuracy}, binary
  /// {test_loss, test_auc, test_accuracy}.
  virtual metric_list metrics(const eval_accumulator& acc) const = 0;

  /// Floats of all dense variables.
  uint64_t dense_parameters() const;
};

/// The metrics of a softmax classifier: test_loss, test_accuracy.
metric_list multiclass_metrics(const eval_accumulator& acc);

/// The metrics of a binary classifier: test_loss (log loss), test_auc,
/// test_accuracy (score > 0.5).
metric_list binary_metrics(const eval_accumulator& acc);

/// Checks that examples of `given` fit a binary model `name` built for
/// `built` (binary labels, the same fields and dense width).
/// @throws input_error naming model.type or the data.
void check_binary_schema(const data_schema& built, const data_schema& given,
                         const char* name);

/// Sets tables[f].occurrences to the keys of field f of `batch`, in CSR
/// order, for the first `fields` fields (models with one table per field).
void collect_field_keys(const example_batch& batch,
                        std::vector<table_lookup>& tables, size_t fields);

} // namespace actorps
