#pragma once

#include <string>
#include <vector>

#include "models/model.hpp"

namespace actorps {

/// What a worker does for one closure, by name (closures carry names, not
/// code: every node has the same registry compiled in). The worker runs a
/// step in phases: take the next batch of its dataset -> the model names the
/// table keys it needs -> pull the dense variables and those rows from every
/// parameter server -> `compute` -> if `pushes`, push the dense and row
/// gradients to every server. Adding a step function: one entry in
/// models/step_function.cpp.
struct step_function {
  /// The name closures use ("train_step").
  const char* name;
  /// Whether the step pushes gradients (a training step) or only reads.
  bool pushes;
  /// Computes on one batch and returns the value the closure reports as its
  /// loss. With `pushes`, writes the dense gradient into `dense_grad` and
  /// row gradients into the tables' `grad` (as model::loss_and_gradient).
  /// May throw: the worker turns an exception into the closure's error
  /// (errc::step_failed), not a worker failure.
  double (*compute)(const model& net, const model_inputs& in,
                    const example_batch& batch, float* dense_grad,
                    model_workspace& ws);
};

/// The step function registered as `name`, or nullptr.
const step_function* find_step_function(const std::string& name);

/// Every registered name, in registry order.
std::vector<std::string> step_function_names();

/// The name of the training step of `actorps train`.
inline constexpr const char* train_step_name = "train_step";

} // namespace actorps
