#pragma once

// The staleness histogram: how many pushes a parameter server applied at
// each staleness (its clock at apply time minus the clock the gradient was
// read at). Fixed buckets, so that counts of different servers, processes
// and runs add up bucket by bucket, and the same bounds serve the final
// report, the metrics file and the Prometheus endpoint.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace actorps {

/// Inclusive upper bounds of the buckets but the last: bucket i counts the
/// pushes with staleness in (staleness_bounds[i-1], staleness_bounds[i]],
/// bucket 0 those with staleness 0, and the last bucket (index
/// staleness_bounds.size()) everything above 128.
inline constexpr std::array<uint64_t, 9> staleness_bounds = {0,  1,  2,  4,  8,
                                                             16, 32, 64, 128};

/// Number of buckets: staleness_bounds.size() + 1.
inline constexpr size_t staleness_buckets = staleness_bounds.size() + 1;

/// The bucket of staleness `s` (0 .. staleness_buckets - 1).
size_t staleness_bucket(uint64_t s) noexcept;

/// Counts one push of staleness `s` in `counts` (sized to staleness_buckets
/// first if it is smaller, e.g. empty).
void add_staleness(std::vector<uint64_t>& counts, uint64_t s);

/// `after - before`, bucket by bucket (0 where `before` counted more: a
/// server restored from an older checkpoint); missing buckets count as 0.
/// Always staleness_buckets long.
std::vector<uint64_t> staleness_since(const std::vector<uint64_t>& after,
                                      const std::vector<uint64_t>& before);

/// Adds `x` into `sum` bucket by bucket (sum sized to staleness_buckets).
void merge_staleness(std::vector<uint64_t>& sum,
                     const std::vector<uint64_t>& x);

/// The label of bucket `i` for people: "0", "1", "2", "3-4", ..., "65-128",
/// ">128".
std::string staleness_bucket_label(size_t i);

/// The non-empty buckets for people, e.g. "0: 812, 1: 95, 2: 12, 3-4: 1"
/// ("none" when every bucket is empty).
std::string describe_staleness(const std::vector<uint64_t>& counts);

} // namespace actorps
