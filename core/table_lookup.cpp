#include "core/table_lookup.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace actorps {

namespace {

/// splitmix64's finaliser (as placement.hpp's mix64), to spread keys over
/// the index's buckets.
inline uint64_t spread(uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace

/// This thread's open-addressing index (power-of-two buckets, at most half
/// full for `n` keys), emptied: reused across calls, so a steady state
/// allocates nothing.
static std::vector<uint32_t>& empty_index(size_t n) {
  thread_local std::vector<uint32_t> buckets;
  size_t capacity = 16;
  while (capacity < 2 * n)
    capacity *= 2;
  buckets.assign(capacity, 0);
  return buckets;
}

void table_lookup::deduplicate() {
  auto n = occurrences.size();
  if (n >= UINT32_MAX)
    throw std::length_error("table_lookup: too many occurrences");
  keys.clear();
  inverse.resize(n);
  // An open-addressing index (linear probing, power-of-two buckets, at most
  // half full) from key to 1 + its position in `keys`, 0 = empty. It lives
  // in a thread_local buffer reused across calls, so a worker's steady state
  // allocates nothing here; absl's clear() would free any table of more than
  // 127 buckets, and a member would make every table_lookup carry one.
  auto& buckets = empty_index(n);
  auto mask = buckets.size() - 1;
  for (size_t i = 0; i < n; ++i) {
    auto key = occurrences[i];
    auto b = spread(key) & mask;
    for (;;) {
      auto pos = buckets[b];
      if (pos == 0) {
        keys.push_back(key);
        buckets[b] = static_cast<uint32_t>(keys.size());
        inverse[i] = static_cast<uint32_t>(keys.size() - 1);
        break;
      }
      if (keys[pos - 1] == key) {
        inverse[i] = pos - 1;
        break;
      }
      b = (b + 1) & mask;
    }
  }
  rows.resize(keys.size() * dim);
  grad.assign(keys.size() * dim, 0.0f);
}

size_t first_duplicate(const uint64_t* keys, size_t n) {
  // Open addressing as in deduplicate(): bucket -> 1 + position, 0 = empty.
  auto& buckets = empty_index(n);
  auto mask = buckets.size() - 1;
  for (size_t i = 0; i < n; ++i) {
    auto b = spread(keys[i]) & mask;
    for (;;) {
      auto pos = buckets[b];
      if (pos == 0) {
        buckets[b] = static_cast<uint32_t>(i + 1);
        break;
      }
      if (keys[pos - 1] == keys[i])
        return i;
      b = (b + 1) & mask;
    }
  }
  return n;
}

} // namespace actorps
