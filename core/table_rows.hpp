#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>

namespace actorps::detail {

/// Marks a key without a row in a list of row numbers.
constexpr uint32_t no_table_row = UINT32_MAX;

/// Marks a key admitted in this call whose row is made once room is made.
constexpr uint32_t pending_table_row = UINT32_MAX - 1;

/// The most rows a shard holds: row numbers stay below both marks.
constexpr uint64_t max_table_rows = pending_table_row;

/// The rows of one table shard as parallel arrays (structure of arrays), so
/// that a pull copies `dim` contiguous floats per key and metadata that a
/// policy does not need costs nothing:
///
///   keys[r], values[r dim, (r + 1) dim), slots[s][r dim, (r + 1) dim),
///   steps[r] (updates applied to row r), and where kept
///   updated_at[r]  the caller's clock at the row's last update (time to live)
///   accessed_at[r] the shard's call number at its last access (LRU, and the
///                  rows a call uses: they are never evicted during it)
///   frequency[r]   its decayed access count as of accessed_at[r] (LFU)
///   changed_at[r]  the change epoch of its last change (delta checkpoints)
///
/// with index: key -> r. Removing a row moves the last row into its place
/// (swap with last), so the arrays stay dense and row numbers below size().
/// Not thread-safe.
struct table_rows {
  uint64_t dim = 1;
  std::vector<float> slot_inits;
  absl::flat_hash_map<uint64_t, uint32_t> index;
  std::vector<uint64_t> keys;
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
  std::vector<uint64_t> steps;
  // -- optional metadata: each array is empty unless its flag is set ----------
  bool keep_updated = false;
  bool keep_accessed = false;
  bool keep_frequency = false;
  bool keep_changed = false;
  std::vector<uint64_t> updated_at;
  std::vector<uint64_t> accessed_at;
  std::vector<float> frequency;
  std::vector<uint32_t> changed_at;
  /// The arrays' capacity grows by doubling but never past this many rows
  /// (the shard's row limit), so a full shard holds no spare half.
  uint64_t capacity_limit = max_table_rows;
  /// Rows every array holds without reallocating (append() allocates only
  /// when it reaches this, before it changes anything).
  size_t room = 0;

  /// What a new or replaced row is stamped with (where kept).
  struct stamps {
    uint64_t updated = 0;
    uint64_t accessed = 0;
    uint32_t changed = 0;
  };

  size_t size() const noexcept {
    return keys.size();
  }

  /// Makes every array hold `n` rows without reallocating.
  /// @throws std::bad_alloc (the rows are unchanged; some capacity may grow)
  void reserve(size_t n);

  /// Appends a row for `key`, which has none: step 0, slots at their initial
  /// values, frequency 1, the given stamps; its `dim` values are left for the
  /// caller to write at the returned row number.
  /// @throws std::length_error at max_table_rows rows; std::bad_alloc. The
  ///         rows are unchanged then.
  uint32_t append(uint64_t key, const stamps& s);

  /// Removes row `r`: the last row moves into its place (index updated).
  /// @pre r < size()
  void remove(uint32_t r) noexcept;

  /// Starts (or ends) keeping changed_at, every row at `epoch`.
  void keep_changes(bool on, uint32_t epoch);

  /// Allocates or frees the optional arrays to match the keep_ flags, every
  /// row taking `s`; call it after replacing the arrays (it resets room).
  void fit_metadata(const stamps& s);

  /// Bytes held by the arrays and the index (capacity, not size).
  size_t memory_bytes() const noexcept;
};

} // namespace actorps::detail
