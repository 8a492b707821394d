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
/// - dense_bytes: the same features held as bytes instead, for a dataset
///   whose features are bytes (IDX images): rows x dense_dim bytes,
///   row-major, feature value = float(byte) x byte_scale. A batch holds one
///   form: when dense_bytes is not empty, dense is empty. A 60,000 x 784
///   image split holds 47 MB this way, 188 MB as floats.
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

  /// Dense features as bytes (see above); empty when they are floats.
  std::vector<uint8_t> dense_bytes;
  /// What one unit of a byte of dense_bytes is worth (1/255 for pixels
  /// scaled to [0, 1]).
  float byte_scale = 1.0f;

  /// Empties the batch for `num_fields` fields and dense_dim `dim`, keeping
  /// the allocated memory; dense features are then floats (byte_scale 1).
  void reset(uint64_t dim, size_t num_fields);

  /// Appends row `r` of `src` (same dense_dim and field count; r < src.rows,
  /// unchecked). Dense features are appended to `dense` as floats whatever
  /// form `src` holds them in: from bytes, value d is exactly
  /// `static_cast<float>(src.dense_bytes[r * dense_dim + d]) *
  /// src.byte_scale`, so a dataset of bytes gives the batches a dataset of
  /// those floats gives. `this` must hold floats (dense_bytes empty).
  void append_row(const example_batch& src, uint64_t r);

  /// Checks the invariants above.
  /// @throws input_error "WHAT: ..." naming the first broken one.
  void check(const std::string& what) const;
};

} // namespace actorps
