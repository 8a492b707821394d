#include "core/table_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/table_store.hpp"

namespace actorps {

admission_kind parse_admission_kind(std::string_view name) {
  if (name == "sketch")
    return admission_kind::sketch;
  if (name == "exact")
    return admission_kind::exact;
  throw input_error(fmt::format(
    "admission filter {}: expected \"sketch\" or \"exact\"", quoted(name)));
}

eviction_order parse_eviction_order(std::string_view name) {
  if (name == "lru")
    return eviction_order::lru;
  if (name == "lfu")
    return eviction_order::lfu;
  throw input_error(fmt::format("eviction order {}: expected \"lru\" or "
                                "\"lfu\"",
                                quoted(name)));
}

const char* to_string(admission_kind kind) noexcept {
  return kind == admission_kind::sketch ? "sketch" : "exact";
}

const char* to_string(eviction_order order) noexcept {
  return order == eviction_order::lru ? "lru" : "lfu";
}

uint64_t table_filter_bytes(const table_policy& policy) noexcept {
  if (!policy.filters() || policy.filter != admission_kind::sketch)
    return 0;
  // The sketch keeps width * depth counters, width = counters / depth.
  auto depth = static_cast<uint64_t>(policy.filter_depth);
  return static_cast<uint64_t>(policy.filter_counters) / depth * depth;
}

uint64_t table_row_bytes(const table_policy& policy, uint64_t dim,
                         size_t slot_count) noexcept {
  uint64_t bytes = 4 * dim * (1 + slot_count) + 8 + 8 + 1 + 20;
  if (policy.steps_to_live)
    bytes += 8;
  if (policy.has_budget()) {
    bytes += 8;
    if (policy.evict == eviction_order::lfu)
      bytes += 8;
  }
  return bytes;
}

uint64_t table_row_limit(const table_policy& policy, uint64_t dim,
                         size_t slot_count) noexcept {
  uint64_t limit = std::numeric_limits<uint64_t>::max();
  if (policy.max_rows)
    limit = static_cast<uint64_t>(*policy.max_rows);
  if (policy.max_bytes) {
    auto room = static_cast<uint64_t>(*policy.max_bytes)
                - table_filter_bytes(policy);
    limit = std::min(limit, room / table_row_bytes(policy, dim, slot_count));
  }
  return limit;
}

void validate_table_policy(const table_policy& p, const table_shard_def& def,
                           size_t slot_count) {
  auto fail = [&](const std::string& what) {
    throw input_error(fmt::format("table {}: {}", def.variable, what));
  };
  if (p.admit_after < 0)
    fail(fmt::format("admit_after {} is negative; 0 or 1 admits every key on "
                     "its first use",
                     p.admit_after));
  if (p.filters()) {
    if (p.filter == admission_kind::sketch) {
      if (p.admit_after > 255)
        fail(fmt::format("admit_after {} is above 255, the most the sketch's "
                         "8-bit counters hold; use the exact filter",
                         p.admit_after));
      if (p.filter_depth < 1 || p.filter_depth > 16)
        fail(fmt::format("filter_depth {} is outside [1, 16]",
                         p.filter_depth));
      if (p.filter_counters < p.filter_depth)
        fail(fmt::format("filter_counters {} is below filter_depth {}: the "
                         "sketch needs at least one counter per hash row",
                         p.filter_counters, p.filter_depth));
      if (p.filter_counters > (int64_t{1} << 40))
        fail(fmt::format("filter_counters {} is above 2^40 (one byte each)",
                         p.filter_counters));
    } else if (p.admit_after > int64_t{UINT32_MAX}) {
      fail(fmt::format("admit_after {} is above 2^32 - 1, the most the exact "
                       "filter's counters hold",
                       p.admit_after));
    }
    if (p.filter_halve_every < 0)
      fail(fmt::format("filter_halve_every {} is negative; 0 never halves",
                       p.filter_halve_every));
  }
  if (p.steps_to_live && *p.steps_to_live < 1)
    fail(fmt::format("steps_to_live {} must be at least 1 when given (leave "
                     "it out for rows that never expire)",
                     *p.steps_to_live));
  if (p.l2_threshold
      && (!std::isfinite(*p.l2_threshold) || *p.l2_threshold < 0))
    fail(fmt::format("l2_threshold {} must be a finite number >= 0",
                     *p.l2_threshold));
  if (p.max_rows && *p.max_rows < 1)
    fail(fmt::format("max_rows {} leaves no room for a row; it must be at "
                     "least 1 when given",
                     *p.max_rows));
  if (p.max_bytes) {
    auto row = table_row_bytes(p, def.dim, slot_count);
    auto filter = table_filter_bytes(p);
    if (*p.max_bytes < 0
        || static_cast<uint64_t>(*p.max_bytes) < row + filter)
      fail(fmt::format("max_bytes {} is below one row of {} bytes (dimension "
                       "{}, {} slots){}",
                       *p.max_bytes, row, def.dim, slot_count,
                       filter == 0
                         ? std::string{}
                         : fmt::format(" plus the sketch's {} bytes", filter)));
  }
  if (p.evict_samples < 1 || p.evict_samples > 64)
    fail(fmt::format("evict_samples {} is outside [1, 64]", p.evict_samples));
  if (p.lfu_half_life < 1)
    fail(fmt::format("lfu_half_life {} must be at least 1 call",
                     p.lfu_half_life));
}

} // namespace actorps
