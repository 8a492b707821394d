// fp16: IEEE 754 binary16 ("half"), rounded to nearest even.

#include <Eigen/Core>

#include "core/wire/formats.hpp"
#include "core/wire/half_width.hpp"

namespace actorps::detail {

namespace {

/// 2 bytes per float: sign, 5 exponent bits, 10 fraction bits. The
/// conversion is Eigen::half's, or the F16C instructions where the build has
/// them (see half_width.hpp); both round to nearest, ties to even, with
/// subnormal halves; NaN stays NaN, +-inf and +-0 keep their sign. One
/// change: a finite float beyond 65504 (half's largest) saturates to +-65504
/// instead of becoming inf, so finite gradients stay finite (the error there
/// is unbounded; bf16 has float's range).
/// Error: |decode(encode(x)) - x| <= 2^-11 |x| for 2^-14 <= |x| <= 65504,
/// <= 2^-25 below (|x| <= 2^-25 becomes +-0).
class fp16_format final : public wire_format {
public:
  const std::string& name() const override {
    static const std::string str = "fp16";
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
    encode_half_width<Eigen::half>(values, n, out.bytes.data(), 65504.0f);
  }

  void decode(const encoded_tensor& in, float* out, size_t n) const override {
    check_dense_payload(*this, in, n, sizeof(uint16_t));
    decode_half_width<Eigen::half>(in.bytes.data(), out, n);
  }
};

} // namespace

std::shared_ptr<const wire_format>
make_fp16_format(const std::string& spec,
                 const std::optional<std::string>& arg) {
  require_no_argument(spec, "fp16", arg);
  return std::make_shared<fp16_format>();
}

} // namespace actorps::detail
