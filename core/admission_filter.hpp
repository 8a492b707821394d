#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "core/table_policy.hpp"

namespace actorps {

/// Counts the sightings of keys that have no row yet and says when one has
/// been seen often enough (admit_after times) to get a row. A table shard
/// owns one when its policy's admit_after is above 1 and asks it only about
/// keys it does not hold, so a key's count stops growing once it has a row.
///
/// Decay: with filter_halve_every = H > 0, every count is halved (integer
/// division) after each H sightings, so a key must keep being seen.
/// Not thread-safe; owned by one table shard.
class admission_filter {
public:
  virtual ~admission_filter();

  /// Counts one sighting of `key` and returns whether it has now been seen
  /// at least admit_after times (by the filter's estimate).
  bool observe(uint64_t key);

  /// Whether `key` has been seen at least admit_after times, counting
  /// nothing (a push asks this: pushes are not sightings).
  bool admits(uint64_t key) const {
    return estimate(key) >= admit_after_;
  }

  /// The filter's count of `key`'s sightings (never below the true count
  /// since the last halving; the sketch may be above it).
  virtual uint64_t estimate(uint64_t key) const = 0;

  /// `key` got a row: the exact counter forgets it (so an evicted key must be
  /// seen admit_after times again); a sketch cannot forget one key.
  virtual void admitted(uint64_t key) = 0;

  /// Halves every count now (integer division).
  virtual void halve() = 0;

  /// Bytes held.
  virtual size_t memory_bytes() const = 0;

  uint64_t admit_after() const noexcept {
    return admit_after_;
  }

protected:
  admission_filter(uint64_t admit_after, uint64_t halve_every)
    : admit_after_(admit_after), halve_every_(halve_every) {
  }

  /// Adds one to `key`'s count and returns the new count (saturating).
  virtual uint64_t count(uint64_t key) = 0;

private:
  uint64_t admit_after_;
  uint64_t halve_every_;
  uint64_t since_halving_ = 0;
};

/// A count-min sketch (Cormode & Muthukrishnan, "An improved data stream
/// summary: the count-min sketch and its applications", J. Algorithms 55(1),
/// 2005) of depth d and width w = filter_counters / d, with conservative
/// update (Estan & Varghese, "New directions in traffic measurement and
/// accounting", SIGCOMM 2002: a sighting raises only the counters equal to
/// the key's minimum) and 8-bit counters that saturate at 255.
///
/// Layout: d rows of w uint8 counters, row j at [j * w, (j + 1) * w); key k
/// counts in row j at column fastrange(h_j(k), w), h_j a splitmix64 finaliser
/// of k keyed by a per-row constant drawn from the shard's seed.
///
/// False admissions. Let N be the sightings counted since the last halving
/// and c a key's true count. Every estimate is >= c. Each row's counter
/// exceeds c by the counts of the other keys in its column, whose mean is at
/// most N / w; by Markov's inequality and independent rows,
///   P(estimate >= c + t) <= (N / (w t))^d,
/// which for t = e N / w is the paper's e^-d (estimate within e N / w of c
/// with probability at least 1 - e^-d). A key seen c < admit_after times is
/// thus admitted with probability at most (N / (w (admit_after - c)))^d;
/// conservative update only lowers estimates, so the bound holds for it.
/// To keep that below delta, take w >= N / ((admit_after - c) delta^(1/d)).
/// Example: the default 2^20 counters, d = 4, w = 2^18; admit_after 5 and a
/// key seen once (t = 4): N = 10^5 sightings gives (0.095)^4 = 8e-5, N = 10^6
/// gives 0.83 (too small a sketch). Halving every H sightings keeps N below
/// 2H. Saturation does not matter: 255 >= admit_after.
class count_min_sketch final : public admission_filter {
public:
  /// @param depth     hash rows d >= 1
  /// @param width     counters per row w >= 1
  /// @param seed      draws the per-row hash constants
  /// @pre admit_after <= 255 (a saturated counter reads 255)
  /// @throws std::invalid_argument if depth is outside [1, 16] or width is 0.
  count_min_sketch(uint64_t admit_after, uint64_t halve_every, size_t depth,
                   size_t width, uint64_t seed);

  uint64_t estimate(uint64_t key) const override;

  void admitted(uint64_t) override {
    // A sketch cannot take one key out.
  }

  void halve() override;

  size_t memory_bytes() const override;

  size_t depth() const noexcept {
    return seeds_.size();
  }

  size_t width() const noexcept {
    return width_;
  }

protected:
  uint64_t count(uint64_t key) override;

private:
  size_t column(size_t row, uint64_t key) const noexcept;

  size_t width_;
  std::vector<uint64_t> seeds_;
  std::vector<uint8_t> counters_;
};

/// Exact counts in a hash map (absl::flat_hash_map<uint64_t, uint32_t>),
/// saturating at 2^32 - 1; a key is dropped when it is admitted or halved to
/// 0. Memory: the keys waiting for admission, about 18 bytes each plus the
/// map's spare room.
class exact_counter final : public admission_filter {
public:
  exact_counter(uint64_t admit_after, uint64_t halve_every);

  uint64_t estimate(uint64_t key) const override;

  void admitted(uint64_t key) override;

  void halve() override;

  size_t memory_bytes() const override;

  /// Keys counted (waiting for admission).
  size_t size() const noexcept {
    return counts_.size();
  }

protected:
  uint64_t count(uint64_t key) override;

private:
  absl::flat_hash_map<uint64_t, uint32_t> counts_;
};

/// The filter `policy` asks for, or null when admit_after <= 1 (no filter).
/// @param seed  the table's seed (the sketch's hash constants come from it)
/// @pre validate_table_policy() accepted the policy.
std::unique_ptr<admission_filter> make_admission_filter(
  const table_policy& policy, uint64_t seed);

} // namespace actorps
