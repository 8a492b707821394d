#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace actorps {

class update_rule;

/// What defines the rows of one table shard.
struct table_shard_def {
  /// Variable name (part of every row's initial value, and of messages).
  std::string variable;
  /// Floats per row (>= 1).
  uint64_t dim = 1;
  /// Fixed vocabulary: keys must be < vocabulary; 0 = unbounded 64-bit keys.
  uint64_t vocabulary = 0;
  /// New rows start U(-init_scale, init_scale) per element; 0 = zeros.
  float init_scale = 0.0f;
  /// The job's init seed (model.seed).
  uint64_t seed = 0;
};

/// The initial value of element `j` of the row of `key` in table `variable`:
/// U(-init_scale, init_scale) from a counter-based generator keyed by (seed,
/// variable name, key, j) alone, so that any parameter server, any
/// incarnation, and the worker that checks it all compute the same bits.
///
/// Algorithm: state = f(f(f(seed ^ G) ^ fnv1a64(variable)) ^ key), then
/// element j = the top 24 bits of f(state + (j + 1) G) as a float in [-1, 1)
/// (exact), times init_scale (one rounding, so the value stays in
/// [-init_scale, init_scale)); f is splitmix64's finaliser and G its golden
/// gamma (Steele, Lea & Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014), i.e. element j is the j-th splitmix64 output
/// seeded with the row's state. init_scale 0 gives +0.0f exactly.
/// These bits are a format: changing them changes every new row.
float initial_row_value(const table_shard_def& def, uint64_t key, uint64_t j);

/// Writes the initial row of `key` (def.dim floats) into `out`.
void initial_row(const table_shard_def& def, uint64_t key, float* out);

/// One shard of an embedding table on a parameter server: a hash map from key
/// to row, and per row its optimizer slots and its own step count (the number
/// of updates applied to that row). Rows are created on first use (pull or
/// push) with initial_row().
///
/// Memory per row: dim * (1 + slots) floats + an 8-byte step count + the
/// hash map's entry (absl::flat_hash_map, about 12-16 bytes at its load
/// factor); rows live in contiguous arrays, so reads and updates of a batch's
/// keys are a hash probe and a copy of `dim` floats each.
/// Not thread-safe; owned by one parameter server. A moved-from store may only
/// be assigned to or destroyed.
class table_store {
public:
  /// @param rule  the update rule of this table (its slot_count() decides the
  ///              slots per row); may be null for a store only read and
  ///              restored (tests, tools).
  /// @throws std::invalid_argument if def.dim is 0.
  table_store(table_shard_def def, std::shared_ptr<const update_rule> rule);

  ~table_store();

  table_store(table_store&&) noexcept;
  table_store& operator=(table_store&&) noexcept;

  const table_shard_def& def() const noexcept {
    return def_;
  }

  /// Rows held.
  size_t size() const noexcept;

  /// Bytes held by rows, slots, steps and the index (approximate).
  size_t memory_bytes() const noexcept;

  /// Whether every key in [keys, keys + n) is allowed (below the vocabulary
  /// of a fixed-vocabulary table). Returns the position of the first key that
  /// is not, or n.
  size_t first_invalid_key(const uint64_t* keys, size_t n) const noexcept;

  /// Copies the rows of `n` keys into `out` (n x dim floats, row i for
  /// keys[i]). With `create`, a missing row is inserted with its initial
  /// value; without, its initial value is written but nothing is inserted
  /// (read-only lookups, e.g. evaluation).
  /// Cost: one hash probe and a copy of dim floats per key (two passes, the
  /// second prefetching rows, so a batch's cache misses overlap).
  /// @throws std::length_error if the shard would exceed 2^32 - 1 rows
  ///         (rows created before stay).
  /// @pre first_invalid_key(keys, n) == n
  void pull(const uint64_t* keys, size_t n, float* out, bool create);

  /// Applies row gradients: for each i, row keys[i] (created if missing)
  /// takes one step of the rule with gradient grads[i * dim .. +dim) and its
  /// step count + 1. Keys must be unique within one call (a worker sums the
  /// duplicates of a batch before it pushes). `scale` multiplies every
  /// gradient first (sync mode: 1 / workers); `step_scale` (in (0, 1])
  /// multiplies the change each row's step makes to its values (1 / tau for
  /// a staleness-aware step, see optimizer_config).
  /// @throws std::logic_error without a rule (nothing changes);
  ///         std::length_error as pull().
  /// @pre first_invalid_key(keys, n) == n.
  void apply(const uint64_t* keys, size_t n, const float* grads,
             float scale = 1.0f, float step_scale = 1.0f);

  // -- checkpoints ------------------------------------------------------------

  /// Everything the shard holds, in one order (row i: keys[i], values[i *
  /// dim ..), slots[s][i * dim ..), steps[i]).
  struct contents {
    std::vector<uint64_t> keys;
    std::vector<float> values;
    std::vector<std::vector<float>> slots;
    std::vector<uint64_t> steps;
  };

  /// A copy of every row (in insertion order).
  contents export_rows() const;

  /// Replaces everything with `c`.
  /// @throws std::invalid_argument (nothing changes then) if the sizes do not
  ///         fit dim and the rule's slot count, a key repeats, or a key is
  ///         outside the vocabulary.
  void import_rows(contents c);

private:
  struct impl;
  table_shard_def def_;
  std::shared_ptr<const update_rule> rule_;
  std::unique_ptr<impl> impl_;
};

} // namespace actorps
