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
/// models/step_function.cpp, or register_step_function at run time.
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
  /// Whether `compute` runs the model's forward pass through
  /// model::loss_and_gradient, which goes on after in.stages_done stages:
  /// then a worker with priority pulls (cluster.priority_pulls) runs the
  /// first stages (model::forward_stage) while the later layers' values
  /// are still on their way. Otherwise the values come whole first.
  bool staged = false;
};

/// The step function registered as `name` (built in, then added with
/// register_step_function), or nullptr. The pointer stays valid for the
/// process's life, also after unregister_step_function.
const step_function* find_step_function(const std::string& name);

/// Every registered name, sorted: the built-in step functions and those
/// added with register_step_function.
std::vector<std::string> step_function_names();

/// Adds `f` to the registry at run time under `f.name` (copied), so that a
/// program built on the library (an outside project) can schedule its own
/// step function by name without editing actorps.
///
/// Closures carry names, not code: call it in every process of a cluster
/// (on the coordinator, which checks names at schedule(), and on every
/// worker), before closures name it. Thread-safe.
/// @throws std::invalid_argument "register_step_function(\"NAME\"): ..."
///         if the name is null, empty or taken (built in or registered
///         before), or `f.compute` is null; nothing changes then.
void register_step_function(const step_function& f);

/// Removes the step function `name` that register_step_function added, so
/// that find_step_function no longer finds it, step_function_names() no
/// longer lists it and the name may be registered again (a test that
/// registered its own, a plug-in being unloaded). Built-in step functions
/// are never removed. A pointer find_step_function returned for it stays
/// valid (the entry is kept, out of sight, for the process's life), so a
/// closure running it finishes. Thread-safe.
/// @returns whether `name` was a registered step function (false for a
///          built-in name or one never registered; nothing changes then).
bool unregister_step_function(const std::string& name);

/// The name of the training step of `actorps train`.
inline constexpr const char* train_step_name = "train_step";

} // namespace actorps
