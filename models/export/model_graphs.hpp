#pragma once

// What an export needs to know of each model type beyond the model
// interface: which sparse field feeds which table with which combiner, and
// the forward pass as an ONNX graph. One entry per model type
// (model_graphs.cpp); a model without one cannot be exported.

#include <cstdint>
#include <string>
#include <vector>

#include "core/example_batch.hpp"
#include "models/export/onnx_graph.hpp"
#include "models/model.hpp"

namespace actorps::export_detail {

/// One embedding table of an exported model.
struct export_table {
  /// Index of the table in model::variables().
  uint32_t variable = 0;
  /// Its name there ("embedding/user").
  std::string name;
  /// The schema field whose keys it looks up.
  uint32_t field = 0;
  /// Floats per row.
  uint64_t dim = 1;
  /// Fixed vocabulary, or 0 for unbounded keys.
  uint64_t vocabulary = 0;
  /// U(-init_scale, init_scale): the row of a key never trained
  /// (core/table_init.hpp).
  float init_scale = 0.0f;
  /// How the rows of a field's keys are combined: "sum" or "mean"
  /// (TensorFlow's embedding_lookup_sparse combiners, weighted by the keys'
  /// values).
  std::string combiner = "sum";
  /// Whether its rows are an initializer of the ONNX file (then `rows`
  /// holds vocabulary x dim floats) or in table shard files.
  bool in_onnx = false;
  const float* rows = nullptr;
};

/// The ONNX names of a field's inputs: "FIELD.keys", "FIELD.weights",
/// "FIELD.rows" (docs/reference/export-format.md).
std::string keys_input(const std::string& field);
std::string weights_input(const std::string& field);
std::string rows_input(const std::string& field);

/// The graph side of a model type.
struct model_graph {
  /// The tables of `net` (its table variables, in order), with their field
  /// and combiner; in_onnx false.
  std::vector<export_table> (*tables)(const model& net,
                                      const data_schema& schema);
  /// Writes the inputs, nodes and outputs ("logits", "probabilities") of
  /// the forward pass; the dense variables become initializers named as
  /// the variables, from `dense` (the flat layout of model_inputs::dense).
  void (*write)(const model& net, const data_schema& schema,
                const float* dense, const std::vector<export_table>& tables,
                onnx_builder& b);
};

/// The graph side of model type `type` (job_config::model).
/// @throws input_error "model.type: ... cannot be exported" naming the
///         types that can.
const model_graph& graph_of(const std::string& type);

} // namespace actorps::export_detail
