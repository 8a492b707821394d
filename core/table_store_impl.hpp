#pragma once

// The insides of a table_store, shared by core/table_store.cpp (pulls,
// pushes, eviction) and core/table_store_delta.cpp (checkpoints and deltas).
// Only those two files include it.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/admission_filter.hpp"
#include "core/table_changes.hpp"
#include "core/table_eviction.hpp"
#include "core/table_init.hpp"
#include "core/table_policy.hpp"
#include "core/table_rows.hpp"
#include "core/table_store.hpp"
#include "core/update_rule.hpp"

namespace actorps {

struct table_store::impl {
  static constexpr size_t prefetch_distance = detail::table_prefetch_distance;
  static constexpr uint32_t no_table_row = detail::no_table_row;
  static constexpr uint32_t pending_table_row = detail::pending_table_row;

  impl(const table_shard_def& def, table_policy p, size_t slot_count)
    : policy(std::move(p)), evictor(policy, def.dim, slot_count, def.seed) {
  }

  /// What a call wants of the rows of its keys.
  enum class use {
    read, // pull(create = false): no sighting, no row created
    pull, // pull(create = true): a sighting; admitted keys get rows
    push, // apply(): no sighting; keys the filter admits get rows
  };

  uint64_t name_hash = 0;
  table_policy policy;
  detail::table_rows rows;
  detail::table_evictor evictor;
  detail::change_log changes;
  std::unique_ptr<admission_filter> filter; // null: admit every key
  uint64_t clock = 0; // the caller's (set_clock)
  uint64_t tick = 0;  // calls that may create rows (pins their rows)
  size_t cursor = 0;  // where the next sweep starts
  table_counts counts; // the cumulative fields
  // -- scratch, reused across calls ----------------------------------------
  std::vector<uint32_t> found; // row per key of the current call
  std::vector<float*> slot_ptrs;
  std::vector<float> scaled;
  std::vector<float> before; // a row before a scaled step

  detail::table_rows::stamps stamps() const noexcept {
    return {clock, tick};
  }

  /// Creates the row of `key` (which has none) with its initial value.
  uint32_t create(const table_shard_def& def, uint64_t key) {
    if (rows.size() >= detail::max_table_rows)
      throw std::length_error(
        fmt::format("table {}: a shard holds at most {} rows", def.variable,
                    detail::max_table_rows));
    auto r = rows.append(key, stamps());
    detail::write_initial_row(def.seed, name_hash, def.init_scale, def.dim,
                              key, rows.values.data() + r * def.dim);
    ++counts.admitted;
    if (filter)
      filter->admitted(key);
    return r;
  }

  /// Removes row `r` for `cause` (none: a delta or an import took it).
  void remove_row(uint32_t r, detail::eviction_cause cause) {
    changes.removed(rows.keys[r]); // may allocate: first
    rows.remove(r);
    switch (cause) {
      case detail::eviction_cause::ttl:
        ++counts.evicted_ttl;
        break;
      case detail::eviction_cause::l2:
        ++counts.evicted_l2;
        break;
      case detail::eviction_cause::budget:
        ++counts.evicted_budget;
        break;
      case detail::eviction_cause::none:
        break;
    }
  }

  /// Whether a key without a row may get one now.
  bool admits(uint64_t key, use u) {
    if (!filter)
      return true;
    return u == use::pull ? filter->observe(key) : filter->admits(key);
  }

  /// Fills found[0, n) with the row of each key: existing rows; new rows for
  /// admitted keys (when `u` creates); no_table_row for the others. With a
  /// row limit, new rows wait until room is made (make_room()).
  void look_up(const table_shard_def& def, const uint64_t* ks, size_t n,
               use u) {
    found.resize(n);
    bool creates = u != use::read;
    if (creates)
      ++tick;
    bool touches = creates && rows.keeps_accessed();
    bool waits = creates && evictor.has_limit();
    size_t waiting = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i + prefetch_distance < n)
        rows.index.prefetch(ks[i + prefetch_distance]);
      // find() first: in steady state nearly every key exists, and a find()
      // costs less than a try_emplace() (pull of 16-float rows from a
      // 10k-row table: ~9 -> ~7 ns per row).
      if (auto it = rows.index.find(ks[i]); it != rows.index.end()) {
        found[i] = it->second;
      } else if (!creates || !admits(ks[i], u)) {
        found[i] = no_table_row;
      } else if (waits) {
        found[i] = pending_table_row;
        ++waiting;
      } else {
        found[i] = create(def, ks[i]);
      }
    }
    if (touches)
      touch_found(n); // before make_room: these rows are the call's own
    if (waiting > 0)
      make_room(def, ks, n, waiting);
  }

  /// Records the access of the existing rows of found[0, n) (LRU recency,
  /// LFU count, and this call's mark). A pass of its own, prefetching the
  /// records ahead: inside look_up's loop each was a cache miss.
  void touch_found(size_t n) noexcept {
    const uint32_t* at = found.data();
    const uint64_t* meta = rows.meta.data();
    auto stride = rows.stride;
    for (size_t i = 0; i < n; ++i) {
      if (i + prefetch_distance < n
          && at[i + prefetch_distance] < pending_table_row)
        __builtin_prefetch(meta + at[i + prefetch_distance] * stride, 1);
      if (at[i] < pending_table_row)
        evictor.touch(rows, at[i], tick);
    }
  }

  /// Evicts rows (not used by this call) until `waiting` new rows fit under
  /// the limit, then creates them; a key left without room gets
  /// no_table_row.
  void make_room(const table_shard_def& def, const uint64_t* ks, size_t n,
                 size_t waiting) {
    auto limit = evictor.row_limit();
    auto wanted = rows.size() + waiting;
    bool moved = false; // a row of this call changed its number
    for (auto evict = wanted > limit ? wanted - limit : 0; evict > 0;
         --evict) {
      auto victim = evictor.pick_victim(rows, tick);
      if (victim == no_table_row)
        break;
      auto last = static_cast<uint32_t>(rows.size() - 1);
      moved = moved || (victim != last && rows.accessed(last) == tick);
      remove_row(victim, detail::eviction_cause::budget);
    }
    for (size_t i = 0; i < n; ++i) {
      if (found[i] == no_table_row)
        continue;
      if (found[i] != pending_table_row) {
        if (moved)
          found[i] = rows.index.find(ks[i])->second;
        continue;
      }
      if (auto it = rows.index.find(ks[i]); it != rows.index.end())
        found[i] = it->second; // a key repeated in one pull
      else if (rows.size() < limit)
        found[i] = create(def, ks[i]);
      else
        found[i] = no_table_row;
    }
  }

  /// Stamps the rows of found[0, n) as updated now: change bits and the
  /// clock of the last update. A pass of its own: the same stores inside
  /// apply_rows' loop, between the rule's calls, cost 10-20 ns a row (100k
  /// rows of 16 floats and a slot, 2-core EPYC VM), here 1-3 ns.
  void stamp_updates(size_t n) noexcept {
    const uint32_t* at = found.data();
    if (rows.keep_changed) {
      uint64_t* bits = rows.changed.data();
      for (size_t i = 0; i < n; ++i)
        if (auto r = at[i]; r != no_table_row)
          bits[r >> 6] |= uint64_t{1} << (r & 63);
    }
    if (rows.keeps_updated()) {
      uint64_t* word = rows.meta.data() + rows.updated_word;
      auto stride = rows.stride;
      for (size_t i = 0; i < n; ++i) {
        if (i + prefetch_distance < n
            && at[i + prefetch_distance] != no_table_row)
          __builtin_prefetch(word + at[i + prefetch_distance] * stride, 1);
        if (auto r = at[i]; r != no_table_row)
          word[r * stride] = clock;
      }
    }
  }

  /// Applies the rows of gradient to found[0, n). `Plain`: no admission, no
  /// row limit, no time to live and no change tracking, so no row is missing
  /// and a record is just the step count: the loop as it was before
  /// policies, kept apart because the checks cost about 19 instructions a
  /// row (callgrind; ~150 for the whole SGD apply of a 16-float row).
  template <bool Plain>
  void apply_rows(const update_rule& rule, const float* grads, size_t n,
                  float scale, float step_scale) {
    auto dim = rows.dim;
    float* values = rows.values.data();
    uint64_t* meta = rows.meta.data();
    const uint32_t* at = found.data();
    const size_t stride = Plain ? 1 : rows.stride; // read once
    uint64_t dropped = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i + prefetch_distance < n
          && (Plain || at[i + prefetch_distance] != no_table_row)) {
        size_t ahead_row = at[i + prefetch_distance];
        size_t ahead = ahead_row * dim;
        __builtin_prefetch(values + ahead, 1);
        for (auto& slot : rows.slots)
          __builtin_prefetch(slot.data() + ahead, 1);
        __builtin_prefetch(meta + ahead_row * stride, 1); // the step count
      }
      size_t row = at[i];
      if (!Plain && row == no_table_row) {
        ++dropped; // a key the filter does not admit (yet)
        continue;
      }
      for (size_t s = 0; s < rows.slots.size(); ++s)
        slot_ptrs[s] = rows.slots[s].data() + row * dim;
      const float* g = grads + i * dim;
      if (scale != 1.0f) {
        for (size_t j = 0; j < dim; ++j)
          scaled[j] = g[j] * scale;
        g = scaled.data();
      }
      float* w = values + row * dim;
      uint64_t* record = meta + row * stride;
      if (step_scale == 1.0f) {
        rule.apply(w, slot_ptrs.data(), g, dim, ++record[0]);
        continue;
      }
      std::memcpy(before.data(), w, dim * sizeof(float));
      rule.apply(w, slot_ptrs.data(), g, dim, ++record[0]);
      scale_step(w, before.data(), dim, step_scale);
    }
    counts.gradients_dropped += dropped;
  }
};

} // namespace actorps
