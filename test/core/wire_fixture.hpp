#pragma once

// What the wire-format tests share (wire_format_test.cpp,
// wire_topk_test.cpp): round trips, random values of a given range, top-k
// by its definition, and IEEE subnormals for the test's thread.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#if defined(__SSE__)
#  include <xmmintrin.h>
#endif

#include "core/wire_format.hpp"

namespace actorps::test {

inline constexpr float inf = std::numeric_limits<float>::infinity();
inline constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

/// Turns off flush-to-zero and denormals-are-zero while it lives: the update
/// rules' tests turn them on for the test thread, and subnormals must stay
/// subnormal here.
struct ieee_denormals {
#if defined(__SSE__)
  unsigned saved = _mm_getcsr();

  ieee_denormals() {
    _mm_setcsr(saved & ~0x8040u);
  }

  ~ieee_denormals() {
    _mm_setcsr(saved);
  }
#endif
};

inline std::vector<float> round_trip(const wire_format& f,
                              const std::vector<float>& xs) {
  encoded_tensor enc;
  f.encode(xs.data(), xs.size(), enc, nullptr);
  std::vector<float> out(xs.size(), 42.0f);
  f.decode(enc, out.data(), out.size());
  return out;
}

/// `n` floats of random sign and magnitude |x| = m * 2^e, m in [1, 2), e in
/// [lo, hi].
inline std::vector<float> random_values(size_t n, int lo, int hi, unsigned seed) {
  std::mt19937 gen{seed};
  std::uniform_real_distribution<float> mantissa{1.0f, 2.0f};
  std::uniform_int_distribution<int> exponent{lo, hi};
  std::bernoulli_distribution negative;
  std::vector<float> xs(n);
  for (auto& x : xs) {
    x = std::ldexp(mantissa(gen), exponent(gen));
    if (negative(gen))
      x = -x;
  }
  return xs;
}

/// The indices a top-k payload carries, in order.
inline std::vector<uint32_t> sent_indices(const encoded_tensor& enc) {
  std::vector<uint32_t> out(enc.k);
  for (size_t j = 0; j < out.size(); ++j)
    std::memcpy(&out[j], enc.bytes.data() + 8 * j, sizeof(uint32_t));
  return out;
}

/// Top-k by the definition: the k indices of largest |x| (NaN above inf),
/// ties to the lower index, in increasing order.
inline std::vector<uint32_t> reference_top_k(const std::vector<float>& xs,
                                      size_t k) {
  std::vector<uint32_t> idx(xs.size());
  for (size_t i = 0; i < idx.size(); ++i)
    idx[i] = static_cast<uint32_t>(i);
  auto mag = [&](uint32_t i) { return bits_of(xs[i]) & 0x7fffffffu; };
  std::stable_sort(idx.begin(), idx.end(),
                   [&](uint32_t a, uint32_t b) { return mag(a) > mag(b); });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

} // namespace actorps::test
