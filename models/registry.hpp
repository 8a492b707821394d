#pragma once

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

/// The names the model registry knows, in registry order.
std::vector<std::string> model_names();

} // namespace actorps
