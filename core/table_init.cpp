#include "core/table_init.hpp"

#include <algorithm>

namespace actorps {

// -- initial values -----------------------------------------------------------

namespace {

constexpr uint64_t golden_gamma = 0x9e3779b97f4a7c15ULL;

/// splitmix64's output function (Steele, Lea & Flood, OOPSLA 2014; constants
/// by Vigna). The same function as placement.hpp's mix64, repeated here so
/// that the row initialiser depends on nothing else: its bits must never
/// change, or a restarted server would create different rows than a worker
/// expects.
inline uint64_t row_mix(uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The state of row `key`'s generator: a bijective mix of the key, keyed by
/// the seed and the variable name.
inline uint64_t row_state(uint64_t seed, uint64_t name_hash,
                          uint64_t key) noexcept {
  return row_mix(row_mix(row_mix(seed ^ golden_gamma) ^ name_hash) ^ key);
}

/// Element j of a row: splitmix64's j-th output from `state`, its top 24
/// bits as a float in [-1, 1) (exact), times the scale (one rounding, so
/// the result stays in [-scale, scale)).
inline float row_element(uint64_t state, uint64_t j, float scale) noexcept {
  auto bits = row_mix(state + (j + 1) * golden_gamma);
  auto centred = static_cast<int32_t>(bits >> 40) - (int32_t{1} << 23);
  return static_cast<float>(centred) * (1.0f / 8388608.0f) * scale;
}

} // namespace

namespace detail {

uint64_t table_name_hash(const std::string& s) noexcept {
  // 64-bit FNV-1a (Fowler, Noll & Vo).
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
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

} // namespace detail

float initial_row_value(const table_shard_def& def, uint64_t key, uint64_t j) {
  if (def.init_scale == 0.0f)
    return 0.0f;
  return row_element(
    row_state(def.seed, detail::table_name_hash(def.variable), key), j,
    def.init_scale);
}

void initial_row(const table_shard_def& def, uint64_t key, float* out) {
  detail::write_initial_row(def.seed, detail::table_name_hash(def.variable),
                            def.init_scale, def.dim, key, out);
}

} // namespace actorps
