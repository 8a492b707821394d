// Fuzz target: the 16-byte preamble a peer sends to a node's gate (and a
// node answers to dial()), arriving in pieces as TCP delivers it.
//
// Input: one byte `piece` (the bytes arrive in pieces of piece % 16 + 1
// bytes, as recv may return them), then the bytes the peer sends.
//
// Properties: check_preamble on every prefix agrees with the verdict on the
// whole preamble (a prefix is `incomplete` only if the whole may still be a
// preamble, and a refusal is final); `ok` exactly for "ACTORPS\0" followed
// by this build's protocol_version; a preamble of another version reports
// that version.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cluster/gate.hpp"
#include "cluster/handshake.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

using verdict = preamble_check::verdict;

/// What the verdict on all 16 bytes must be, computed independently.
verdict expected(const char* p) {
  static const char magic[8] = {'A', 'C', 'T', 'O', 'R', 'P', 'S', '\0'};
  if (std::memcmp(p, magic, 8) != 0)
    return verdict::not_actorps;
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t{static_cast<unsigned char>(p[8 + i])} << (8 * i);
  return v == protocol_version ? verdict::ok : verdict::other_version;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  size_t piece = in.u8() % 16 + 1;
  auto stream = in.rest();
  // As the gate does: receive into a 16-byte buffer until it is full or the
  // bytes so far are refused.
  char buf[preamble_size] = {};
  size_t got = 0;
  auto last = verdict::incomplete;
  while (got < preamble_size && got < stream.size()) {
    auto n = std::min({piece, preamble_size - got, stream.size() - got});
    std::memcpy(buf + got, stream.data() + got, n);
    got += n;
    auto c = check_preamble(buf, got);
    fuzz::check(c.first_bytes.size() == 2 * std::min<size_t>(got, 8),
                "check_preamble: first_bytes is not the first bytes in hex");
    last = c.result;
    if (last == verdict::not_actorps)
      break;
    fuzz::check(last != verdict::incomplete || got < preamble_size,
                "check_preamble: 16 bytes are still incomplete");
    fuzz::check(last == verdict::incomplete || got == preamble_size,
                "check_preamble: a verdict before 16 bytes");
  }
  if (stream.size() >= preamble_size) {
    auto want = expected(stream.data());
    fuzz::check(last == want, "check_preamble: the verdict on the pieces "
                              "differs from the verdict on the whole");
    auto whole = check_preamble(stream.data(), stream.size());
    fuzz::check(whole.result == want,
                "check_preamble: extra bytes change the verdict");
    if (want == verdict::other_version)
      fuzz::check(whole.version != protocol_version,
                  "check_preamble: another version that is this one");
  } else if (got > 0) {
    fuzz::check(last == verdict::incomplete || last == verdict::not_actorps,
                "check_preamble: a verdict on a short preamble");
  }
  return 0;
}
