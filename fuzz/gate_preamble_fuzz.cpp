// Fuzz target: the 16-byte preamble a peer sends to a node's gate (and a
// node answers to dial()), arriving in pieces as TCP delivers it.
//
// Input: one byte `piece` (the bytes arrive in pieces of piece % 16 + 1
// bytes, as recv may return them; bit 4: the reader expects a ticket after
// a preamble that goes on, as a TLS dialer does), then the bytes the peer
// sends.
//
// Properties: check_preamble on every prefix agrees with the verdict on the
// whole preamble (a prefix is `incomplete` only if the whole may still be a
// preamble, and a refusal is final); `ok` exactly for "ACTORPS\0" followed
// by this build's protocol_version; a preamble of another version reports
// that version. After the preamble (cluster/net/tls_channel.hpp): reading as
// missing_bytes asks never reads past the preamble and its ticket or
// refusal (at most max_reason_size bytes of reason); a complete refusal
// parses, an incomplete one does not, and its reason is as long as its
// length field says (cut to max_reason_size) and free of control
// characters; refusal_message writes a refusal that reads back.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "cluster/net/gate.hpp"
#include "cluster/net/handshake.hpp"
#include "cluster/net/tls_channel.hpp"
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

/// The bytes after a preamble that was not refused on sight, read as the
/// gate and dial() read them: in pieces, as much as missing_bytes asks.
void after_preamble(size_t piece, size_t extra, const std::string& stream) {
  if (stream.size() < preamble_size
      || expected(stream.data()) == verdict::not_actorps)
    return;
  const size_t limit = preamble_size + std::max(extra, 2 + max_reason_size);
  std::string buf;
  for (;;) {
    auto want = missing_bytes(buf.data(), buf.size(), extra);
    if (want == 0 || buf.size() == stream.size())
      break;
    fuzz::check(buf.size() + want <= limit,
                "missing_bytes asks past the preamble and what follows it");
    auto n = std::min({piece, want, stream.size() - buf.size()});
    buf.append(stream, buf.size(), n);
  }
  auto status = buf[preamble_status_at];
  std::string reason;
  if (missing_bytes(buf.data(), buf.size(), extra) > 0) {
    // The peer stopped sending early.
    if (status != 0)
      fuzz::check(!parse_refusal(buf.data() + preamble_size,
                                 buf.size() - preamble_size, reason),
                  "parse_refusal accepted an incomplete refusal");
    return;
  }
  if (status == 0) {
    fuzz::check(buf.size() == preamble_size + extra,
                "missing_bytes: a preamble that goes on is not followed by "
                "exactly the bytes expected");
    return;
  }
  fuzz::check(parse_refusal(buf.data() + preamble_size,
                            buf.size() - preamble_size, reason),
              "parse_refusal refused a complete refusal");
  size_t len = static_cast<unsigned char>(buf[preamble_size])
               | (size_t{static_cast<unsigned char>(buf[preamble_size + 1])}
                  << 8);
  fuzz::check(reason.size() == std::min(len, max_reason_size)
                && buf.size() == preamble_size + 2 + reason.size(),
              "a refusal's reason is not as long as its length field");
  for (unsigned char c : reason)
    fuzz::check(c >= 0x20 && c != 0x7f,
                "a refusal's reason holds a control character");
  auto again = refusal_message(buf.substr(0, preamble_size), reason);
  std::string back;
  fuzz::check(missing_bytes(again.data(), again.size(), extra) == 0
                && parse_refusal(again.data() + preamble_size,
                                 again.size() - preamble_size, back)
                && back == reason,
              "refusal_message writes a refusal that does not read back");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto first = in.u8();
  size_t piece = first % 16 + 1;
  size_t extra = (first & 0x10) != 0 ? ticket_size : 0;
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
  after_preamble(piece, extra, stream);
  return 0;
}
