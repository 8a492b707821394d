#include "models/step_function.hpp"

#include <iterator>

namespace actorps {

namespace {

double train_step(const model& net, const model_inputs& in,
                  const example_batch& batch, float* dense_grad,
                  model_workspace& ws) {
  return net.loss_and_gradient(in, batch, dense_grad, ws);
}

/// The mean loss of the next batch at the current values, without an
/// update (for watching a job's training loss).
double loss_step(const model& net, const model_inputs& in,
                 const example_batch& batch, float*, model_workspace& ws) {
  eval_accumulator acc;
  net.evaluate(in, batch, acc, ws);
  return acc.mean_loss();
}

/// The registry: one line per step function.
const step_function registry[] = {
  {train_step_name, true, train_step},
  {"loss_step", false, loss_step},
};

} // namespace

const step_function* find_step_function(const std::string& name) {
  for (auto& f : registry)
    if (name == f.name)
      return &f;
  return nullptr;
}

std::vector<std::string> step_function_names() {
  std::vector<std::string> result;
  for (auto& f : registry)
    result.emplace_back(f.name);
  return result;
}

} // namespace actorps
