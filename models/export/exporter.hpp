#pragma once

// `actorps export`: a checkpoint turned into a servable model
// (docs/reference/export-format.md, docs/guide/serving.md).

#include <cstdint>
#include <string>

#include "core/checkpoint.hpp"
#include "core/example_batch.hpp"

namespace actorps {

struct job_config;

/// How an export is written.
struct export_options {
  /// Tables of a fixed vocabulary go into the ONNX file, all their rows
  /// (vocabulary x dim x 4 bytes) as an initializer behind Gather, while
  /// their bytes together fit this limit (smallest tables first);
  /// tables above it, and tables of unbounded keys, go into table shard
  /// files. 0: every table in files.
  uint64_t table_limit_bytes = uint64_t{64} << 20;
  /// The model's name in the manifest (the REST path's NAME); "": the
  /// config file's name without folder and extension ("fashion_mnist"), or
  /// the model type for a config without a file.
  std::string name;
};

/// What an export wrote.
struct export_result {
  /// MODEL_DIR/VERSION.
  std::string dir;
  /// The version: the checkpoint's global step.
  uint64_t version = 0;
  /// Bytes of all files written, the manifest included.
  uint64_t bytes = 0;
  /// Tables inside the ONNX file and in table shard files.
  uint32_t tables_in_onnx = 0;
  uint32_t tables_in_files = 0;
  /// Table shard files written.
  uint32_t table_files = 0;
};

/// Checks, before a job starts, that the model `cfg` describes can be
/// exported (it gives predictions and has an ONNX graph).
/// @throws input_error naming model.type otherwise.
void check_exportable(const job_config& cfg, const data_schema& schema);

/// When checkpoint directory `dir` was written (its manifest.json's
/// modification time; now if it has none), UTC "YYYY-MM-DDTHH:MM:SSZ".
std::string checkpoint_time_of(const std::string& dir);

/// Exports the checkpoint in `checkpoint_dir` (read and verified with
/// read_checkpoint: a delta's chain is replayed, so the export holds the
/// state the servers had) as MODEL_DIR/VERSION, VERSION its global step:
/// manifest.json, model.onnx and table shard files (the layout of
/// docs/reference/export-format.md). The model is the one `cfg` describes
/// (model section), built for examples of `schema`; the checkpoint must
/// hold exactly its variables.
///
/// Atomic: everything is written into MODEL_DIR/.tmp-VERSION-PID, fsynced,
/// and renamed to MODEL_DIR/VERSION only when complete; an earlier export
/// of the same version is swapped out atomically (renameat2) and removed.
/// A reader listing MODEL_DIR never sees a half export.
///
/// @throws input_error naming the checkpoint or the config field: a
///         corrupt or missing checkpoint, a model type that cannot be
///         exported, variables that differ from the model's, a key outside
///         a table's vocabulary. MODEL_DIR is then unchanged (the temporary
///         directory removed).
/// @throws runtime_failure naming the path on an I/O error (disk full, no
///         permission), MODEL_DIR unchanged as above.
export_result export_checkpoint(const std::string& checkpoint_dir,
                                const job_config& cfg,
                                const data_schema& schema,
                                const std::string& model_dir,
                                const export_options& opts = {});

/// As export_checkpoint, from a state already read (`st`, not a delta)
/// of the checkpoint directory named `checkpoint_name` ("ckpt-..."),
/// written at `checkpoint_time` (UTC, "YYYY-MM-DDTHH:MM:SSZ").
export_result export_state(const checkpoint_state& st,
                           const std::string& checkpoint_name,
                           const std::string& checkpoint_time,
                           const job_config& cfg, const data_schema& schema,
                           const std::string& model_dir,
                           const export_options& opts = {});

} // namespace actorps
