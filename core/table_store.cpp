#include "core/table_store.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "core/update_rule.hpp"

namespace actorps {

// -- initial values -----------------------------------------------------------

namespace {

constexpr uint64_t golden_gamma = 0x9e3779b97f4a7c15ULL;

/// splitmix64's output function (Steele, Lea & Flood, OOPSLA 2014; constants
/// by Vigna). The same function as placement.hpp's mix64, repeated here so
/// that the row initialiser depends on nothing else: its bits must never
/// change, or a restarted server would create different rows than a worker
/// expects.
inline uint64_t splitmix(uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// 64-bit FNV-1a of a variable name (Fowler, Noll & Vo).
uint64_t fnv1a(const std::string& s) noexcept {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

/// The state of row `key`'s generator: a bijective mix of the key, keyed by
/// the seed and the variable name.
inline uint64_t row_state(uint64_t seed, uint64_t name_hash,
                          uint64_t key) noexcept {
  return splitmix(splitmix(splitmix(seed ^ golden_gamma) ^ name_hash) ^ key);
}

/// Element j of a row: splitmix64's j-th output from `state`, its top 24
/// bits as a float in [-1, 1) (exact), times the scale (one rounding, so
/// the result stays in [-scale, scale)).
inline float row_element(uint64_t state, uint64_t j, float scale) noexcept {
  auto bits = splitmix(state + (j + 1) * golden_gamma);
  auto centred = static_cast<int32_t>(bits >> 40) - (int32_t{1} << 23);
  return static_cast<float>(centred) * (1.0f / 8388608.0f) * scale;
}

void write_initial_row(uint64_t seed, uint64_t name_hash, float scale,
                       uint64_t dim, uint64_t key, float* out) noexcept {
  if (scale == 0.0f) {
    std::fill_n(out, dim, 0.0f); // +0, not the -0 of 0 * negative
    return;
  }
  auto state = row_state(seed, name_hash, key);
  for (uint64_t j = 0; j < dim; ++j)
    out[j] = row_element(state, j, scale);
}

/// Distance (in keys) at which pull and apply prefetch the hash map slot and
/// the row of a later key. Rows of a large table are cache misses; with
/// prefetching a batch's misses overlap (see the measurement in pull();
/// 4, 8 and 16 measured alike, 0 clearly slower).
constexpr size_t prefetch_distance = 8;

/// Marks a key without a row in pull(create = false).
constexpr uint32_t no_row = UINT32_MAX;

} // namespace

float initial_row_value(const table_shard_def& def, uint64_t key, uint64_t j) {
  if (def.init_scale == 0.0f)
    return 0.0f;
  return row_element(row_state(def.seed, fnv1a(def.variable), key), j,
                     def.init_scale);
}

void initial_row(const table_shard_def& def, uint64_t key, float* out) {
  write_initial_row(def.seed, fnv1a(def.variable), def.init_scale, def.dim,
                    key, out);
}

// -- the store ----------------------------------------------------------------

struct table_store::impl {
  uint64_t name_hash = 0;
  std::vector<float> slot_inits; // per slot
  /// key -> row number (position in keys, steps, and dim-float blocks of
  /// values and of each slot).
  absl::flat_hash_map<uint64_t, uint32_t> index;
  std::vector<uint64_t> keys; // insertion order
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
  std::vector<uint64_t> steps;
  // -- scratch, reused across calls ----------------------------------------
  std::vector<uint32_t> rows;
  std::vector<float*> slot_ptrs;
  std::vector<float> scaled;
  std::vector<float> before; // a row before a scaled step

  /// Appends the initial row of `key`; on failure (bad_alloc) leaves every
  /// array as it was.
  void append_row(const table_shard_def& def, uint64_t key) {
    auto n = keys.size();
    auto dim = def.dim;
    try {
      keys.push_back(key);
      steps.push_back(0);
      // resize grows capacity geometrically (libstdc++ at least doubles).
      values.resize((n + 1) * dim);
      write_initial_row(def.seed, name_hash, def.init_scale, dim, key,
                        values.data() + n * dim);
      for (size_t s = 0; s < slots.size(); ++s)
        slots[s].resize((n + 1) * dim, slot_inits[s]);
    } catch (...) {
      keys.resize(n);
      steps.resize(n);
      values.resize(n * dim);
      for (auto& slot : slots)
        slot.resize(std::min<size_t>(slot.size(), n * dim));
      throw;
    }
  }

  /// The row of `key`, created if missing.
  uint32_t find_or_create(const table_shard_def& def, uint64_t key) {
    // find() first: in steady state nearly every key exists, and a find()
    // costs less than a try_emplace() (pull of 16-float rows from a 10k-row
    // table: ~9 -> ~7 ns per row).
    if (auto it = index.find(key); it != index.end())
      return it->second;
    auto n = keys.size();
    if (n >= no_row)
      throw std::length_error(fmt::format(
        "table {}: a shard holds at most {} rows", def.variable, no_row));
    auto it = index.emplace(key, static_cast<uint32_t>(n)).first;
    try {
      append_row(def, key);
    } catch (...) {
      index.erase(it);
      throw;
    }
    return it->second;
  }

  /// Fills rows[0, n) with the row of each key (created if `create`, else
  /// no_row where missing), prefetching the map ahead.
  void look_up(const table_shard_def& def, const uint64_t* ks, size_t n,
               bool create) {
    rows.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (i + prefetch_distance < n)
        index.prefetch(ks[i + prefetch_distance]);
      if (create) {
        rows[i] = find_or_create(def, ks[i]);
      } else {
        auto it = index.find(ks[i]);
        rows[i] = it == index.end() ? no_row : it->second;
      }
    }
  }
};

table_store::table_store(table_shard_def def,
                         std::shared_ptr<const update_rule> rule)
  : def_(std::move(def)), rule_(std::move(rule)), impl_(new impl) {
  if (def_.dim == 0)
    throw std::invalid_argument(
      fmt::format("table {}: dimension 0; it must be positive", def_.variable));
  impl_->name_hash = fnv1a(def_.variable);
  size_t slot_count = rule_ ? rule_->slot_count() : 0;
  impl_->slots.resize(slot_count);
  impl_->slot_ptrs.resize(slot_count);
  for (size_t s = 0; s < slot_count; ++s)
    impl_->slot_inits.push_back(rule_->slot_init(s));
}

table_store::~table_store() = default;

table_store::table_store(table_store&&) noexcept = default;

table_store& table_store::operator=(table_store&&) noexcept = default;

size_t table_store::size() const noexcept {
  return impl_->keys.size();
}

size_t table_store::memory_bytes() const noexcept {
  auto& d = *impl_;
  size_t result = d.values.capacity() * sizeof(float)
                  + d.keys.capacity() * sizeof(uint64_t)
                  + d.steps.capacity() * sizeof(uint64_t);
  for (auto& slot : d.slots)
    result += slot.capacity() * sizeof(float);
  // One slot (key, row) and one control byte per bucket.
  using slot_type = absl::flat_hash_map<uint64_t, uint32_t>::value_type;
  result += d.index.capacity() * (sizeof(slot_type) + 1);
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
  d.look_up(def_, keys, n, create);
  const float* values = d.values.data();
  for (size_t i = 0; i < n; ++i) {
    if (i + prefetch_distance < n && d.rows[i + prefetch_distance] != no_row)
      __builtin_prefetch(values + d.rows[i + prefetch_distance] * dim);
    auto row = d.rows[i];
    if (row == no_row)
      write_initial_row(def_.seed, d.name_hash, def_.init_scale, dim, keys[i],
                        out + i * dim);
    else
      std::memcpy(out + i * dim, values + row * dim, dim * sizeof(float));
  }
}

void table_store::apply(const uint64_t* keys, size_t n, const float* grads,
                        float scale, float step_scale) {
  if (!rule_)
    throw std::logic_error(fmt::format(
      "table {}: apply() on a store without an update rule", def_.variable));
  auto& d = *impl_;
  auto dim = def_.dim;
  d.look_up(def_, keys, n, true);
  if (scale != 1.0f)
    d.scaled.resize(dim);
  if (step_scale != 1.0f)
    d.before.resize(dim);
  float* values = d.values.data();
  for (size_t i = 0; i < n; ++i) {
    if (i + prefetch_distance < n) {
      size_t ahead = d.rows[i + prefetch_distance] * dim;
      __builtin_prefetch(values + ahead, 1);
      for (auto& slot : d.slots)
        __builtin_prefetch(slot.data() + ahead, 1);
    }
    size_t row = d.rows[i];
    for (size_t s = 0; s < d.slots.size(); ++s)
      d.slot_ptrs[s] = d.slots[s].data() + row * dim;
    const float* g = grads + i * dim;
    if (scale != 1.0f) {
      for (size_t j = 0; j < dim; ++j)
        d.scaled[j] = g[j] * scale;
      g = d.scaled.data();
    }
    float* w = values + row * dim;
    if (step_scale == 1.0f) {
      rule_->apply(w, d.slot_ptrs.data(), g, dim, ++d.steps[row]);
      continue;
    }
    std::memcpy(d.before.data(), w, dim * sizeof(float));
    rule_->apply(w, d.slot_ptrs.data(), g, dim, ++d.steps[row]);
    scale_step(w, d.before.data(), dim, step_scale);
  }
}

// -- checkpoints --------------------------------------------------------------

table_store::contents table_store::export_rows() const {
  auto& d = *impl_;
  contents result;
  result.keys = d.keys;
  result.values = d.values;
  result.slots = d.slots;
  result.steps = d.steps;
  return result;
}

void table_store::import_rows(contents c) {
  auto& name = def_.variable;
  auto n = c.keys.size();
  auto dim = def_.dim;
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument(fmt::format("table {}: {}", name, what));
  };
  if (n > no_row)
    fail(fmt::format("{} rows; a shard holds at most {}", n, no_row));
  auto check_floats = [&](const std::vector<float>& xs, const char* what) {
    if (xs.size() % dim != 0 || xs.size() / dim != n)
      fail(fmt::format("{} {} floats for {} rows of dimension {} (expected "
                       "{})",
                       xs.size(), what, n, dim, n * dim));
  };
  check_floats(c.values, "value");
  if (c.slots.size() != impl_->slots.size())
    fail(fmt::format("{} slots, but its update rule keeps {}", c.slots.size(),
                     impl_->slots.size()));
  for (auto& slot : c.slots)
    check_floats(slot, "slot");
  if (c.steps.size() != n)
    fail(fmt::format("{} step counts for {} rows", c.steps.size(), n));
  auto bad = first_invalid_key(c.keys.data(), n);
  if (bad != n)
    fail(fmt::format("key {} is outside the vocabulary of {}", c.keys[bad],
                     def_.vocabulary));
  absl::flat_hash_map<uint64_t, uint32_t> index;
  index.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (!index.try_emplace(c.keys[i], static_cast<uint32_t>(i)).second)
      fail(fmt::format("key {} appears twice", c.keys[i]));
  // Nothing below throws: commit.
  auto& d = *impl_;
  d.index = std::move(index);
  d.keys = std::move(c.keys);
  d.values = std::move(c.values);
  d.slots = std::move(c.slots);
  d.steps = std::move(c.steps);
}

} // namespace actorps
