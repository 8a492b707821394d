#pragma once

// Finds infinite or NaN float and double fields in a message value.
//
// CAF 0.17.6 serialises a float or double field with detail::pack754
// (caf/detail/ieee_754.hpp), which loops forever on an infinity (`while
// (fnorm >= 2) fnorm /= 2`) and converts a NaN to an integer (undefined
// behaviour). The messages fuzz target found it;
// until the message types stop sending such fields through pack754, the
// round-trip check skips values that hold one. Raw float blocks
// (float_buffer, key_buffer) bypass pack754 and are not looked at.

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "caf/actor_control_block.hpp"
#include "caf/atom.hpp"
#include "caf/meta/annotation.hpp"

#include "core/float_vector.hpp"

namespace actorps::fuzz {

/// A CAF inspector that walks a value (through its inspect() overload) and
/// records whether a float or double member is not finite.
class nonfinite_finder {
public:
  using result_type = void;
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;

  bool found = false;

  template <class... Ts>
  void operator()(Ts&&... xs) {
    (visit(xs), ...);
  }

private:
  template <class T>
  void visit(T& x) {
    using type = std::decay_t<T>;
    if constexpr (caf::meta::is_annotation<type>::value) {
      // type names, callbacks: nothing to look at
    } else if constexpr (std::is_floating_point<type>::value) {
      found = found || !std::isfinite(x);
    } else if constexpr (std::is_arithmetic<type>::value
                         || std::is_enum<type>::value
                         || std::is_same<type, caf::atom_value>::value
                         || std::is_same<type, std::string>::value
                         || std::is_same<type, caf::strong_actor_ptr>::value
                         || std::is_same<type, float_vector>::value
                         || std::is_same<type, std::vector<float>>::value
                         || std::is_same<type, std::vector<uint64_t>>::value) {
      // no pack754 in these (raw blocks, integers, text, handles)
    } else if constexpr (is_vector<type>::value) {
      for (auto& y : x)
        visit(y);
    } else {
      inspect(*this, x);
    }
  }

  template <class T>
  struct is_vector : std::false_type {};

  template <class T, class A>
  struct is_vector<std::vector<T, A>> : std::true_type {};
};

/// Whether `x` holds an infinite or NaN float or double outside raw blocks.
template <class T>
bool has_nonfinite(T& x) {
  nonfinite_finder f;
  f(x);
  return f.found;
}

} // namespace actorps::fuzz
