// topk: top-k sparsification with error feedback (Lin et al., "Deep Gradient
// Compression", ICLR 2018, section 3.1 "gradient sparsification" with local
// gradient accumulation). Only that part of DGC: no momentum correction,
// clipping or warm-up, which belong to the update rule.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "core/wire/formats.hpp"

namespace actorps::detail {

namespace {

/// Bytes of one sent entry: uint32 index, float value.
constexpr size_t entry_bytes = sizeof(uint32_t) + sizeof(float);

/// Buckets of the selection's histogram: magnitudes by their upper 15 bits.
constexpr uint32_t buckets = uint32_t{1} << 15;

/// Largest tensor whose indices fit a uint32.
constexpr uint64_t max_floats = uint64_t{1} << 32;

/// Sends the k entries of largest magnitude of a = values + residual as
/// (index, value) pairs, indices increasing; the residual keeps the rest
/// (a for the entries not sent, 0 for those sent), so residual + decoded ==
/// values + old residual exactly, element by element. The sent values are
/// copied, not recomputed.
///
/// Selection, O(n), exact: a float's magnitude orders like its bits without
/// the sign. For more than 2^15 floats a histogram of their upper 15 bits
/// finds the bucket holding the k-th largest magnitude; std::nth_element
/// among that bucket's entries (few: a bucket spans 2^-7 relative), or among
/// all for a smaller tensor, finds it, T. One pass in index order
/// then sends every entry above T and, of those equal to T, the ones with
/// the lowest indices, so ties are deterministic and the pairs come out
/// sorted. NaN's bits exceed inf's: a NaN is always sent (the parameter
/// server's checks see it) and never breaks the order.
/// Per 1M floats, k = 1% (one core): std::nth_element on (magnitude, index)
/// keys and a sort of the k chosen took 7.7 ms; nth_element on all
/// magnitudes 6.4 ms; with the histogram first 2.0 ms (decode: 0.25 ms).
class topk_format final : public wire_format {
public:
  /// k = count if count > 0, else max(1, round(ratio * n)).
  topk_format(std::string name, uint64_t count, double ratio)
    : name_(std::move(name)), count_(count), ratio_(ratio) {
    // nop
  }

  const std::string& name() const override {
    return name_;
  }

  bool uses_residual() const override {
    return true;
  }

  bool is_sparse() const override {
    return true;
  }

  size_t encoded_bytes(size_t n) const override {
    return entries(n) * entry_bytes;
  }

  void encode(const float* values, size_t n, encoded_tensor& out,
              float* residual) const override {
    auto k = entries(n); // throws before anything changes
    const float* acc = values;
    if (residual != nullptr) {
      for (size_t i = 0; i < n; ++i)
        residual[i] += values[i];
      acc = residual;
    }
    // thread_local: one scratch buffer per thread instead of an allocation
    // (4n bytes) per push.
    thread_local std::vector<uint32_t, default_init_allocator<uint32_t>> mags;
    auto magnitude = [acc](size_t i) {
      uint32_t bits;
      std::memcpy(&bits, acc + i, sizeof(bits));
      return bits & 0x7fffffffu;
    };
    uint32_t threshold = 0; // the k-th largest magnitude
    size_t ties = n;        // entries equal to it that are sent
    if (k < n) {
      size_t above = 0; // entries known to be larger than the k-th largest
      if (n <= buckets) {
        mags.resize(n);
        for (size_t i = 0; i < n; ++i)
          mags[i] = magnitude(i);
      } else {
        // The bucket (upper 15 bits of the magnitude) holding the k-th
        // largest, and how many entries lie in the buckets above it.
        thread_local std::vector<uint64_t> hist;
        hist.assign(buckets, 0);
        for (size_t i = 0; i < n; ++i)
          ++hist[magnitude(i) >> 16];
        uint32_t bucket = buckets - 1;
        while (above + hist[bucket] < k)
          above += hist[bucket--];
        mags.resize(hist[bucket]);
        for (size_t i = 0, c = 0; c < mags.size(); ++i)
          if (auto m = magnitude(i); (m >> 16) == bucket)
            mags[c++] = m;
      }
      // The k-th largest: the (k - above)-th among the candidates.
      auto kth = mags.begin() + static_cast<std::ptrdiff_t>(k - above - 1);
      std::nth_element(mags.begin(), kth, mags.end(),
                       std::greater<uint32_t>{});
      threshold = *kth;
      // Every magnitude above the threshold now lies before kth.
      ties = k - above
             - static_cast<size_t>(std::count_if(
               mags.begin(), kth,
               [threshold](uint32_t m) { return m > threshold; }));
    }
    out.n = n;
    out.k = k;
    out.bytes.resize(k * entry_bytes);
    auto* dst = out.bytes.data();
    for (size_t i = 0, j = 0; j < k; ++i) {
      auto m = magnitude(i);
      if (m < threshold || (m == threshold && ties == 0))
        continue;
      if (m == threshold)
        --ties;
      auto index = static_cast<uint32_t>(i);
      std::memcpy(dst + j * entry_bytes, &index, sizeof(index));
      std::memcpy(dst + j * entry_bytes + sizeof(index), acc + i,
                  sizeof(float));
      if (residual != nullptr)
        residual[i] = 0.0f;
      ++j;
    }
  }

  void decode(const encoded_tensor& in, float* out, size_t n) const override {
    if (in.n != n)
      throw_wire_error(name_, fmt::format("the message carries a tensor of "
                                          "{} floats, expected {}",
                                          in.n, n));
    if (in.k > n)
      throw_wire_error(name_, fmt::format("the message carries {} entries "
                                          "for a tensor of {} floats",
                                          in.k, n));
    if (in.bytes.size() != in.k * entry_bytes)
      throw_wire_error(name_, fmt::format("the message carries {} bytes for "
                                          "{} entries, expected {}",
                                          in.bytes.size(), in.k,
                                          in.k * entry_bytes));
    const auto* src = in.bytes.data();
    auto k = static_cast<size_t>(in.k);
    uint64_t next = 0; // smallest index the next entry may have
    for (size_t j = 0; j < k; ++j) {
      uint32_t i;
      std::memcpy(&i, src + j * entry_bytes, sizeof(i));
      if (i >= n)
        throw_wire_error(name_, fmt::format("entry {} has index {}, not below "
                                            "the tensor's {} floats",
                                            j, i, n));
      if (i < next)
        throw_wire_error(name_, fmt::format("entry {} has index {} after "
                                            "index {}: indices must increase "
                                            "strictly",
                                            j, i, next - 1));
      next = uint64_t{i} + 1;
    }
    std::fill(out, out + n, 0.0f);
    for (size_t j = 0; j < k; ++j) {
      uint32_t i;
      std::memcpy(&i, src + j * entry_bytes, sizeof(i));
      std::memcpy(out + i, src + j * entry_bytes + sizeof(i), sizeof(float));
    }
  }

private:
  /// k for a tensor of n floats.
  /// @throws input_error if n > 2^32 or a count exceeds n.
  size_t entries(size_t n) const {
    if (n > max_floats)
      throw_wire_error(name_, fmt::format("a tensor of {} floats is too "
                                          "large for uint32 indices",
                                          n));
    if (count_ > 0) {
      if (count_ > n)
        throw_wire_error(name_, fmt::format("k = {} is larger than the tensor "
                                            "({} floats)",
                                            count_, n));
      return static_cast<size_t>(count_);
    }
    if (n == 0)
      return 0;
    auto k = std::llround(ratio_ * static_cast<double>(n));
    return std::clamp(static_cast<size_t>(std::max(k, 1LL)), size_t{1}, n);
  }

  std::string name_;
  uint64_t count_;
  double ratio_;
};

} // namespace

std::shared_ptr<const wire_format>
make_topk_format(const std::string& spec,
                 const std::optional<std::string>& arg) {
  constexpr const char* usage = "expected topk:K (a count, e.g. topk:1000) "
                                "or topk:RATIO (in (0, 1], e.g. topk:0.01)";
  if (!arg || arg->empty())
    throw_wire_error(spec, usage);
  const auto& s = *arg;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (std::all_of(s.begin(), s.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    uint64_t count = 0;
    auto [end, ec] = std::from_chars(first, last, count);
    if (ec != std::errc{} || end != last || count == 0 || count >= max_floats)
      throw_wire_error(spec, fmt::format("the count must be in [1, {}]",
                                         max_floats - 1));
    return std::make_shared<topk_format>(fmt::format("topk:{}", count), count,
                                         0.0);
  }
  double ratio = 0.0;
  auto [end, ec] = std::from_chars(first, last, ratio);
  if (ec != std::errc{} || end != last)
    throw_wire_error(spec, usage);
  if (!(ratio > 0.0 && ratio <= 1.0)) // NaN fails too
    throw_wire_error(spec, fmt::format("the ratio {} is outside (0, 1]",
                                       ratio));
  // A ratio prints with a '.' (or an exponent), so name() parses back to a
  // ratio: 1.0 prints as "1", which would read as a count.
  auto text = fmt::format("{}", ratio);
  if (text.find_first_of(".e") == std::string::npos)
    text += ".0";
  return std::make_shared<topk_format>("topk:" + text, 0, ratio);
}

} // namespace actorps::detail
