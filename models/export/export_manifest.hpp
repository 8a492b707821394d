#pragma once

// manifest.json of an export (docs/reference/export-format.md): what a
// server needs to rebuild the model and check every file before it
// answers with it.

#include <cstdint>
#include <string>
#include <vector>

#include "core/example_batch.hpp"
#include "core/options.hpp"

namespace actorps {

/// The format name and version written into every manifest.json.
constexpr const char* export_format_name = "actorps-export";
constexpr uint32_t export_format_version = 1;

/// A file of an export, checked at load: its path relative to the version
/// directory, size, and CRC-32 (zlib's) over all its bytes.
struct export_file {
  std::string path;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

/// One table shard file of a table: its path, rows, and first and last
/// key (files of a table hold disjoint, increasing key ranges).
struct export_table_file {
  std::string path;
  uint64_t rows = 0;
  uint64_t first_key = 0;
  uint64_t last_key = 0;
};

/// One embedding table of the exported model.
struct export_table_entry {
  /// The variable ("embedding/user") and the schema field feeding it.
  std::string variable;
  std::string field;
  /// "sum" or "mean" (weighted by the keys' values).
  std::string combiner = "sum";
  uint64_t dim = 1;
  /// Fixed vocabulary, or 0 for unbounded keys.
  uint64_t vocabulary = 0;
  /// A key the export does not hold gets its initial row: U(-init_scale,
  /// init_scale) drawn from (init_seed, variable, key) as in training
  /// (core/table_init.hpp); zeros when init_scale is 0.
  float init_scale = 0.0f;
  uint64_t init_seed = 0;
  /// "onnx": the rows are the ONNX initializer named `variable`
  /// (vocabulary x dim, every key); "files": in `files`.
  std::string stored = "onnx";
  /// Rows held (onnx: vocabulary).
  uint64_t rows = 0;
  std::vector<export_table_file> files;
};

/// The contents of manifest.json.
struct export_manifest {
  /// The model's name (the REST path's NAME).
  std::string name;
  /// The model section, as job_config holds it: enough for make_model.
  std::string model_type;
  std::vector<uint64_t> layers;
  uint64_t init_seed = 0;
  option_map model_options;
  /// The examples it takes.
  data_schema schema;
  /// Floats per example of the predictions (model::prediction_width).
  uint32_t outputs_per_example = 0;
  /// The checkpoint: global step (the export's version), its directory's
  /// name, its id (16 hex digits) and when it was written (UTC,
  /// "YYYY-MM-DDTHH:MM:SSZ").
  uint64_t global_step = 0;
  std::string checkpoint_dir;
  std::string checkpoint_id;
  std::string checkpoint_time;
  /// This build's version ("0.1.0") and when the export was made (UTC).
  std::string actorps_version;
  std::string created;
  /// The ONNX file (relative path), its opset, and the names of its inputs
  /// and outputs in graph order.
  std::string onnx_file = "model.onnx";
  int64_t onnx_opset = 0;
  std::vector<std::string> onnx_inputs;
  std::vector<std::string> onnx_outputs;
  std::vector<export_table_entry> tables;
  /// Every other file of the export, the ONNX file and the table files.
  std::vector<export_file> files;
};

/// The manifest as JSON text (pretty-printed).
std::string to_json_text(const export_manifest& m);

/// Parses manifest.json text, checking every field's presence, type and
/// range, the format name and version, and that every path is a plain
/// relative path inside the directory.
/// @throws input_error "PATH: WHAT" naming the field.
export_manifest parse_export_manifest(const std::string& text,
                                      const std::string& path);

} // namespace actorps
