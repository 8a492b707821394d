#include "core/table_store.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/admission_filter.hpp"
#include "core/table_init.hpp"
#include "core/table_changes.hpp"
#include "core/table_eviction.hpp"
#include "core/table_rows.hpp"
#include "core/update_rule.hpp"

namespace actorps {

namespace {

/// Distance (in keys) at which pull and apply prefetch the hash map slot and
/// the row of a later key. Rows of a large table are cache misses; with
/// prefetching a batch's misses overlap (see the measurement in pull();
/// 4, 8 and 16 measured alike, 0 clearly slower).
constexpr size_t prefetch_distance = 8;

using detail::no_table_row;
using detail::pending_table_row;
using detail::write_initial_row;

} // namespace

// -- the store ----------------------------------------------------------------

struct table_store::impl {
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
    return {clock, tick, changes.epoch()};
  }

  /// Creates the row of `key` (which has none) with its initial value.
  uint32_t create(const table_shard_def& def, uint64_t key) {
    if (rows.size() >= detail::max_table_rows)
      throw std::length_error(
        fmt::format("table {}: a shard holds at most {} rows", def.variable,
                    detail::max_table_rows));
    auto r = rows.append(key, stamps());
    write_initial_row(def.seed, name_hash, def.init_scale, def.dim, key,
                      rows.values.data() + r * def.dim);
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
    bool touches = creates && rows.keep_accessed;
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
        if (touches)
          evictor.touch(rows, it->second, tick);
      } else if (!creates || !admits(ks[i], u)) {
        found[i] = no_table_row;
      } else if (waits) {
        found[i] = pending_table_row;
        ++waiting;
      } else {
        found[i] = create(def, ks[i]);
      }
    }
    if (waiting > 0)
      make_room(def, ks, n, waiting);
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
      moved = moved || (victim != last && rows.accessed_at[last] == tick);
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

  /// Applies the rows of gradient to found[0, n). `Plain`: no admission, no
  /// row limit, no time to live and no change tracking, so no row is missing
  /// or stamped: the loop as it was before policies, kept apart because the
  /// checks cost about 19 instructions a row (callgrind; ~150 for the whole
  /// SGD apply of a 16-float row).
  template <bool Plain>
  void apply_rows(const update_rule& rule, const float* grads, size_t n,
                  float scale, float step_scale) {
    auto dim = rows.dim;
    float* values = rows.values.data();
    const uint32_t* at = found.data();
    // Read once: after the rule's virtual call the compiler would load them
    // again for every row.
    uint64_t* updated_at = rows.keep_updated ? rows.updated_at.data()
                                             : nullptr;
    uint32_t* changed_at = changes.tracking() ? rows.changed_at.data()
                                              : nullptr;
    const uint64_t now = clock;
    const uint32_t epoch = changes.epoch();
    uint64_t dropped = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i + prefetch_distance < n
          && (Plain || at[i + prefetch_distance] != no_table_row)) {
        size_t ahead = at[i + prefetch_distance] * dim;
        __builtin_prefetch(values + ahead, 1);
        for (auto& slot : rows.slots)
          __builtin_prefetch(slot.data() + ahead, 1);
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
      if (!Plain) {
        if (updated_at)
          updated_at[row] = now;
        if (changed_at)
          changed_at[row] = epoch;
      }
      if (step_scale == 1.0f) {
        rule.apply(w, slot_ptrs.data(), g, dim, ++rows.steps[row]);
        continue;
      }
      std::memcpy(before.data(), w, dim * sizeof(float));
      rule.apply(w, slot_ptrs.data(), g, dim, ++rows.steps[row]);
      scale_step(w, before.data(), dim, step_scale);
    }
    counts.gradients_dropped += dropped;
  }
};

table_store::table_store(table_shard_def def,
                         std::shared_ptr<const update_rule> rule,
                         table_policy policy)
  : def_(std::move(def)), rule_(std::move(rule)) {
  if (def_.dim == 0)
    throw std::invalid_argument(
      fmt::format("table {}: dimension 0; it must be positive", def_.variable));
  size_t slot_count = rule_ ? rule_->slot_count() : 0;
  validate_table_policy(policy, def_, slot_count);
  impl_ = std::make_unique<impl>(def_, std::move(policy), slot_count);
  auto& d = *impl_;
  d.name_hash = detail::table_name_hash(def_.variable);
  d.rows.dim = def_.dim;
  d.rows.slots.resize(slot_count);
  d.slot_ptrs.resize(slot_count);
  for (size_t s = 0; s < slot_count; ++s)
    d.rows.slot_inits.push_back(rule_->slot_init(s));
  d.evictor.configure(d.rows);
  d.filter = make_admission_filter(d.policy, def_.seed);
}

table_store::~table_store() = default;

table_store::table_store(table_store&&) noexcept = default;

table_store& table_store::operator=(table_store&&) noexcept = default;

const table_policy& table_store::policy() const noexcept {
  return impl_->policy;
}

size_t table_store::size() const noexcept {
  return impl_->rows.size();
}

size_t table_store::memory_bytes() const noexcept {
  auto& d = *impl_;
  return d.rows.memory_bytes() + (d.filter ? d.filter->memory_bytes() : 0)
         + d.changes.memory_bytes();
}

table_counts table_store::counts() const noexcept {
  auto& d = *impl_;
  auto result = d.counts;
  result.rows = d.rows.size();
  result.memory_bytes = memory_bytes();
  result.filter_bytes = d.filter ? d.filter->memory_bytes() : 0;
  return result;
}

size_t table_store::first_invalid_key(const uint64_t* keys,
                                      size_t n) const noexcept {
  if (def_.vocabulary == 0)
    return n;
  for (size_t i = 0; i < n; ++i)
    if (keys[i] >= def_.vocabulary)
      return i;
  return n;
}

void table_store::pull(const uint64_t* keys, size_t n, float* out,
                       bool create) {
  // Two passes: find (or create) every row, prefetching the hash map ahead,
  // then copy, prefetching the rows ahead, so that a batch's cache misses
  // overlap. Measured on a 1M-row table of 16 floats (120 MB, far out of
  // cache), batches of 4096 random existing keys, 2-core AMD EPYC VM: pull
  // ~80-100 -> ~50-60 ns per row, SGD apply ~120-165 -> ~80-110 ns per row;
  // no change on a 10k-row table (~7 and ~13 ns per row).
  auto& d = *impl_;
  auto dim = def_.dim;
  d.look_up(def_, keys, n, create ? impl::use::pull : impl::use::read);
  const float* values = d.rows.values.data();
  uint64_t rejected = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i + prefetch_distance < n
        && d.found[i + prefetch_distance] != no_table_row)
      __builtin_prefetch(values + d.found[i + prefetch_distance] * dim);
    auto row = d.found[i];
    if (row == no_table_row) {
      write_initial_row(def_.seed, d.name_hash, def_.init_scale, dim, keys[i],
                        out + i * dim);
      ++rejected;
    } else {
      std::memcpy(out + i * dim, values + row * dim, dim * sizeof(float));
    }
  }
  if (create)
    d.counts.pull_rejected += rejected;
}

void table_store::apply(const uint64_t* keys, size_t n, const float* grads,
                        float scale, float step_scale) {
  if (!rule_)
    throw std::logic_error(fmt::format(
      "table {}: apply() on a store without an update rule", def_.variable));
  auto& d = *impl_;
  auto& rows = d.rows;
  auto dim = def_.dim;
  d.look_up(def_, keys, n, impl::use::push);
  if (scale != 1.0f)
    d.scaled.resize(dim);
  if (step_scale != 1.0f)
    d.before.resize(dim);
  if (rows.keep_updated || d.changes.tracking() || d.filter
      || d.evictor.has_limit())
    d.apply_rows<false>(*rule_, grads, n, scale, step_scale);
  else
    d.apply_rows<true>(*rule_, grads, n, scale, step_scale);
}

// -- eviction -----------------------------------------------------------------

void table_store::set_clock(uint64_t now) noexcept {
  impl_->clock = now;
}

uint64_t table_store::clock() const noexcept {
  return impl_->clock;
}

table_sweep table_store::sweep(uint64_t now, size_t max_rows_visited) {
  auto& d = *impl_;
  table_sweep result;
  if (!d.evictor.sweeps())
    return result;
  while (result.visited < max_rows_visited && d.rows.size() > 0) {
    if (d.cursor >= d.rows.size())
      d.cursor = 0; // a lap is done
    ++result.visited;
    auto r = static_cast<uint32_t>(d.cursor);
    auto cause = d.evictor.expired(d.rows, r, now);
    if (cause == detail::eviction_cause::none) {
      ++d.cursor;
      continue;
    }
    // The last row moves into r: the next visit looks at it there.
    d.remove_row(r, cause);
    ++result.evicted;
  }
  return result;
}

// -- checkpoints --------------------------------------------------------------

table_store::contents table_store::export_rows() const {
  return detail::export_all_rows(impl_->rows);
}

void table_store::import_rows(contents c) {
  auto& d = *impl_;
  auto index = detail::check_table_contents(def_, d.rows.slots.size(), c);
  // The new rows, built beside the old ones: nothing changes on bad_alloc.
  detail::table_rows fresh;
  fresh.dim = d.rows.dim;
  fresh.slot_inits = d.rows.slot_inits;
  fresh.keep_updated = d.rows.keep_updated;
  fresh.keep_accessed = d.rows.keep_accessed;
  fresh.keep_frequency = d.rows.keep_frequency;
  fresh.keep_changed = d.rows.keep_changed;
  fresh.capacity_limit = d.rows.capacity_limit;
  fresh.index = std::move(index);
  fresh.keys = std::move(c.keys);
  fresh.values = std::move(c.values);
  fresh.slots = std::move(c.slots);
  fresh.steps = std::move(c.steps);
  fresh.fit_metadata(d.stamps());
  if (d.changes.tracking())
    for (auto key : d.rows.keys)
      if (!fresh.index.contains(key))
        d.changes.removed(key);
  // Nothing below throws: commit.
  d.rows = std::move(fresh);
  d.cursor = 0;
}

void table_store::mark_clean() {
  auto& d = *impl_;
  d.changes.mark(d.rows);
}

table_store::contents table_store::export_changed() const {
  auto& d = *impl_;
  return d.changes.changed_rows(d.rows);
}

std::vector<uint64_t> table_store::removed_since_mark() const {
  auto& d = *impl_;
  return d.changes.removed_keys(d.rows);
}

void table_store::apply_delta(contents changed,
                              const std::vector<uint64_t>& removed) {
  auto& d = *impl_;
  auto& rows = d.rows;
  auto dim = def_.dim;
  detail::check_table_contents(def_, rows.slots.size(), changed);
  auto bad = first_invalid_key(removed.data(), removed.size());
  if (bad != removed.size())
    throw std::invalid_argument(
      fmt::format("table {}: removed key {} is outside the vocabulary of {}",
                  def_.variable, removed[bad], def_.vocabulary));
  for (auto key : removed)
    if (auto it = rows.index.find(key); it != rows.index.end())
      d.remove_row(it->second, detail::eviction_cause::none);
  auto st = d.stamps();
  for (size_t i = 0; i < changed.keys.size(); ++i) {
    uint32_t r;
    if (auto it = rows.index.find(changed.keys[i]); it != rows.index.end()) {
      r = it->second;
      if (rows.keep_updated)
        rows.updated_at[r] = st.updated;
      if (rows.keep_accessed)
        rows.accessed_at[r] = st.accessed;
      d.changes.changed(rows, r);
    } else {
      r = rows.append(changed.keys[i], st);
    }
    std::memcpy(rows.values.data() + r * dim, changed.values.data() + i * dim,
                dim * sizeof(float));
    for (size_t s = 0; s < rows.slots.size(); ++s)
      std::memcpy(rows.slots[s].data() + r * dim,
                  changed.slots[s].data() + i * dim, dim * sizeof(float));
    rows.steps[r] = changed.steps[i];
  }
}

} // namespace actorps
