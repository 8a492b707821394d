#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.hpp"

namespace actorps {

struct job_config;

/// Builds the model a job config names (model.type, model.layers, the model
/// section's other fields) for examples of `schema`.
/// @throws input_error for an unknown model, a model field that is wrong, or
///         a schema the model cannot use (naming the field).
std::shared_ptr<const model> make_model(const job_config& cfg,
                                        const data_schema& schema);

/// The names the model registry knows, sorted: the built-in models and those
/// added with register_model.
std::vector<std::string> model_names();

/// Builds a model for examples of a schema from a job config (the
/// `model` section: cfg.model_options holds its fields, cfg.layers its
/// widths). Throws input_error naming the field for a wrong one.
using model_factory = std::function<std::shared_ptr<const model>(
  const job_config& cfg, const data_schema& schema)>;

/// Adds the model `name` to the registry at run time, so that a program
/// built on the library (an outside project) can train its own model by name
/// (model.type) without editing actorps.
///
/// Call it before anything builds a model by that name, in every process of
/// a cluster (each node builds the model itself). Thread-safe.
/// @throws std::invalid_argument "register_model(\"NAME\"): ..." if `name`
///         is empty or taken (built in or registered before), or `make` is
///         empty; the registry is then unchanged.
void register_model(const std::string& name, model_factory make);

/// Removes the model `name` that register_model added, so that the name is
/// free again and model_names() no longer lists it (a test that registered
/// its own model, a plug-in being unloaded). Built-in models are never
/// removed. Models built before stay valid (they own their factory's
/// result). Thread-safe.
/// @returns whether `name` was a registered model (false for a built-in
///          name or one never registered; nothing changes then).
bool unregister_model(const std::string& name);

} // namespace actorps
