#include "core/table_eviction.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace actorps::detail {

namespace {

/// splitmix64 (Steele, Lea & Flood, OOPSLA 2014): the next number of the
/// victim draws.
inline uint64_t eviction_next(uint64_t& state) noexcept {
  uint64_t x = (state += 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Draws that may hit rows of the current call, per sample, before the
/// victim is looked for in order.
constexpr uint32_t draws_per_sample = 4;

/// 2^x for x <= 0, within 1.5e-4 relative (a cubic for 2^f on [0, 1) and
/// the exponent's bits; 0 below 2^-126): LFU decay on every access, where
/// std::exp2 costs as much as the rest of a pull of the row.
inline float decay_factor(float x) noexcept {
  if (!(x > -126.0f))
    return 0.0f;
  float whole = std::floor(x);
  float f = x - whole;
  float p = 1.0f
            + f * (0.6960656421638072f
                   + f * (0.224494337302845f + f * 0.07944023841053369f));
  auto bits = static_cast<uint32_t>(static_cast<int32_t>(whole) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

} // namespace

table_evictor::table_evictor(const table_policy& policy, uint64_t dim,
                             size_t slot_count, uint64_t seed)
  : row_limit_(table_row_limit(policy, dim, slot_count)),
    order_(policy.evict),
    samples_(static_cast<uint32_t>(policy.evict_samples)),
    inverse_half_life_(1.0f / static_cast<float>(policy.lfu_half_life)),
    rng_(seed ^ 0xe71c7ed0c0ffee11ULL) {
  if (policy.steps_to_live)
    ttl_ = static_cast<uint64_t>(*policy.steps_to_live);
  if (policy.l2_threshold)
    l2_squared_ = *policy.l2_threshold * *policy.l2_threshold;
}

void table_evictor::configure(table_rows& rows) const {
  rows.layout(ttl_ != 0, has_limit(),
              has_limit() && order_ == eviction_order::lfu);
  if (has_limit())
    rows.capacity_limit = std::min<uint64_t>(row_limit_, max_table_rows);
}

eviction_cause table_evictor::expired(const table_rows& rows, uint32_t r,
                                      uint64_t now) const noexcept {
  if (ttl_ != 0) {
    auto updated = rows.updated(r);
    if (now > updated && now - updated > ttl_)
      return eviction_cause::ttl;
  }
  if (l2_squared_ > 0) {
    const float* v = rows.values.data() + r * rows.dim;
    double sum = 0;
    for (uint64_t j = 0; j < rows.dim; ++j)
      sum += static_cast<double>(v[j]) * v[j];
    if (sum < l2_squared_)
      return eviction_cause::l2;
  }
  return eviction_cause::none;
}

float table_evictor::decayed(const table_rows& rows, uint32_t r,
                             uint64_t tick) const noexcept {
  auto age = static_cast<float>(tick - rows.accessed(r));
  return rows.frequency(r) * decay_factor(-age * inverse_half_life_);
}

void table_evictor::touch(table_rows& rows, uint32_t r,
                          uint64_t tick) const noexcept {
  if (rows.keeps_frequency() && rows.accessed(r) != tick)
    rows.set_frequency(r, decayed(rows, r, tick) + 1.0f);
  rows.accessed(r) = tick;
}

uint32_t table_evictor::draw(size_t n) noexcept {
  // Lemire's fastrange: the high half of x * n is uniform in [0, n).
  auto x = eviction_next(rng_);
  return static_cast<uint32_t>((static_cast<unsigned __int128>(x) * n) >> 64);
}

uint32_t table_evictor::pick_victim(const table_rows& rows,
                                    uint64_t tick) noexcept {
  auto n = rows.size();
  if (n == 0)
    return no_table_row;
  uint32_t best = no_table_row;
  float best_count = 0;
  uint32_t taken = 0;
  for (uint32_t d = 0; d < samples_ * draws_per_sample && taken < samples_;
       ++d) {
    auto r = draw(n);
    auto accessed = rows.accessed(r);
    if (accessed == tick)
      continue; // used by this call
    ++taken;
    if (best == no_table_row) {
      best = r;
      if (order_ == eviction_order::lfu)
        best_count = decayed(rows, r, tick);
      continue;
    }
    if (order_ == eviction_order::lru) {
      if (accessed < rows.accessed(best))
        best = r;
      continue;
    }
    auto count = decayed(rows, r, tick);
    if (count < best_count
        || (count == best_count && accessed < rows.accessed(best))) {
      best = r;
      best_count = count;
    }
  }
  if (best != no_table_row)
    return best;
  // Nearly every row serves this call (a batch about the shard's size): the
  // first other row after a random start.
  auto start = draw(n);
  for (size_t i = 0; i < n; ++i) {
    auto r = static_cast<uint32_t>((start + i) % n);
    if (rows.accessed(r) != tick)
      return r;
  }
  return no_table_row;
}

} // namespace actorps::detail
