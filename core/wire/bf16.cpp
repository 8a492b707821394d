// bf16: bfloat16, the upper 16 bits of a float rounded to nearest even.

#include <Eigen/Core>

#include "core/wire/formats.hpp"
#include "core/wire/half_width.hpp"

namespace actorps::detail {

namespace {

/// 2 bytes per float: sign, float's 8 exponent bits, 7 fraction bits (Google
/// Brain's bfloat16, as in TensorFlow and Eigen). The conversion is
/// Eigen::bfloat16's: round to nearest, ties to even, NaN to a quiet NaN
/// (its sign and payload are not kept). One change: a finite float beyond
/// bf16's largest value (0x7f7f, about 3.3895e38) saturates to it instead of
/// rounding to inf, so finite gradients stay finite.
/// Error: |decode(encode(x)) - x| <= 2^-8 |x| for |x| >= 2^-126, <= 2^-134
/// below (float's subnormals keep their upper 7 fraction bits).
class bf16_format final : public wire_format {
public:
  /// bf16's largest finite value, 0x7f7f: (2 - 2^-7) 2^127.
  static constexpr float bf16_max = 0x1.FEp127f;

  const std::string& name() const override {
    static const std::string str = "bf16";
    return str;
  }

  size_t encoded_bytes(size_t n) const override {
    return n * sizeof(uint16_t);
  }

  void encode(const float* values, size_t n, encoded_tensor& out,
              float*) const override {
    out.n = n;
    out.k = n;
    out.bytes.resize(n * sizeof(uint16_t));
    encode_half_width<Eigen::bfloat16>(values, n, out.bytes.data(),
                                       bf16_max);
  }

  void decode(const encoded_tensor& in, float* out, size_t n) const override {
    check_dense_payload(*this, in, n, sizeof(uint16_t));
    decode_half_width<Eigen::bfloat16>(in.bytes.data(), out, n);
  }
};

} // namespace

std::shared_ptr<const wire_format>
make_bf16_format(const std::string& spec,
                 const std::optional<std::string>& arg) {
  require_no_argument(spec, "bf16", arg);
  return std::make_shared<bf16_format>();
}

} // namespace actorps::detail
