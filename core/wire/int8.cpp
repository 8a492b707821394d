// int8: 8-bit linear quantization in blocks of 256 floats, one float scale
// per block, with optional error feedback (the residual of 1-bit SGD: Seide
// et al., "1-Bit Stochastic Gradient Descent and its Application to
// Data-Parallel Distributed Training of Speech DNNs", Interspeech 2014; at
// 8 bits and per block, as in Dettmers, "8-Bit Approximations for
// Parallelism in Deep Learning", ICLR 2016).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/wire/formats.hpp"

namespace actorps::detail {

namespace {

/// Floats per block (the last block of a tensor may be shorter).
constexpr size_t block = 256;

/// Largest code: codes are in [-127, 127], symmetric around 0.
constexpr float max_code = 127.0f;

size_t blocks_of(size_t n) {
  return (n + block - 1) / block;
}

/// Payload: ceil(n / 256) float scales (host byte order), then n int8
/// codes; entry i decodes to code[i] * scale[i / 256]. A block's scale is
/// max |x| / 127 over it, so its largest entries are sent exactly (up to
/// float rounding of the scale) and every entry within scale / 2:
///   |decode(encode(x))_i - x_i| <= max_{j in block(i)} |x_j| / 254
/// plus float rounding (about 2^-24 relative). Codes round to nearest, ties
/// to even. A block that is all zero, or whose max |x| is below about
/// 3.7e-37 (where 127 / max overflows), has scale 0 and decodes to zeros.
/// A block holding a NaN or an infinity has scale NaN and decodes to NaN
/// throughout (a parameter server's checks then see a non-finite gradient,
/// as with fp32).
/// With a residual (error feedback; pushes), x = values + residual and the
/// residual keeps x - decoded, so what was not sent goes with the next
/// push; without one (pulls), x = values. Scratch blocks on the stack, no
/// allocation beyond out.bytes. Per 1M floats on one core (AVX-512 host,
/// -O3, medians of 30): encode 0.18 ms (0.28 ms with a residual), decode
/// 0.08 ms; bf16 0.16 and 0.08 ms.
class int8_format final : public wire_format {
public:
  const std::string& name() const override {
    static const std::string str = "int8";
    return str;
  }

  size_t encoded_bytes(size_t n) const override {
    return blocks_of(n) * sizeof(float) + n;
  }

  bool uses_residual() const override {
    return true;
  }

  bool is_sparse() const override {
    return false;
  }

  void encode(const float* values, size_t n, encoded_tensor& out,
              float* residual) const override {
    auto nb = blocks_of(n);
    out.n = n;
    out.k = n;
    out.bytes.resize(encoded_bytes(n));
    auto* scales = out.bytes.data();
    auto* codes = reinterpret_cast<int8_t*>(out.bytes.data()
                                            + nb * sizeof(float));
    float acc[block];
    for (size_t b = 0; b < nb; ++b) {
      auto off = b * block;
      auto len = std::min(block, n - off);
      // x: the values (pulls), or values + residual in a scratch block.
      const float* x = values + off;
      float* r = residual != nullptr ? residual + off : nullptr;
      if (r != nullptr) {
        for (size_t i = 0; i < len; ++i)
          acc[i] = x[i] + r[i];
        x = acc;
      }
      // max |x| as the largest magnitude's bits (they order like the
      // magnitudes; inf and NaN above every finite one): an integer max,
      // which vectorizes where a float max does not without -ffast-math.
      uint32_t top = 0;
      for (size_t i = 0; i < len; ++i) {
        uint32_t bits;
        std::memcpy(&bits, x + i, sizeof(bits));
        top = std::max(top, bits & 0x7fffffffu);
      }
      const bool finite = top < 0x7f800000u;
      float m;
      std::memcpy(&m, &top, sizeof(m));
      // 127 / m overflows for m below about 3.7e-37, and is inf for a
      // subnormal m under flush-to-zero (the update rules turn it on for
      // their threads): such a block goes as zeros, scale 0.
      const float inv = max_code / m;
      constexpr float nan = std::numeric_limits<float>::quiet_NaN();
      float scale = !finite ? nan : std::isfinite(inv) ? m / max_code : 0.0f;
      std::memcpy(scales + b * sizeof(float), &scale, sizeof(scale));
      int8_t* c = codes + off;
      if (!(scale > 0.0f)) {
        std::fill(c, c + len, int8_t{0});
        // A (nearly) zero block leaves its x in the residual (where it is
        // below 3.7e-37); a non-finite one leaves x, NaN and all: the job
        // has diverged.
        if (r != nullptr)
          std::copy(x, x + len, r);
        continue;
      }
      // Round to nearest even by adding and subtracting 1.5 * 2^23 (exact
      // for |y| < 2^22, here <= 127 plus rounding), which vectorizes where
      // std::round and lrint do not: 3.7 -> 0.3 ms per 1M floats.
      constexpr float shift = 12582912.0f;
      float q[block];
      for (size_t i = 0; i < len; ++i) {
        auto y = std::min(std::max(x[i] * inv, -max_code), max_code);
        q[i] = (y + shift) - shift;
      }
      for (size_t i = 0; i < len; ++i)
        c[i] = static_cast<int8_t>(static_cast<int32_t>(q[i]));
      if (r != nullptr)
        for (size_t i = 0; i < len; ++i)
          r[i] = x[i] - q[i] * scale;
    }
  }

  void decode(const encoded_tensor& in, float* out, size_t n) const override {
    if (in.n != n || in.k != n)
      throw_wire_error(name(), fmt::format("the tensor has {} floats, the "
                                           "payload says n = {}, k = {}",
                                           n, in.n, in.k));
    if (in.bytes.size() != encoded_bytes(n))
      throw_wire_error(name(),
                       fmt::format("the payload has {} bytes, {} floats "
                                   "need {}",
                                   in.bytes.size(), n, encoded_bytes(n)));
    auto nb = blocks_of(n);
    const auto* scales = in.bytes.data();
    const auto* codes = reinterpret_cast<const int8_t*>(in.bytes.data()
                                                        + nb * sizeof(float));
    // Checked whole first: nothing is written for a malformed payload.
    for (size_t b = 0; b < nb; ++b) {
      float s;
      std::memcpy(&s, scales + b * sizeof(float), sizeof(s));
      if (!std::isnan(s) && !(s >= 0.0f && std::isfinite(s)))
        throw_wire_error(name(), fmt::format("block {} has scale {}: a "
                                             "scale is finite and >= 0 "
                                             "(or NaN)",
                                             b, s));
    }
    for (size_t b = 0; b < nb; ++b) {
      float s;
      std::memcpy(&s, scales + b * sizeof(float), sizeof(s));
      auto off = b * block;
      auto len = std::min(block, n - off);
      for (size_t i = 0; i < len; ++i)
        out[off + i] = static_cast<float>(codes[off + i]) * s;
    }
  }
};

} // namespace

std::shared_ptr<const wire_format>
make_int8_format(const std::string& spec,
                 const std::optional<std::string>& arg) {
  require_no_argument(spec, "int8", arg);
  return std::make_shared<int8_format>();
}

} // namespace actorps::detail
