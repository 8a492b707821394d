#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <absl/container/flat_hash_map.h>

namespace actorps::detail {

/// Marks a key without a row in a list of row numbers.
constexpr uint32_t no_table_row = UINT32_MAX;

/// Marks a key admitted in this call whose row is made once room is made.
constexpr uint32_t pending_table_row = UINT32_MAX - 1;

/// The most rows a shard holds: row numbers stay below both marks.
constexpr uint64_t max_table_rows = pending_table_row;

/// Distance (in keys) at which a shard's passes over a batch prefetch the
/// hash map slot, the row and the record of a later key. Rows of a large
/// table are cache misses; with prefetching a batch's misses overlap (4, 8
/// and 16 measured alike, 0 clearly slower; see table_store::pull()).
constexpr size_t table_prefetch_distance = 8;

/// The rows of one table shard as parallel arrays, so that a pull copies
/// `dim` contiguous floats per key and metadata a policy does not need costs
/// nothing:
///
///   keys[r], values[r dim, (r + 1) dim), slots[s][r dim, (r + 1) dim),
///   meta[r stride, (r + 1) stride): the row's record of 64-bit words,
///     step     updates applied to row r (always, word 0)
///     updated  the caller's clock at its last update (time to live)
///     accessed the shard's call number at its last access (LRU; rows a
///              call uses are never evicted during it)
///     frequency its decayed access count as of `accessed` (LFU; a float)
///   changed: bit r set when row r changed since the last mark (delta
///            checkpoints; 1 bit a row, so 1M rows take 128 KiB and stay
///            in cache)
///
/// with index: key -> r. The record keeps a row's metadata in the line its
/// step count is in, which an update writes anyway: separate arrays cost
/// an update on a 1M-row shard a cache miss each (measured +30-50 ns a row).
/// Removing a row moves the last row into its place (swap with last), so the
/// arrays stay dense and row numbers below size(). Not thread-safe.
struct table_rows {
  uint64_t dim = 1;
  std::vector<float> slot_inits;
  absl::flat_hash_map<uint64_t, uint32_t> index;
  std::vector<uint64_t> keys;
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
  std::vector<uint64_t> meta;
  /// Words of a row's record, and where its optional words are (0: absent;
  /// set by layout()).
  size_t stride = 1;
  size_t updated_word = 0;
  size_t accessed_word = 0;
  size_t frequency_word = 0;
  /// Whether `changed` is kept (from the first mark on). Bits at and past
  /// size() are 0.
  bool keep_changed = false;
  std::vector<uint64_t> changed;
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
  };

  size_t size() const noexcept {
    return keys.size();
  }

  /// Chooses the record: step, then updated, accessed, frequency as asked.
  /// @pre no rows yet
  void layout(bool updated, bool accessed, bool frequency);

  bool keeps_updated() const noexcept {
    return updated_word != 0;
  }

  bool keeps_accessed() const noexcept {
    return accessed_word != 0;
  }

  bool keeps_frequency() const noexcept {
    return frequency_word != 0;
  }

  uint64_t& step(size_t r) noexcept {
    return meta[r * stride];
  }

  uint64_t step(size_t r) const noexcept {
    return meta[r * stride];
  }

  uint64_t& updated(size_t r) noexcept {
    return meta[r * stride + updated_word];
  }

  uint64_t updated(size_t r) const noexcept {
    return meta[r * stride + updated_word];
  }

  uint64_t& accessed(size_t r) noexcept {
    return meta[r * stride + accessed_word];
  }

  uint64_t accessed(size_t r) const noexcept {
    return meta[r * stride + accessed_word];
  }

  float frequency(size_t r) const noexcept {
    float f;
    std::memcpy(&f, &meta[r * stride + frequency_word], sizeof(f));
    return f;
  }

  void set_frequency(size_t r, float f) noexcept {
    uint64_t word = 0;
    std::memcpy(&word, &f, sizeof(f));
    meta[r * stride + frequency_word] = word;
  }

  /// Row r changed (no-op unless keep_changed).
  void mark_changed(size_t r) noexcept {
    if (keep_changed)
      changed[r >> 6] |= uint64_t{1} << (r & 63);
  }

  bool is_changed(size_t r) const noexcept {
    return (changed[r >> 6] >> (r & 63)) & 1;
  }

  /// Writes row r's record: step count `step`, the stamps, frequency 1.
  void set_record(size_t r, uint64_t step, const stamps& s) noexcept;

  /// After keys, values and slots were replaced: builds every record from
  /// `steps` (one per key) and the stamps, and the change bits (all set if
  /// `all_changed`); resets room.
  /// @throws std::bad_alloc (records and bits unchanged)
  void assign_records(const std::vector<uint64_t>& steps, const stamps& s,
                      bool all_changed);

  /// Makes every array hold `n` rows without reallocating.
  /// @throws std::bad_alloc (the rows are unchanged; some capacity may grow)
  void reserve(size_t n);

  /// Appends a row for `key`, which has none: step 0, slots at their initial
  /// values, frequency 1, the given stamps, marked changed; its `dim` values
  /// are left for the caller to write at the returned row number.
  /// @throws std::length_error at max_table_rows rows; std::bad_alloc. The
  ///         rows are unchanged then.
  uint32_t append(uint64_t key, const stamps& s);

  /// Removes row `r`: the last row moves into its place (index updated).
  /// @pre r < size()
  void remove(uint32_t r) noexcept;

  /// Starts keeping `changed` (every row clean), or clears it if kept.
  void clear_changes();

  /// Bytes held by the arrays and the index (capacity, not size).
  size_t memory_bytes() const noexcept;
};

} // namespace actorps::detail
