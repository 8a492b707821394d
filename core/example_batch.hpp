#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace actorps {

/// What the labels of a dataset are.
enum class label_kind : uint8_t {
  /// One class index in [0, classes) per example (softmax models).
  multiclass,
  /// 0 or 1 per example (click / no click, liked / not liked).
  binary,
};

/// One sparse (categorical) input field, as a dataset describes it.
struct field_schema {
  std::string name;
  /// Keys are in [0, vocabulary); 0 = unbounded 64-bit keys (hashed values).
  uint64_t vocabulary = 0;
  /// Whether examples carry a value per key (LIBSVM "index:value"); without,
  /// every key counts 1.
  bool weighted = false;
};

/// The shape of a dataset's examples, so that a model can check that it fits
/// (model::check_schema) before anything runs.
struct data_schema {
  /// Dense features per example.
  uint64_t dense_dim = 0;
  /// Sparse fields, in the order of example_batch::fields.
  std::vector<field_schema> fields;
  label_kind labels = label_kind::multiclass;
  /// multiclass: number of classes; binary: 2.
  uint32_t classes = 2;
};

/// Examples in memory: a minibatch, or a whole dataset.
///
/// - dense: rows x dense_dim floats, row-major.
/// - fields[f]: the keys of sparse field f for every row, in CSR form: row r
///   has keys[offsets[r] .. offsets[r + 1]) (zero, one or several: multi-hot),
///   with values[i] the value of keys[i] when the field is weighted (values
///   is empty otherwise). offsets has rows + 1 entries, starting at 0.
/// - labels: rows entries (a class index, or 0/1).
struct example_batch {
  uint64_t rows = 0;
  uint64_t dense_dim = 0;
  std::vector<float> dense;

  struct field {
    std::vector<uint64_t> offsets{0};
    std::vector<uint64_t> keys;
    std::vector<float> values;
  };
  std::vector<field> fields;

  std::vector<int32_t> labels;

  /// Empties the batch for `num_fields` fields and dense_dim `dim`, keeping
  /// the allocated memory.
  void reset(uint64_t dim, size_t num_fields);

  /// Appends row `r` of `src` (same dense_dim and field count).
  void append_row(const example_batch& src, uint64_t r);

  /// Checks the invariants above.
  /// @throws input_error "WHAT: ..." naming the first broken one.
  void check(const std::string& what) const;
};

} // namespace actorps
