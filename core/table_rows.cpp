#include "core/table_rows.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace actorps::detail {

void table_rows::reserve(size_t n) {
  room = 0; // until every array holds n
  keys.reserve(n);
  steps.reserve(n);
  values.reserve(n * dim);
  for (auto& slot : slots)
    slot.reserve(n * dim);
  if (keep_updated)
    updated_at.reserve(n);
  if (keep_accessed)
    accessed_at.reserve(n);
  if (keep_frequency)
    frequency.reserve(n);
  if (keep_changed)
    changed_at.reserve(n);
  room = n;
}

uint32_t table_rows::append(uint64_t key, const stamps& s) {
  auto n = keys.size();
  if (n >= max_table_rows)
    throw std::length_error(
      fmt::format("a table shard holds at most {} rows", max_table_rows));
  if (n >= room) {
    // Doubling, as push_back would, but not past the row limit.
    auto grown = std::max<size_t>(2 * n, 1);
    if (grown > capacity_limit)
      grown = std::max<size_t>(n + 1, capacity_limit);
    reserve(grown);
  }
  auto row = static_cast<uint32_t>(n);
  index.emplace(key, row); // the only step left that may throw
  // Capacity is there: nothing below allocates.
  keys.push_back(key);
  steps.push_back(0);
  values.resize((n + 1) * dim);
  for (size_t i = 0; i < slots.size(); ++i)
    slots[i].resize((n + 1) * dim, slot_inits[i]);
  if (keep_updated)
    updated_at.push_back(s.updated);
  if (keep_accessed)
    accessed_at.push_back(s.accessed);
  if (keep_frequency)
    frequency.push_back(1.0f);
  if (keep_changed)
    changed_at.push_back(s.changed);
  return row;
}

void table_rows::remove(uint32_t r) noexcept {
  auto last = keys.size() - 1;
  index.erase(keys[r]);
  if (r != last) {
    keys[r] = keys[last];
    index.find(keys[r])->second = r;
    steps[r] = steps[last];
    std::memcpy(values.data() + r * dim, values.data() + last * dim,
                dim * sizeof(float));
    for (auto& slot : slots)
      std::memcpy(slot.data() + r * dim, slot.data() + last * dim,
                  dim * sizeof(float));
    if (keep_updated)
      updated_at[r] = updated_at[last];
    if (keep_accessed)
      accessed_at[r] = accessed_at[last];
    if (keep_frequency)
      frequency[r] = frequency[last];
    if (keep_changed)
      changed_at[r] = changed_at[last];
  }
  keys.pop_back();
  steps.pop_back();
  values.resize(last * dim);
  for (auto& slot : slots)
    slot.resize(last * dim);
  if (keep_updated)
    updated_at.pop_back();
  if (keep_accessed)
    accessed_at.pop_back();
  if (keep_frequency)
    frequency.pop_back();
  if (keep_changed)
    changed_at.pop_back();
}

void table_rows::keep_changes(bool on, uint32_t epoch) {
  keep_changed = on;
  if (on) {
    changed_at.reserve(std::max(room, keys.size()));
    changed_at.assign(keys.size(), epoch);
  } else {
    changed_at = {};
  }
}

void table_rows::fit_metadata(const stamps& s) {
  auto n = keys.size();
  auto fit = [n](bool keep, auto& xs, auto value) {
    if (keep)
      xs.assign(n, value);
    else
      xs = {};
  };
  fit(keep_updated, updated_at, s.updated);
  fit(keep_accessed, accessed_at, s.accessed);
  fit(keep_frequency, frequency, 1.0f);
  fit(keep_changed, changed_at, s.changed);
  reserve(n);
}

size_t table_rows::memory_bytes() const noexcept {
  size_t result = values.capacity() * sizeof(float)
                  + keys.capacity() * sizeof(uint64_t)
                  + steps.capacity() * sizeof(uint64_t)
                  + updated_at.capacity() * sizeof(uint64_t)
                  + accessed_at.capacity() * sizeof(uint64_t)
                  + frequency.capacity() * sizeof(float)
                  + changed_at.capacity() * sizeof(uint32_t);
  for (auto& slot : slots)
    result += slot.capacity() * sizeof(float);
  // One slot (key, row) and one control byte per bucket.
  using slot_type = absl::flat_hash_map<uint64_t, uint32_t>::value_type;
  result += index.capacity() * (sizeof(slot_type) + 1);
  return result;
}

} // namespace actorps::detail
