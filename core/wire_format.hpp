#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/float_vector.hpp"

namespace actorps {

/// Bytes of an encoded tensor; resize() does not zero (encode overwrites
/// them whole).
using byte_vector = std::vector<uint8_t, default_init_allocator<uint8_t>>;

/// A float tensor as a wire format encodes it: what a push or a pull carries
/// instead of the raw floats. Which format it is in is not recorded: sender
/// and receiver build the same format from the job config.
struct encoded_tensor {
  /// Floats in the decoded tensor.
  uint64_t n = 0;
  /// Entries the payload carries: n for the dense formats (fp32, bf16,
  /// fp16), the entries sent for topk (k <= n).
  uint64_t k = 0;
  /// The payload, layout per format (see make_wire_format). Multi-byte
  /// values are in the host's byte order, like float_buffer's: all nodes of
  /// a cluster must share endianness.
  byte_vector bytes;
};

/// A wire format: how a float tensor (a gradient in a push, values in a
/// pull) is encoded into bytes and decoded again. A format is immutable and
/// holds only its settings; error-feedback state (the residual of topk) is
/// owned by the caller, one buffer per worker per tensor.
/// Thread-safe (const): one format may encode and decode on several threads
/// at once.
class wire_format {
public:
  virtual ~wire_format();

  /// The format as canonical spec text, e.g. "bf16" or "topk:0.01";
  /// make_wire_format(name()) builds the same format.
  virtual const std::string& name() const = 0;

  /// Size of encoded_tensor::bytes for a tensor of `n` floats: fp32 4n,
  /// bf16 and fp16 2n, topk 8k. On the wire the two uint64_t fields n and k
  /// come on top (16 bytes).
  /// @throws input_error "wire format \"SPEC\": ..." if the format cannot
  ///         carry n floats (topk: k larger than n, or n > 2^32). Callers
  ///         may call it once per tensor to validate a config early.
  virtual size_t encoded_bytes(size_t n) const = 0;

  /// Whether encode reads and updates a residual (error feedback) when it is
  /// given one: true for topk and int8, false for fp32, bf16 and fp16.
  virtual bool uses_residual() const;

  /// Whether decode leaves entries that were not sent at 0 (topk), rather
  /// than giving every entry back approximately (fp32, bf16, fp16, int8).
  /// Only formats that are not sparse can carry a pull's values.
  virtual bool is_sparse() const;

  /// Encodes `n` floats `values[0..n)` into `out`, replacing its content
  /// (the capacity of out.bytes is reused). Afterwards out.n == n and
  /// out.bytes.size() == encoded_bytes(n).
  /// @param residual  n floats of error feedback, or nullptr. Formats with
  ///                  uses_residual() add it to `values` before encoding and
  ///                  leave in it what was not sent (zero it before the first
  ///                  step); with nullptr the part not sent is dropped. The
  ///                  others neither read nor write it. Must not overlap
  ///                  `values`.
  /// @throws input_error as encoded_bytes(n); then `out` and `residual` are
  ///         unchanged.
  virtual void encode(const float* values, size_t n, encoded_tensor& out,
                      float* residual) const
    = 0;

  /// Decodes `in` into `out`, which it overwrites whole: n floats, entries
  /// that a sparse format (topk) did not send become 0. A parameter server
  /// applies `out` as the push's gradient.
  /// @throws input_error "wire format \"SPEC\": ..." for a malformed payload
  ///         (from a peer): in.n differs from n, in.bytes.size() does not
  ///         match in.k, or (topk) in.k > n, an index >= n, or indices not
  ///         strictly increasing (a repeated one included). Nothing is
  ///         written to `out` then.
  virtual void decode(const encoded_tensor& in, float* out, size_t n) const
    = 0;
};

/// Builds the format that `spec` names: "NAME" or "NAME:ARGUMENT". The
/// registry (core/wire/registry.cpp; one file per format in core/wire/):
/// - fp32:  the floats as they are, 4n bytes. Exact. The default.
/// - bf16:  bfloat16 (the upper 16 bits of a float, rounded to nearest
///          even; Eigen::bfloat16), 2n bytes. Relative error <= 2^-8 for
///          |x| >= 2^-126 (float's normal range), absolute error <= 2^-134
///          below. Finite values beyond bf16's largest (about 3.3895e38)
///          saturate to it (error still <= 2^-8 relative); +-0, +-inf keep
///          their value and sign; NaN stays NaN (quiet; sign and payload
///          are not kept).
/// - fp16:  IEEE 754 binary16 (Eigen::half, rounded to nearest even), 2n
///          bytes. Relative error <= 2^-11 for 2^-14 <= |x| <= 65504,
///          absolute error <= 2^-25 below (subnormal halves; |x| <= 2^-25
///          becomes +-0). Finite |x| > 65504 saturates to +-65504 (an
///          unbounded error: use bf16 for values that large); +-0 and
///          +-inf keep their value and sign; NaN stays NaN.
/// - topk:K, topk:RATIO: top-k sparsification with error feedback (Lin et
///          al., "Deep Gradient Compression", ICLR 2018: the accumulated
///          gradient g + residual is sent where it is largest, the rest stays
///          in the residual). An argument of digits only is a count K in
///          [1, 2^32 - 1]; any other number (with a '.' or an exponent) is a
///          ratio in (0, 1] of the tensor: k = max(1, round(RATIO * n)) (0
///          for n = 0). The payload is k pairs (uint32 index, float value),
///          8k bytes, indices strictly increasing. Exact for the entries
///          sent. Ties go to the lower index; NaN counts as the largest
///          magnitude (it is always sent). Encoding is O(n), about 2 ms per
///          1M floats on one core, with a per-thread scratch buffer of up to
///          4n bytes (plus 256 KiB above 2^15 floats) kept between calls.
/// - int8:  8-bit linear quantization per block of 256 floats with error
///          feedback (Seide et al., "1-Bit Stochastic Gradient Descent...",
///          Interspeech 2014; Dettmers, "8-Bit Approximations for
///          Parallelism in Deep Learning", ICLR 2016): ceil(n / 256) float
///          scales (max |x| / 127 of the block), then n int8 codes in
///          [-127, 127]; n + 4 ceil(n / 256) bytes. Error per entry <= max
///          |x| of its block / 254 (plus float rounding). With a residual
///          (pushes) x = values + residual and the residual keeps what was
///          not sent; without one (pulls) values are quantized as they are.
///          A block with a NaN or infinity decodes to NaN throughout.
/// @throws input_error "wire format \"SPEC\": unknown format \"NAME\"
///         (known: ...)", or naming what is wrong with the argument (one
///         given to fp32, bf16, fp16 or int8; none, an empty or malformed
///         one, a count of 0, a ratio outside (0, 1] for topk).
std::shared_ptr<const wire_format> make_wire_format(const std::string& spec);

/// The names the registry knows, sorted: the built-in formats and those
/// added with register_wire_format.
std::vector<std::string> wire_format_names();

/// Builds a format from its spec: `spec` is the whole text (for messages),
/// `arg` what follows the first ':' (std::nullopt when there is no ':').
/// @throws input_error naming the spec for an argument it cannot use.
using wire_format_factory = std::function<std::shared_ptr<const wire_format>(
  const std::string& spec, const std::optional<std::string>& arg)>;

/// Adds the format `name` to the registry at run time, so that a program
/// built on the library can name its own format in a job config without
/// editing actorps. Call it before the job config is validated, in every
/// process of a cluster (senders and receivers build formats themselves).
/// Thread-safe.
/// @throws std::invalid_argument "register_wire_format(\"NAME\"): ..." if
///         `name` is empty, contains ':', is taken (built in or registered
///         before), or `make` is empty; nothing changes then.
void register_wire_format(const std::string& name, wire_format_factory make);

/// Removes the format `name` that register_wire_format added (built-in
/// formats are never removed); its name is free again. Formats built from it
/// live on. Thread-safe. Returns whether it was registered.
bool unregister_wire_format(const std::string& name);

} // namespace actorps
