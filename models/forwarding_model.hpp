#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "models/model.hpp"

namespace actorps {

/// A model that hands every call to another: derive from it to change a
/// few calls of a model and keep the rest (fault injection's failing
/// model, a test's model that records what the worker calls).
class forwarding_model : public model {
public:
  explicit forwarding_model(std::shared_ptr<const model> net)
    : net_(std::move(net)) {
    // nop
  }

  std::vector<variable_def> variables() const override {
    return net_->variables();
  }

  void check_schema(const data_schema& schema) const override {
    net_->check_schema(schema);
  }

  void initialize(float* dense, uint64_t seed) const override {
    net_->initialize(dense, seed);
  }

  std::unique_ptr<model_workspace>
  make_workspace(uint64_t max_rows) const override {
    return net_->make_workspace(max_rows);
  }

  void collect_keys(const example_batch& batch,
                    std::vector<table_lookup>& tables) const override {
    net_->collect_keys(batch, tables);
  }

  double loss_and_gradient(const model_inputs& in, const example_batch& batch,
                           float* dense_grad,
                           model_workspace& ws) const override {
    return net_->loss_and_gradient(in, batch, dense_grad, ws);
  }

  std::vector<uint64_t> forward_stages() const override {
    return net_->forward_stages();
  }

  void forward_stage(const model_inputs& in, const example_batch& batch,
                     uint32_t s, model_workspace& ws) const override {
    net_->forward_stage(in, batch, s, ws);
  }

  void evaluate(const model_inputs& in, const example_batch& batch,
                eval_accumulator& acc, model_workspace& ws) const override {
    net_->evaluate(in, batch, acc, ws);
  }

  uint32_t prediction_width() const override {
    return net_->prediction_width();
  }

  void predict(const model_inputs& in, const example_batch& batch, float* out,
               model_workspace& ws) const override {
    net_->predict(in, batch, out, ws);
  }

  metric_list metrics(const eval_accumulator& acc) const override {
    return net_->metrics(acc);
  }

protected:
  /// The model the calls go to.
  const model& inner() const noexcept {
    return *net_;
  }

private:
  std::shared_ptr<const model> net_;
};

} // namespace actorps
