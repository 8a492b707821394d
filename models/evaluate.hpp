#pragma once

// Evaluating a model in this process on variables held in memory (a loaded
// checkpoint, values pulled from the servers): no parameter server, no CAF.

#include <vector>

#include "core/dataset.hpp"
#include "core/metrics.hpp"
#include "core/placement.hpp"
#include "core/table_lookup.hpp"

namespace actorps {

class model;

/// The rows `data` needs: one table_lookup per table variable of `layout`
/// (layout.tables order), with every key the model looks up for any example
/// of `data` (model::collect_keys), deduplicated; `rows` sized to keys x dim,
/// contents unspecified (the caller fills them).
std::vector<table_lookup> keys_of(const model& net, const placement& layout,
                                  const dataset& data);

/// Evaluates `net` on every example of `data`, in batches of 256 examples
/// on up to `threads` threads (0: one per core), with the dense variables
/// `dense` (the flat model buffer, layout.model_size floats) and the rows of
/// `tables` (as keys_of returns them, rows filled).
/// @returns net.metrics() of the whole set.
/// @throws std::out_of_range if a batch needs a key `tables` lacks.
metric_list evaluate_model(const model& net, const float* dense,
                           const std::vector<table_lookup>& tables,
                           const dataset& data, unsigned threads);

/// The predictions of `net` for every example of `data` (model::predict):
/// rows x prediction_width() floats, row-major, computed as evaluate_model
/// computes its metrics (same batches, same rows).
/// @throws input_error for a model without predictions; as evaluate_model.
std::vector<float> predict_model(const model& net, const float* dense,
                                 const std::vector<table_lookup>& tables,
                                 const dataset& data, unsigned threads);

} // namespace actorps
