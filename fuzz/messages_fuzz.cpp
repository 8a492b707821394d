// Fuzz target: the deserialiser of every network message, as CAF's BASP
// runs it on bytes a peer sent.
//
// Input: one byte picks the type: i < N is the i-th type of the actorps
// type-id block (actors/messages.hpp: float_buffer, pull_request,
// push_request, create_shard, ps_snapshot, table_rows, handshake,
// node_welcome, closure_request, step_result, ...), N (the byte modulo
// N + 1) a whole caf::message, whose elements name their types as a peer's
// do. The rest is the serialised value (caf::binary_deserializer over the
// fuzz actor system).
//
// Properties: deserialising returns a value or an error, never crashes; a
// value serialises, and that deserialises to a value that serialises to the
// same bytes (the encoding is a function of the value); it renders as text
// (deep_to_string, as logs and errors show it). Values with an infinite or
// NaN float field are not serialised again: CAF 0.17.6 hangs on an infinity
// there (fuzz/nonfinite.hpp). What a parameter server
// does with such values is ps_requests_fuzz.cpp; handshakes,
// handshake_fuzz.cpp.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"
#include "caf/deep_to_string.hpp"
#include "caf/message.hpp"

#include "actors/messages.hpp"
#include "fuzz/fuzz_system.hpp"
#include "fuzz/fuzz_util.hpp"
#include "fuzz/nonfinite.hpp"

using namespace actorps;

namespace {

using block = caf::id_block::actorps;

/// Serialises `x`; fail()s if that is refused (a value the deserialiser
/// produced must be sendable again).
template <class T>
std::vector<char> serialise(caf::actor_system& sys, T& x, const char* what) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  if (auto err = sink(x))
    fuzz::fail(std::string{what} + ": a deserialised value does not "
                                   "serialise: " + sys.render(err));
  return buf;
}

/// Deserialises a T from `bytes`; then checks the round trip.
template <class T>
void fuzz_value(const std::string& bytes, const char* what) {
  auto& sys = fuzz::fuzz_system();
  T x;
  caf::binary_deserializer src{sys, bytes.data(), bytes.size()};
  if (auto err = src(x))
    return; // refused: what BASP reports and drops
  auto text = caf::deep_to_string(x);
  if constexpr (std::is_same<T, caf::message>::value) {
    // Elements of any registered type (double, config_value, error
    // contexts, ...): judged by their text, "inf" or "nan" in it.
    if (text.find("inf") != std::string::npos
        || text.find("nan") != std::string::npos)
      return; // CAF's pack754 might hang (fuzz/nonfinite.hpp)
  } else if (fuzz::has_nonfinite(x)) {
    return; // CAF's pack754 would hang (fuzz/nonfinite.hpp)
  }
  auto once = serialise(sys, x, what);
  T y;
  caf::binary_deserializer again{sys, once};
  if (auto err = again(y))
    fuzz::fail(std::string{what} + ": a serialised value does not "
                                   "deserialise: " + sys.render(err));
  fuzz::check(again.remaining() == 0,
              "a serialised value leaves bytes when deserialised");
  fuzz::check(serialise(sys, y, what) == once,
              "a value serialises differently after a round trip");
}

using fuzz_fn = void (*)(const std::string&);

template <caf::type_id_t I>
void fuzz_block_type(const std::string& bytes) {
  using type = typename caf::type_by_id<I>::type;
  fuzz_value<type>(bytes, caf::type_name<type>::value);
}

template <size_t... Is>
constexpr std::array<fuzz_fn, sizeof...(Is)>
make_table(std::index_sequence<Is...>) {
  return {{&fuzz_block_type<block::begin + Is>...}};
}

constexpr auto table
  = make_table(std::make_index_sequence<block::end - block::begin>{});

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto which = in.u8() % (table.size() + 1);
  auto bytes = in.rest();
  if (which < table.size())
    table[which](bytes);
  else
    fuzz_value<caf::message>(bytes, "caf::message");
  return 0;
}
