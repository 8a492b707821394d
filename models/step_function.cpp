#include "models/step_function.hpp"

#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/registry.hpp"

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

/// The built-in step functions: one line per step function.
const step_function built_in_steps[] = {
  {train_step_name, true, train_step, true},
  {"loss_step", false, loss_step},
};

/// A step function as the registry keeps it: with its own copy of the name
/// (f.name points to it).
struct named_step {
  std::string name;
  step_function f;

  explicit named_step(const step_function& g) : name(g.name), f(g) {
    f.name = name.c_str();
  }

  named_step(const named_step&) = delete;
  named_step& operator=(const named_step&) = delete;
};

using step_ptr = std::shared_ptr<const named_step>;

/// The built-in step functions, then those added at run time.
registry<step_ptr>& functions() {
  static registry<step_ptr> r{"register_step_function", "step function",
                              built_in_steps, [](const step_function& line) {
                                return std::make_shared<const named_step>(
                                  line);
                              }};
  return r;
}

/// Step functions that unregister_step_function removed. find_step_function
/// hands out pointers that must stay valid (a worker may still be running a
/// closure of it), so they are kept for the process's life (a few bytes per
/// registration).
void retire(step_ptr f) {
  static std::mutex mtx;
  static std::vector<step_ptr> retired;
  std::lock_guard<std::mutex> guard{mtx};
  retired.push_back(std::move(f));
}

} // namespace

const step_function* find_step_function(const std::string& name) {
  // The registry or the retired list keeps the entry alive.
  if (auto f = functions().find(name))
    return &(*f)->f;
  return nullptr;
}

std::vector<std::string> step_function_names() {
  return functions().names();
}

void register_step_function(const step_function& f) {
  if (f.name == nullptr)
    throw std::invalid_argument("register_step_function: empty name");
  if (f.compute == nullptr)
    throw std::invalid_argument(fmt::format(
      "register_step_function(\"{}\"): no compute function", f.name));
  functions().add(f.name, std::make_shared<const named_step>(f));
}

bool unregister_step_function(const std::string& name) {
  auto f = functions().remove(name);
  if (!f)
    return false;
  retire(std::move(*f));
  return true;
}

} // namespace actorps
