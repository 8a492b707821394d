#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace actorps {

struct table_shard_def;

/// How an admission filter counts the sightings of keys that have no row.
enum class admission_kind : uint8_t {
  /// A count-min sketch with conservative update and 8-bit saturating
  /// counters: fixed memory (filter_counters bytes), estimates never below
  /// the true count, sometimes above (see admission_filter.hpp for the bound).
  sketch,
  /// A hash map key -> count: exact, memory grows with the keys waiting for
  /// admission (about 18-36 bytes each at absl's load factor); small tables.
  exact,
};

/// Which rows a full shard gives up first.
enum class eviction_order : uint8_t {
  /// Least recently used: the oldest last access (a pull that may create, or
  /// a push).
  lru,
  /// Least frequently used, with decay: the smallest access count where an
  /// access `a` shard calls ago weighs 2^(-a / lfu_half_life).
  lfu,
};

/// "sketch" or "exact". @throws input_error naming the field and the choices.
admission_kind parse_admission_kind(std::string_view name);

/// "lru" or "lfu". @throws input_error naming the field and the choices.
eviction_order parse_eviction_order(std::string_view name);

const char* to_string(admission_kind kind) noexcept;

const char* to_string(eviction_order order) noexcept;

/// The life of a table shard's rows: when a key gets a row (admission) and
/// when a row goes (eviction), after DeepRec's EmbeddingVariable options
/// (filter_freq, steps_to_live, l2_weight_threshold; Alibaba, "DeepRec",
/// github.com/DeepRec-AI/DeepRec docs "Embedding Variable") and Monolith's
/// feature filters and expiry (Liu et al., "Monolith: Real Time
/// Recommendation System With Collisionless Embedding Table", 2022).
///
/// The default is a table without either: every key gets a row on first use
/// and rows live forever (table_store's behaviour before policies).
/// Integers are signed so that a negative value from a config reaches
/// validate_table_policy() and is refused there with its field's name.
struct table_policy {
  // -- admission --------------------------------------------------------------

  /// A key gets a row at its admit_after-th sighting; a sighting is a pull
  /// that may create rows (pull(..., create = true)). Before that a pull
  /// returns the key's initial row without creating it, and a push's
  /// gradient for it is dropped (and counted). 0 or 1: every key on its
  /// first use, and no filter is built. At most 255 with the sketch (its
  /// counters are 8 bits), 2^32 - 1 with the exact counter.
  int64_t admit_after = 0;

  /// How sightings are counted (only when admit_after > 1).
  admission_kind filter = admission_kind::sketch;

  /// Sketch: counters in all (one byte each), in filter_depth rows of
  /// filter_counters / filter_depth. Exact counter: not used.
  int64_t filter_counters = int64_t{1} << 20;

  /// Sketch: hash rows (d); a false admission needs all d to collide.
  int64_t filter_depth = 4;

  /// Every this many sightings, every count is halved (integer division),
  /// so that keys seen long ago must be seen again; 0 = never.
  int64_t filter_halve_every = 0;

  // -- eviction ---------------------------------------------------------------

  /// A row is kept while `now - last update <= steps_to_live`, where `now` is
  /// the clock given to sweep() and a row's last update is the clock set
  /// (set_clock) when a push last updated it or it was created (DeepRec's
  /// rule: evict when global_step - version > steps_to_live). Unset: no time
  /// to live. When set, >= 1.
  std::optional<int64_t> steps_to_live;

  /// A row whose values' L2 norm is below this goes at the next sweep that
  /// visits it (DeepRec's l2_weight_threshold). Unset: none. When set, a
  /// finite number >= 0 (0 evicts nothing).
  std::optional<double> l2_threshold;

  /// The most rows the shard holds; a new row beyond it first evicts one by
  /// `evict`. Unset: no limit. When set, >= 1.
  std::optional<int64_t> max_rows;

  /// The most bytes the shard's rows and sketch may take: the row limit is
  /// then (max_bytes - sketch bytes) / table_row_bytes(...) (and max_rows,
  /// if smaller). Unset: no limit. When set, at least one row and the sketch.
  std::optional<int64_t> max_bytes;

  /// Which row a full shard evicts.
  eviction_order evict = eviction_order::lru;

  /// A full shard evicts the worst of this many rows drawn at random (the
  /// approximation of Redis' maxmemory-samples: O(samples) per insert).
  int64_t evict_samples = 5;

  /// LFU: an access weighs half as much after this many calls (pulls that
  /// may create and pushes) to the shard.
  int64_t lfu_half_life = 4096;

  /// Whether any row limit (max_rows or max_bytes) is set.
  bool has_budget() const noexcept {
    return max_rows.has_value() || max_bytes.has_value();
  }

  /// Whether a filter is built (admit_after > 1).
  bool filters() const noexcept {
    return admit_after > 1;
  }
};

/// The policies of a job's tables: one for every table, and tables of their
/// own by variable name (as the model declares it, "embedding/user"), so
/// that a table of ids mostly seen once can have admission and a time to
/// live while a small category table keeps every row.
struct table_policies {
  /// Every table not in by_table.
  table_policy defaults;
  /// Tables with a policy of their own (each complete: the defaults with
  /// the table's own fields over them; see table_policies_of()).
  std::map<std::string, table_policy> by_table;

  /// The policy of the table `variable`: its own, or the defaults.
  const table_policy& for_table(const std::string& variable) const {
    auto i = by_table.find(variable);
    return i == by_table.end() ? defaults : i->second;
  }

  /// Whether any table's policy satisfies `pred` (the defaults included).
  template <class Predicate>
  bool any(Predicate pred) const {
    if (pred(defaults))
      return true;
    for (auto& [name, policy] : by_table)
      if (pred(policy))
        return true;
    return false;
  }
};

/// Bytes of the sketch a policy builds: filter_counters when admit_after > 1
/// with admission_kind::sketch, else 0 (the exact counter's memory varies and
/// is not part of a budget).
uint64_t table_filter_bytes(const table_policy& policy) noexcept;

/// The bytes one row costs under `policy`, the unit of max_bytes:
///   4 dim (1 + slot_count)        values and optimizer slots
/// + 8 + 8                         key and step count
/// + 8 if steps_to_live            clock of the last update
/// + 8 if a budget                 last access (LRU order, LFU decay)
/// + 8 if a budget with lfu        decayed access count (a float in a word)
/// + 1                             change bit (delta checkpoints), rounded up
/// + 20                            index entry: a 16-byte slot and a control
///                                 byte at absl's maximum load of 7/8
uint64_t table_row_bytes(const table_policy& policy, uint64_t dim,
                         size_t slot_count) noexcept;

/// The most rows a shard holds under `policy`: min(max_rows, (max_bytes -
/// table_filter_bytes) / table_row_bytes); UINT64_MAX without a budget.
/// @pre validate_table_policy() accepted the policy.
uint64_t table_row_limit(const table_policy& policy, uint64_t dim,
                         size_t slot_count) noexcept;

/// Checks a policy for the table `def` whose update rule keeps `slot_count`
/// slots per float.
/// @throws input_error "table NAME: FIELD ..." for: a negative admit_after,
///   or one above the counter width (255 for the sketch, 2^32 - 1 exact); a
///   sketch with filter_depth < 1 or > 16, filter_counters < filter_depth
///   (no counter per row) or above 2^40; a negative filter_halve_every; a
///   steps_to_live < 1; a negative, infinite or NaN l2_threshold; max_rows <
///   1; a max_bytes below one row plus the sketch; evict_samples < 1 or >
///   64; lfu_half_life < 1.
void validate_table_policy(const table_policy& policy,
                           const table_shard_def& def, size_t slot_count);

} // namespace actorps
