#pragma once

// A model ready to answer predictions: an export (apps `actorps export`,
// docs/guide/serving.md) loaded into memory, dense weights in one flat
// buffer and each embedding table's rows memory-mapped from its shard
// files. It runs the training code's forward pass (model::predict); no
// parameter server, no CAF, no sockets. The HTTP server
// (cluster/serve/) holds one servable per model version and swaps them
// atomically when a newer export lands.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/example_batch.hpp"

namespace actorps {

/// Counts a servable adds to while answering (relaxed atomics: any thread
/// may read them at any time).
struct servable_counters {
  /// Table lookups (distinct keys of a batch of up to 256 examples) whose
  /// key the export does not hold: they got the table's default row, the
  /// row training creates for a key it never saw (core/table_init.hpp:
  /// drawn from the init seed, the table and the key; zeros for a table
  /// with init_scale 0, as sparse_logistic_regression's), so that the
  /// prediction is the evaluator's.
  std::atomic<uint64_t> unknown_keys{0};
  /// Examples predicted.
  std::atomic<uint64_t> examples{0};
};

/// One loaded export. Immutable after load: predict() may be called from
/// any number of threads at once.
class servable {
public:
  virtual ~servable() = default;

  /// Loads the export in `dir` (its manifest.json, the ONNX file's dense
  /// weights, the table shard files, each checked against the manifest's
  /// checksum).
  /// @throws input_error naming the file and what is wrong (a missing
  ///         shard, a bad checksum, a manifest of another format version);
  ///         nothing is half-loaded then.
  static std::shared_ptr<const servable> load(const std::string& dir);

  /// The model's name as the manifest gives it (the REST path's NAME).
  virtual const std::string& name() const = 0;

  /// The export's version: the global step of the checkpoint it was made
  /// from (TensorFlow Serving's model version).
  virtual uint64_t version() const = 0;

  /// The examples it takes: dense width, sparse fields (names, vocabulary,
  /// weighted) and label kind, as in training.
  virtual const data_schema& schema() const = 0;

  /// Floats predict() writes per example: 1 for a binary model (the
  /// probability of label 1), the number of classes for a multiclass one
  /// (softmax probabilities, summing to 1).
  virtual uint32_t outputs_per_example() const = 0;

  /// Predicts `batch` (labels ignored; fields and dense_dim as schema()
  /// says): batch.rows x outputs_per_example() floats, row-major, equal to
  /// what the evaluator computes on the checkpoint the export was made
  /// from (within float rounding).
  /// @throws input_error for a batch that does not fit schema() (naming
  ///         the dense width or field), nothing counted then.
  virtual std::vector<float> predict(const example_batch& batch,
                                     servable_counters* counters
                                     = nullptr) const
    = 0;
};

/// The version a server should load from MODEL_DIR: the highest number
/// among its subdirectories named by a decimal number without leading
/// zeros (TensorFlow Serving's base-path layout, `actorps export`) that
/// hold a manifest.json. Temporary directories of an export in progress
/// (".tmp-*") and anything else are ignored. Reads names only; load()
/// checks the files.
/// @returns nullopt when there is none (or MODEL_DIR does not exist).
/// @throws input_error naming MODEL_DIR if it exists but cannot be listed.
std::optional<uint64_t> latest_export_version(const std::string& model_dir);

/// Every version in `model_dir` by the rule above, ascending (a server that
/// cannot load the newest falls back on an older one).
/// @throws input_error "MODEL_DIR: cannot list the export's versions: WHY"
///         if it cannot be read (also when it does not exist).
std::vector<uint64_t> export_versions(const std::string& model_dir);

} // namespace actorps
