#include "core/staleness_histogram.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace actorps {

size_t staleness_bucket(uint64_t s) noexcept {
  auto i = std::lower_bound(staleness_bounds.begin(), staleness_bounds.end(),
                            s);
  return static_cast<size_t>(i - staleness_bounds.begin());
}

void add_staleness(std::vector<uint64_t>& counts, uint64_t s) {
  if (counts.size() < staleness_buckets)
    counts.resize(staleness_buckets, 0);
  ++counts[staleness_bucket(s)];
}

std::vector<uint64_t> staleness_since(const std::vector<uint64_t>& after,
                                      const std::vector<uint64_t>& before) {
  std::vector<uint64_t> result(staleness_buckets, 0);
  for (size_t i = 0; i < staleness_buckets; ++i) {
    auto a = i < after.size() ? after[i] : 0;
    auto b = i < before.size() ? before[i] : 0;
    result[i] = a >= b ? a - b : 0;
  }
  return result;
}

void merge_staleness(std::vector<uint64_t>& sum,
                     const std::vector<uint64_t>& x) {
  if (sum.size() < staleness_buckets)
    sum.resize(staleness_buckets, 0);
  for (size_t i = 0; i < x.size() && i < staleness_buckets; ++i)
    sum[i] += x[i];
}

std::string staleness_bucket_label(size_t i) {
  if (i >= staleness_bounds.size())
    return fmt::format(">{}", staleness_bounds.back());
  auto hi = staleness_bounds[i];
  auto lo = i == 0 ? 0 : staleness_bounds[i - 1] + 1;
  return lo == hi ? fmt::format("{}", hi) : fmt::format("{}-{}", lo, hi);
}

std::string describe_staleness(const std::vector<uint64_t>& counts) {
  std::string text;
  for (size_t i = 0; i < counts.size() && i < staleness_buckets; ++i) {
    if (counts[i] == 0)
      continue;
    text += fmt::format("{}{}: {}", text.empty() ? "" : ", ",
                        staleness_bucket_label(i), counts[i]);
  }
  return text.empty() ? std::string{"none"} : text;
}

} // namespace actorps
