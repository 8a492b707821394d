// fp32: the floats as they are (the default wire format).

#include <cstring>

#include "core/wire/formats.hpp"

namespace actorps::detail {

namespace {

/// 4 bytes per float, bit for bit: exact, NaN payloads included.
class fp32_format final : public wire_format {
public:
  const std::string& name() const override {
    static const std::string str = "fp32";
    return str;
  }

  size_t encoded_bytes(size_t n) const override {
    return n * sizeof(float);
  }

  void encode(const float* values, size_t n, encoded_tensor& out,
              float*) const override {
    out.n = n;
    out.k = n;
    out.bytes.resize(n * sizeof(float));
    if (n > 0)
      std::memcpy(out.bytes.data(), values, n * sizeof(float));
  }

  void decode(const encoded_tensor& in, float* out, size_t n) const override {
    check_dense_payload(*this, in, n, sizeof(float));
    if (n > 0)
      std::memcpy(out, in.bytes.data(), n * sizeof(float));
  }
};

} // namespace

std::shared_ptr<const wire_format>
make_fp32_format(const std::string& spec,
                 const std::optional<std::string>& arg) {
  require_no_argument(spec, "fp32", arg);
  return std::make_shared<fp32_format>();
}

} // namespace actorps::detail
