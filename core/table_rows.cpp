#include "core/table_rows.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace actorps::detail {

namespace {

size_t words_for_bits(size_t n) noexcept {
  return (n + 63) / 64;
}

} // namespace

void table_rows::layout(bool updated, bool accessed, bool frequency) {
  stride = 1;
  updated_word = updated ? stride++ : 0;
  accessed_word = accessed ? stride++ : 0;
  frequency_word = frequency ? stride++ : 0;
}

void table_rows::set_record(size_t r, uint64_t step_count,
                            const stamps& s) noexcept {
  step(r) = step_count;
  if (keeps_updated())
    updated(r) = s.updated;
  if (keeps_accessed())
    accessed(r) = s.accessed;
  if (keeps_frequency())
    set_frequency(r, 1.0f);
}

void table_rows::assign_records(const std::vector<uint64_t>& steps,
                                const stamps& s, bool all_changed) {
  auto n = keys.size();
  std::vector<uint64_t> records(n * stride);
  std::vector<uint64_t> bits;
  if (keep_changed) {
    bits.assign(words_for_bits(n), all_changed ? ~uint64_t{0} : 0);
    if (all_changed && n % 64 != 0)
      bits.back() = (uint64_t{1} << (n % 64)) - 1; // no bits past the rows
  }
  meta.swap(records);
  changed.swap(bits);
  for (size_t r = 0; r < n; ++r)
    set_record(r, steps[r], s);
  room = 0;
  reserve(n);
}

void table_rows::reserve(size_t n) {
  room = 0; // until every array holds n
  keys.reserve(n);
  values.reserve(n * dim);
  for (auto& slot : slots)
    slot.reserve(n * dim);
  meta.reserve(n * stride);
  if (keep_changed)
    changed.reserve(words_for_bits(n));
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
  values.resize((n + 1) * dim);
  for (size_t i = 0; i < slots.size(); ++i)
    slots[i].resize((n + 1) * dim, slot_inits[i]);
  meta.resize((n + 1) * stride);
  set_record(n, 0, s);
  if (keep_changed) {
    changed.resize(words_for_bits(n + 1));
    mark_changed(n);
  }
  return row;
}

void table_rows::remove(uint32_t r) noexcept {
  auto last = keys.size() - 1;
  index.erase(keys[r]);
  if (r != last) {
    keys[r] = keys[last];
    index.find(keys[r])->second = r;
    std::memcpy(values.data() + r * dim, values.data() + last * dim,
                dim * sizeof(float));
    for (auto& slot : slots)
      std::memcpy(slot.data() + r * dim, slot.data() + last * dim,
                  dim * sizeof(float));
    std::memcpy(meta.data() + r * stride, meta.data() + last * stride,
                stride * sizeof(uint64_t));
    if (keep_changed) {
      auto bit = uint64_t{1} << (r & 63);
      if (is_changed(last))
        changed[r >> 6] |= bit;
      else
        changed[r >> 6] &= ~bit;
    }
  }
  keys.pop_back();
  values.resize(last * dim);
  for (auto& slot : slots)
    slot.resize(last * dim);
  meta.resize(last * stride);
  if (keep_changed) {
    changed[last >> 6] &= ~(uint64_t{1} << (last & 63));
    changed.resize(words_for_bits(last));
  }
}

void table_rows::clear_changes() {
  if (!keep_changed) {
    changed.reserve(words_for_bits(std::max(room, keys.size())));
    keep_changed = true;
  }
  changed.assign(words_for_bits(keys.size()), 0);
}

size_t table_rows::memory_bytes() const noexcept {
  size_t result = values.capacity() * sizeof(float)
                  + keys.capacity() * sizeof(uint64_t)
                  + meta.capacity() * sizeof(uint64_t)
                  + changed.capacity() * sizeof(uint64_t);
  for (auto& slot : slots)
    result += slot.capacity() * sizeof(float);
  // One slot (key, row) and one control byte per bucket.
  using slot_type = absl::flat_hash_map<uint64_t, uint32_t>::value_type;
  result += index.capacity() * (sizeof(slot_type) + 1);
  return result;
}

} // namespace actorps::detail
