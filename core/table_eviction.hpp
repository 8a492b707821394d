#pragma once

#include <cstddef>
#include <cstdint>

#include "core/table_policy.hpp"
#include "core/table_rows.hpp"

namespace actorps::detail {

/// Why a row left a shard.
enum class eviction_cause : uint8_t {
  none,
  ttl,    // not updated for more than steps_to_live
  l2,     // values' L2 norm below l2_threshold
  budget, // made room for a new row in a full shard
};

/// Decides which rows of a table shard go, under a table_policy; the shard
/// removes them. Two kinds of decision:
///
/// - expiry (steps_to_live, l2_threshold): one row at a time, as a bounded
///   sweep visits it (table_store::sweep);
/// - room (max_rows, max_bytes): when a new row would exceed the limit, the
///   worst of `evict_samples` rows drawn at random goes, LRU (oldest last
///   access) or LFU (smallest access count, each access weighing
///   2^(-age / lfu_half_life) for an age in shard calls). This is Redis'
///   approximated LRU/LFU ("Key eviction", redis.io/docs/reference/
///   eviction; Redis samples 5 keys by default): O(samples) per insert, no
///   list or heap to keep in order on every access (which would cost every
///   pull a write to two neighbours' links). With k samples the victim is
///   among the oldest (or least used) fraction q of rows with probability
///   1 - (1 - q)^k: 67% for q = 0.2 and k = 5.
///
/// Rows accessed in the current call (accessed == tick) are never picked:
/// a call's row numbers stay valid while it makes room.
class table_evictor {
public:
  /// @pre validate_table_policy() accepted `policy`.
  table_evictor(const table_policy& policy, uint64_t dim, size_t slot_count,
                uint64_t seed);

  /// Whether sweeps have anything to do (a time to live or an L2 threshold).
  bool sweeps() const noexcept {
    return ttl_ != 0 || l2_squared_ > 0;
  }

  /// The most rows the shard holds (UINT64_MAX: no limit).
  uint64_t row_limit() const noexcept {
    return row_limit_;
  }

  bool has_limit() const noexcept {
    return row_limit_ != UINT64_MAX;
  }

  /// Lays out the row records the policy needs (updated for a time to live,
  /// accessed with a row limit, frequency for LFU) and the capacity limit.
  void configure(table_rows& rows) const;

  /// Why row `r` should go at clock `now` (ttl before l2), or none.
  eviction_cause expired(const table_rows& rows, uint32_t r,
                         uint64_t now) const noexcept;

  /// Records an access of row `r` in call `tick` (LRU recency, LFU count).
  /// @pre rows.keeps_accessed()
  void touch(table_rows& rows, uint32_t r, uint64_t tick) const noexcept;

  /// The row to evict for room: the worst of evict_samples rows drawn among
  /// those not accessed in call `tick`; when draws keep hitting such rows, the
  /// first one after a random start. no_table_row if every row was accessed
  /// in this call.
  /// @pre rows.keeps_accessed()
  uint32_t pick_victim(const table_rows& rows, uint64_t tick) noexcept;

private:
  /// The LFU count of row `r` as of call `tick`.
  float decayed(const table_rows& rows, uint32_t r,
                uint64_t tick) const noexcept;

  /// A random row number below n.
  uint32_t draw(size_t n) noexcept;

  uint64_t ttl_ = 0;          // 0: none
  double l2_squared_ = 0;     // 0: none
  uint64_t row_limit_;
  eviction_order order_;
  uint32_t samples_;
  float inverse_half_life_;
  uint64_t rng_;
};

} // namespace actorps::detail
