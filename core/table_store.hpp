#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/table_init.hpp"
#include "core/table_policy.hpp"

namespace actorps {

class update_rule;

/// What a table shard has done with its rows since it was constructed.
/// Cumulative counts, except `rows` and the bytes (now); import_rows() and
/// apply_delta() change only those.
struct table_counts {
  /// Rows held now.
  uint64_t rows = 0;
  /// Rows created by pull(create) or apply() (admitted keys).
  uint64_t admitted = 0;
  /// Keys a pull(create = true) answered with their initial row without
  /// creating it: seen fewer than admit_after times, or (rarely) no room
  /// because every row of a full shard served the same call. Counted per
  /// key per pull. A pull(create = false) rejects nothing: it never creates.
  uint64_t pull_rejected = 0;
  /// Rows of gradient apply() dropped for keys without a row that the filter
  /// does not admit (or, rarely, no room as above). Pushes are not
  /// sightings, so this is the push side's rejection count.
  uint64_t gradients_dropped = 0;
  /// Rows evicted by sweep() for their time to live, and for their L2 norm.
  uint64_t evicted_ttl = 0;
  uint64_t evicted_l2 = 0;
  /// Rows evicted to make room for new rows under max_rows / max_bytes.
  uint64_t evicted_budget = 0;
  /// memory_bytes(): rows, metadata, index, filter, tombstones.
  uint64_t memory_bytes = 0;
  /// The admission filter's share of memory_bytes.
  uint64_t filter_bytes = 0;
};

/// What one table_store::sweep() did.
struct table_sweep {
  /// Row visits (a row moved into a visited place is visited again).
  size_t visited = 0;
  /// Rows evicted (by time to live or L2 norm).
  size_t evicted = 0;
};

/// One shard of an embedding table on a parameter server: a hash map from key
/// to row, and per row its optimizer slots and its own step count (the number
/// of updates applied to that row). Rows are created on first use (pull or
/// push) with initial_row(), or, under a table_policy with admit_after > 1,
/// at the admit_after-th pull of their key; they leave by eviction (time to
/// live, L2 norm, row or byte budget) when the policy asks for it.
///
/// Memory per row: dim * (1 + slots) floats + an 8-byte key + an 8-byte step
/// count + the hash map's entry (absl::flat_hash_map, about 12-16 bytes at
/// its load factor) + the metadata the policy needs (table_row_bytes());
/// rows live in contiguous arrays (a removed row's place takes the last
/// row), so reads and updates of a batch's keys are a hash probe and a copy
/// of `dim` floats each.
/// Not thread-safe; owned by one parameter server. A moved-from store may only
/// be assigned to or destroyed.
class table_store {
public:
  /// @param rule  the update rule of this table (its slot_count() decides the
  ///              slots per row); may be null for a store only read and
  ///              restored (tests, tools).
  /// @param policy  admission and eviction (default: neither, i.e. every
  ///                 key gets a row on first use and rows live forever).
  /// @throws std::invalid_argument if def.dim is 0; input_error if
  ///         validate_table_policy() refuses the policy.
  table_store(table_shard_def def, std::shared_ptr<const update_rule> rule,
              table_policy policy = {});

  ~table_store();

  table_store(table_store&&) noexcept;
  table_store& operator=(table_store&&) noexcept;

  const table_shard_def& def() const noexcept {
    return def_;
  }

  const table_policy& policy() const noexcept;

  /// Rows held.
  size_t size() const noexcept;

  /// Bytes held by rows, slots, steps, metadata, the index, the admission
  /// filter and tombstones (capacity, approximate).
  size_t memory_bytes() const noexcept;

  /// Counts of admissions, rejections, evictions and bytes.
  table_counts counts() const noexcept;

  /// Whether every key in [keys, keys + n) is allowed (below the vocabulary
  /// of a fixed-vocabulary table). Returns the position of the first key that
  /// is not, or n.
  size_t first_invalid_key(const uint64_t* keys, size_t n) const noexcept;

  /// Copies the rows of `n` keys into `out` (n x dim floats, row i for
  /// keys[i]). With `create`, a missing row is inserted with its initial
  /// value; without, its initial value is written but nothing is inserted
  /// (read-only lookups, e.g. evaluation).
  /// Under a policy: with `create`, each missing key is a sighting for the
  /// admission filter (pulls are what counts: a training step pulls each
  /// key of its batch once, before it computes the gradient it pushes, so
  /// the decision is made where the value is read, as DeepRec counts on
  /// lookup; counting pushes too would count each example twice and let a
  /// retried push count again). A key not yet admitted gets its initial row
  /// in `out` and no row (counted in pull_rejected). A new row in a full
  /// shard first evicts one (evict order); rows this call reads are never
  /// its victims.
  /// Cost: one hash probe and a copy of dim floats per key (two passes, the
  /// second prefetching rows, so a batch's cache misses overlap).
  /// @throws std::length_error if the shard would exceed 2^32 - 2 rows
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
  /// Under a policy: a key without a row gets one only if the admission
  /// filter already admits it (a push is not a sighting); else its
  /// gradient row is dropped and counted (gradients_dropped). Updated rows
  /// are stamped with clock() (time to live) and as changed.
  /// @throws std::logic_error without a rule (nothing changes);
  ///         std::length_error as pull().
  /// @pre first_invalid_key(keys, n) == n.
  void apply(const uint64_t* keys, size_t n, const float* grads,
             float scale = 1.0f, float step_scale = 1.0f);

  // -- eviction ---------------------------------------------------------------

  /// Sets the clock that rows created or updated from now on are stamped
  /// with: the parameter server's count of updates applied to this shard
  /// (its `now` for steps_to_live). The store reads no clock of its own.
  void set_clock(uint64_t now) noexcept;

  uint64_t clock() const noexcept;

  /// Visits up to `max_rows_visited` rows from where the last sweep stopped
  /// (wrapping at the end) and evicts those the policy's steps_to_live (now
  /// - last update > steps_to_live) or l2_threshold (L2 norm of the values
  /// < threshold) condemns. Bounded work, so a server interleaves it with
  /// pulls and pushes: on 1M rows of 16 floats and a slot, a 4096-row
  /// sweep took 0.31-0.33 ms on average (0.45-0.52 at worst) with half the
  /// rows expiring, 36 us with none (2-core EPYC VM; the [.bench] case in
  /// table_eviction_test.cpp prints it).
  /// Without either setting it does nothing.
  table_sweep sweep(uint64_t now, size_t max_rows_visited);

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

  /// Replaces everything with `c`. Every row is stamped with clock() (so a
  /// restored row has a whole time to live) and, when changes are tracked,
  /// as changed; keys that leave are tombstones. A budget is not enforced
  /// here: a shard restored above it evicts down as new rows come.
  /// @throws std::invalid_argument (nothing changes then) if the sizes do not
  ///         fit dim and the rule's slot count, a key repeats, or a key is
  ///         outside the vocabulary.
  void import_rows(contents c);

  // -- delta checkpoints ------------------------------------------------------

  /// Starts a new change set: from now on export_changed() and
  /// removed_since_mark() report what changes after this call. Changes are
  /// tracked from the first mark on (a bit per row, set with each update;
  /// a mark clears size() / 8 bytes); before it, nothing is tracked and the
  /// change set is everything (relative to an empty store).
  void mark_clean();

  /// The rows created or updated (by pull, apply, import_rows or
  /// apply_delta) since the last mark_clean(), in the layout of export_rows()
  /// (row order); before any mark, every row. Cost: a scan of the bits
  /// (size() / 64 words) and a copy of the changed rows.
  contents export_changed() const;

  /// Keys removed since the last mark_clean() (evicted, or left by
  /// import_rows or apply_delta) that hold no row now, each once: the
  /// tombstones of a delta. May name a key created and removed after the
  /// mark (harmless: removing a missing key does nothing). Empty before any
  /// mark. Tombstones are kept until the next mark_clean().
  std::vector<uint64_t> removed_since_mark() const;

  /// Replays a delta: erases the `removed` keys (those present), then
  /// inserts or overwrites the rows of `changed` (values, slots and steps as
  /// given). Full contents then every delta in order give a store equal to
  /// the one exported (export_rows() sorted by key, bit for bit). Neither
  /// the admission filter nor the budget applies; counts of evictions do not
  /// move. Rows written are stamped as by import_rows().
  /// @throws std::invalid_argument (nothing changes then) as import_rows()
  ///         for `changed`, or if a removed key is outside the vocabulary.
  void apply_delta(contents changed, const std::vector<uint64_t>& removed);

private:
  struct impl;
  table_shard_def def_;
  std::shared_ptr<const update_rule> rule_;
  std::unique_ptr<impl> impl_;
};

} // namespace actorps
