#include "core/admission_filter.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace actorps {

namespace {

/// splitmix64's finaliser (Steele, Lea & Flood, OOPSLA 2014; constants by
/// Vigna): a bijective 64-bit mix, so keys that differ anywhere spread over
/// every column.
inline uint64_t sketch_mix(uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace

// -- admission_filter ---------------------------------------------------------

admission_filter::~admission_filter() = default;

bool admission_filter::observe(uint64_t key) {
  auto n = count(key);
  if (halve_every_ != 0 && ++since_halving_ >= halve_every_) {
    since_halving_ = 0;
    halve();
  }
  // The sighting that reaches admit_after admits, even if a halving just
  // followed it.
  return n >= admit_after_;
}

// -- count_min_sketch ---------------------------------------------------------

count_min_sketch::count_min_sketch(uint64_t admit_after, uint64_t halve_every,
                                   size_t depth, size_t width, uint64_t seed)
  : admission_filter(admit_after, halve_every),
    width_(width),
    counters_(depth * width, 0) {
  if (depth < 1 || depth > 16 || width < 1)
    throw std::invalid_argument(fmt::format(
      "count_min_sketch: depth {} (1 to 16) and width {} (>= 1)", depth,
      width));
  seeds_.reserve(depth);
  uint64_t state = seed ^ 0x5ca1ab1e0ddba11ULL;
  for (size_t j = 0; j < depth; ++j) {
    state += 0x9e3779b97f4a7c15ULL;
    seeds_.push_back(sketch_mix(state));
  }
}

size_t count_min_sketch::column(size_t row, uint64_t key) const noexcept {
  // Lemire's fastrange: the high half of h * w is uniform in [0, w).
  auto h = sketch_mix(key ^ seeds_[row]);
  return static_cast<size_t>(
    (static_cast<unsigned __int128>(h) * width_) >> 64);
}

uint64_t count_min_sketch::estimate(uint64_t key) const {
  uint8_t least = UINT8_MAX;
  for (size_t j = 0; j < seeds_.size(); ++j)
    least = std::min(least, counters_[j * width_ + column(j, key)]);
  return least;
}

uint64_t count_min_sketch::count(uint64_t key) {
  constexpr size_t max_depth = 16; // validate_table_policy's bound
  size_t at[max_depth];
  uint8_t least = UINT8_MAX;
  auto depth = std::min(seeds_.size(), max_depth);
  for (size_t j = 0; j < depth; ++j) {
    at[j] = j * width_ + column(j, key);
    least = std::min(least, counters_[at[j]]);
  }
  if (least == UINT8_MAX)
    return least; // saturated
  // Conservative update: only the counters at the minimum move, to min + 1;
  // the others already count at least that much.
  auto raised = static_cast<uint8_t>(least + 1);
  for (size_t j = 0; j < depth; ++j)
    counters_[at[j]] = std::max(counters_[at[j]], raised);
  return raised;
}

void count_min_sketch::halve() {
  for (auto& c : counters_)
    c >>= 1;
}

size_t count_min_sketch::memory_bytes() const {
  return counters_.capacity() + seeds_.capacity() * sizeof(uint64_t);
}

// -- exact_counter ------------------------------------------------------------

exact_counter::exact_counter(uint64_t admit_after, uint64_t halve_every)
  : admission_filter(admit_after, halve_every) {
}

uint64_t exact_counter::estimate(uint64_t key) const {
  auto it = counts_.find(key);
  return it == counts_.end() ? 0 : it->second;
}

uint64_t exact_counter::count(uint64_t key) {
  auto& n = counts_[key];
  if (n != UINT32_MAX)
    ++n;
  return n;
}

void exact_counter::admitted(uint64_t key) {
  counts_.erase(key);
}

void exact_counter::halve() {
  for (auto it = counts_.begin(); it != counts_.end();) {
    it->second >>= 1;
    if (it->second == 0)
      counts_.erase(it++); // absl: erase(iterator) keeps the others valid
    else
      ++it;
  }
}

size_t exact_counter::memory_bytes() const {
  using slot_type = absl::flat_hash_map<uint64_t, uint32_t>::value_type;
  return counts_.capacity() * (sizeof(slot_type) + 1);
}

// -- construction -------------------------------------------------------------

std::unique_ptr<admission_filter> make_admission_filter(
  const table_policy& policy, uint64_t seed) {
  if (!policy.filters())
    return nullptr;
  auto admit = static_cast<uint64_t>(policy.admit_after);
  auto halve = static_cast<uint64_t>(policy.filter_halve_every);
  if (policy.filter == admission_kind::exact)
    return std::make_unique<exact_counter>(admit, halve);
  auto depth = static_cast<size_t>(policy.filter_depth);
  auto width = static_cast<size_t>(policy.filter_counters) / depth;
  return std::make_unique<count_min_sketch>(admit, halve, depth, width, seed);
}

} // namespace actorps
