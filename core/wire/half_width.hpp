#pragma once

// Internal header of core/wire/bf16.cpp and core/wire/fp16.cpp: float
// tensors to and from 2-byte floats (Eigen::bfloat16, Eigen::half), in
// blocks. Nothing else includes it.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include <Eigen/Core>

#if defined(__F16C__) && defined(__AVX__)
#  include <immintrin.h>
#endif

namespace actorps::detail {

// -- one block ------------------------------------------------------------------

/// Converts `len` floats to `Half`, rounding to nearest even (Eigen's array
/// cast: vectorized for bfloat16).
template <class Half>
void narrow_block(const float* in, Half* out, size_t len) {
  auto m = static_cast<Eigen::Index>(len);
  Eigen::Map<Eigen::Array<Half, Eigen::Dynamic, 1>>{out, m}
    = Eigen::Map<const Eigen::ArrayXf>{in, m}.template cast<Half>();
}

/// Converts `len` Half values to floats (exact: every one is a float).
template <class Half>
void widen_block(const Half* in, float* out, size_t len) {
  auto m = static_cast<Eigen::Index>(len);
  Eigen::Map<Eigen::ArrayXf>{out, m}
    = Eigen::Map<const Eigen::Array<Half, Eigen::Dynamic, 1>>{in, m}
        .template cast<float>();
}

/// bfloat16 to float is the 16 bits shifted up (exact by definition); a
/// plain loop the compiler vectorizes: 0.14 ms per 1M floats, Eigen's cast
/// 0.75 ms.
template <>
inline void widen_block<Eigen::bfloat16>(const Eigen::bfloat16* in,
                                         float* out, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    auto bits = uint32_t{Eigen::numext::bit_cast<uint16_t>(in[i])} << 16;
    std::memcpy(out + i, &bits, sizeof(bits));
  }
}

#if defined(__F16C__) && defined(__AVX__)

// Eigen 3.4.0 uses the F16C instructions only when Clang compiles it (its
// test `!defined(EIGEN_COMP_CLANG) || EIGEN_COMP_CLANG >= 380` fails under
// GCC, where EIGEN_COMP_CLANG is defined as 0) and otherwise converts one
// value at a time in software: per 1M floats (one core, with the saturation
// pass) 3.0 ms to half and 2.0 ms back; with F16C 0.22 ms and 0.13 ms. The
// instructions convert as IEEE 754 says (round to nearest even, subnormals,
// inf, NaN), as Eigen::half does; a tail of fewer than 8 values goes
// through Eigen::half.

template <>
inline void narrow_block<Eigen::half>(const float* in, Eigen::half* out,
                                      size_t len) {
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    auto h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < len; ++i)
    out[i] = Eigen::half{in[i]};
}

template <>
inline void widen_block<Eigen::half>(const Eigen::half* in, float* out,
                                     size_t len) {
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    auto h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < len; ++i)
    out[i] = static_cast<float>(in[i]);
}

#endif

// -- whole tensors ----------------------------------------------------------------

/// Values per block: the blocks live on the stack (1.5 KiB).
constexpr size_t half_width_block = 256;

/// Encodes `n` floats as 2-byte `Half` values at `dst` (2n bytes, host byte
/// order): finite values beyond +-max_finite saturate to it, NaN and +-inf
/// stay, the rest round to nearest even. A block holds the saturated
/// floats, then the converted values, which are copied into the bytes (no
/// Half lvalue aliases them).
template <class Half>
void encode_half_width(const float* values, size_t n, uint8_t* dst,
                       float max_finite) {
  static_assert(sizeof(Half) == 2);
  constexpr float inf = std::numeric_limits<float>::infinity();
  float in[half_width_block];
  Half out[half_width_block];
  for (size_t off = 0; off < n; off += half_width_block) {
    auto len = std::min(half_width_block, n - off);
    for (size_t i = 0; i < len; ++i) {
      auto x = values[off + i];
      auto a = std::fabs(x);
      in[i] = a > max_finite && a != inf ? std::copysign(max_finite, x)
                                         : x; // NaN: kept
    }
    narrow_block(in, out, len);
    std::memcpy(dst + off * sizeof(Half), out, len * sizeof(Half));
  }
}

/// Decodes `n` 2-byte `Half` values at `src` into n floats (exact).
template <class Half>
void decode_half_width(const uint8_t* src, float* values, size_t n) {
  static_assert(sizeof(Half) == 2);
  Half in[half_width_block];
  for (size_t off = 0; off < n; off += half_width_block) {
    auto len = std::min(half_width_block, n - off);
    std::memcpy(in, src + off * sizeof(Half), len * sizeof(Half));
    widen_block(in, values + off, len);
  }
}

} // namespace actorps::detail
