#pragma once

// Internal header of the update-rule registry: what one rule file provides
// and the helpers they share. Nothing outside core/update_rule.cpp and
// core/rules/ includes it; the public interface is core/update_rule.hpp.
//
// Adding a rule: write core/rules/NAME.cpp with a factory
//   std::unique_ptr<update_rule> make_NAME(const optimizer_config&,
//                                          const std::string& section);
// declare it below, and add one line {"NAME", make_NAME} to the table in
// core/rules/registry.cpp (with its update_rule_traits where they differ
// from the defaults).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#if defined(__SSE__)
#  include <xmmintrin.h>
#endif

#include "core/update_rule.hpp"

namespace actorps::detail {

// -- registry -----------------------------------------------------------------

/// Builds a rule from its config section; throws input_error (see
/// make_update_rule).
using rule_factory = std::unique_ptr<update_rule> (*)(
  const optimizer_config& cfg, const std::string& section);

/// One line of the registry: the rule's name, its factory and what it
/// declares about itself (default: a rule like sgd).
struct rule_entry {
  const char* name;
  rule_factory make;
  update_rule_traits traits = {};
};

/// The registry's lines (core/rules/registry.cpp).
struct rule_list {
  const rule_entry* first;
  size_t size;

  const rule_entry* begin() const noexcept {
    return first;
  }

  const rule_entry* end() const noexcept {
    return first + size;
  }
};

rule_list registered_rules() noexcept;

// -- factories (one file each) --------------------------------------------------

std::unique_ptr<update_rule> make_sgd(const optimizer_config& cfg,
                                      const std::string& section);
std::unique_ptr<update_rule> make_momentum(const optimizer_config& cfg,
                                           const std::string& section);
std::unique_ptr<update_rule> make_adagrad(const optimizer_config& cfg,
                                          const std::string& section);
std::unique_ptr<update_rule> make_adam(const optimizer_config& cfg,
                                       const std::string& section);
std::unique_ptr<update_rule> make_ftrl(const optimizer_config& cfg,
                                       const std::string& section);

// -- helpers for rule files -------------------------------------------------------

/// Reads a rule's settings from a config section and checks them:
/// constructing it checks the learning rate (in (0, 1e6]); each get() reads
/// one field, with its default and range; finish() rejects every field of
/// `cfg.params` no get() asked for. All errors are input_error naming the
/// field as "SECTION.FIELD".
class rule_params {
public:
  /// @throws input_error "SECTION.learning_rate: V is out of range (0,
  ///         1000000]".
  rule_params(const optimizer_config& cfg, const std::string& section,
              const char* rule);

  /// The value of `field`, or `fallback` if the section does not set it.
  /// @throws input_error "SECTION.FIELD: V is out of range [lo, hi]" (NaN is
  ///         out of every range).
  float get(const char* field, double fallback, double lo, double hi);

  /// A boolean field, written 0 or 1.
  /// @throws input_error "SECTION.FIELD: V must be 0 or 1".
  bool get_flag(const char* field, bool fallback);

  /// @throws input_error "SECTION.FIELD: unknown field for RULE" for the first
  ///         field (in name order) that no get() read.
  void finish() const;

private:
  const optimizer_config& cfg_;
  const std::string& section_;
  const char* rule_;
  std::vector<std::string> read_;
};

/// flush_denormals() as an inline function for the rules' apply(): reads
/// MXCSR (cheap) and writes it only when the bits are not set yet, since
/// writing it costs more and apply() runs thousands of times per step on
/// embedding rows.
inline void ensure_flush_denormals() noexcept {
#if defined(__SSE__)
  constexpr unsigned ftz_daz = 0x8040; // FTZ (bit 15) | DAZ (bit 6)
  auto csr = _mm_getcsr();
  if ((csr & ftz_daz) != ftz_daz)
    _mm_setcsr(csr | ftz_daz);
#endif
}

#if defined(__GNUC__)
#  define ACTORPS_FLATTEN __attribute__((flatten))
#else
#  define ACTORPS_FLATTEN
#endif

/// Runs an elementwise kernel over n floats in blocks of 16, so that every
/// rule takes one code path for embedding rows and dense regions alike:
/// `kernel(offset, len, size)` for the floats [offset, offset + len), with
/// `size` a std::integral_constant holding the block's compile-time length
/// (16, or Eigen::Dynamic for a shorter head or tail) for block_map<Size>.
///
/// Why blocks: a dynamic-size Eigen::Map takes scalar steps until its
/// destination is aligned to a whole packet (64 bytes with AVX-512), which
/// a 16-float table row (at malloc's 16-byte alignment) rarely is. 16-float
/// rows took 25 ns (momentum), 33 ns (adagrad), 35 ns (ftrl) that way and
/// take 9, 10, 12 ns as one fixed-size block (unaligned loads and stores,
/// fully unrolled). Why the head: on a long range, unaligned 64-byte stores
/// split cache lines, so a range of more than 64 floats first takes a short
/// head up to the next 64-byte boundary of `align_to` (the parameters;
/// malloc'ed buffers this large share their offset modulo 64, so the slots
/// usually align too). 235k floats: sgd 23 -> 18 us, adam 69-82 -> 59 us
/// (the old dynamic-Map optimizer_state: 18 and 75 us).
///
/// Same value wherever a float lies: which floats take the head, the tail
/// or the scalar steps inside a dynamic-size block depends on the address,
/// so a kernel may use only operations that Eigen's scalar and packet code
/// round alike: + - * /, min, max and sqrt (exact in packets too with
/// EIGEN_FAST_MATH=0, see CMakeLists.txt); not exp, log, pow or tanh, whose
/// packet versions are approximations. With Eigen's default rsqrt-based
/// packet sqrt, adagrad, adam and ftrl changed a few floats with the
/// alignment of their buffers, and a simulated run changed with the length
/// of an unrelated argument (which moved the heap).
///
/// Flattened (GCC, Clang): every call inside is inlined, the kernel above
/// all; GCC 12 otherwise calls the kernel out of line once per block (a
/// dense momentum step went from 50 to 87 us). Kernels should capture
/// settings and pointers by value, as locals: a float store may alias a
/// float member, so members are reloaded after every block.
template <class Kernel>
ACTORPS_FLATTEN inline void for_each_block(const float* align_to, size_t n,
                                           Kernel&& kernel) {
  constexpr size_t block_size = 16;
  constexpr size_t align_bytes = 64;
  using dynamic = std::integral_constant<int, Eigen::Dynamic>;
  using fixed = std::integral_constant<int, static_cast<int>(block_size)>;
  size_t i = 0;
  if (n > 4 * block_size) {
    auto addr = reinterpret_cast<uintptr_t>(align_to);
    auto head = ((align_bytes - addr % align_bytes) % align_bytes)
                / sizeof(float);
    if (addr % sizeof(float) == 0 && head > 0) {
      kernel(size_t{0}, static_cast<Eigen::Index>(head), dynamic{});
      i = head;
    }
  }
  for (; i + block_size <= n; i += block_size)
    kernel(i, static_cast<Eigen::Index>(block_size), fixed{});
  if (i < n)
    kernel(i, static_cast<Eigen::Index>(n - i), dynamic{});
}

/// A block of floats for for_each_block's kernels. At most 16 floats, so a
/// temporary block (also the Dynamic one) lives on the stack: no allocation.
template <int Size>
using block = Eigen::Array<float, Size, 1, Eigen::ColMajor, 16, 1>;

/// Maps of blocks: parameters and slots (written), gradients (read).
template <int Size>
using block_map = Eigen::Map<block<Size>>;

template <int Size>
using const_block_map = Eigen::Map<const block<Size>>;

} // namespace actorps::detail
