#include "models/step_function.hpp"

#include <deque>
#include <iterator>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

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
  {train_step_name, true, train_step, true},
  {"loss_step", false, loss_step},
};

/// Step functions added at run time (register_step_function). A deque:
/// find_step_function hands out pointers that must stay valid, so an entry
/// that unregister_step_function removes stays, marked removed (a few bytes
/// per registration).
struct added_functions {
  struct entry {
    std::string name;
    step_function f;
    bool removed = false;
  };
  std::mutex mtx;
  std::deque<entry> entries;
};

added_functions& added() {
  static added_functions x;
  return x;
}

} // namespace

const step_function* find_step_function(const std::string& name) {
  for (auto& f : registry)
    if (name == f.name)
      return &f;
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  for (auto& e : r.entries)
    if (!e.removed && e.name == name)
      return &e.f;
  return nullptr;
}

std::vector<std::string> step_function_names() {
  std::vector<std::string> result;
  for (auto& f : registry)
    result.emplace_back(f.name);
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  for (auto& e : r.entries)
    if (!e.removed)
      result.push_back(e.name);
  return result;
}

void register_step_function(const step_function& f) {
  if (f.name == nullptr || *f.name == '\0')
    throw std::invalid_argument("register_step_function: empty name");
  std::string name = f.name;
  if (f.compute == nullptr)
    throw std::invalid_argument(fmt::format(
      "register_step_function(\"{}\"): no compute function", name));
  for (auto& g : registry)
    if (name == g.name)
      throw std::invalid_argument(fmt::format(
        "register_step_function(\"{}\"): a built-in step function has that "
        "name",
        name));
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  for (auto& e : r.entries)
    if (!e.removed && e.name == name)
      throw std::invalid_argument(fmt::format(
        "register_step_function(\"{}\"): registered before", name));
  r.entries.push_back({name, f});
  auto& e = r.entries.back();
  e.f.name = e.name.c_str();
}

bool unregister_step_function(const std::string& name) {
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  for (auto& e : r.entries)
    if (!e.removed && e.name == name) {
      e.removed = true;
      return true;
    }
  return false;
}

} // namespace actorps
