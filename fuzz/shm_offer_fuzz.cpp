// Fuzz target: what a peer sends while the two ends of a data channel
// settle on shared memory or TCP (cluster/net/shm_offer.hpp): the offer a
// worker sends a ps, or the answer a ps sends a worker, as any bytes.
//
// Input: one byte (bit 0: the bytes are an answer to this end's offer of a
// real segment, else an offer to this end), then the bytes the peer sends,
// after which it closes its side.
//
// Properties: reading an offer never returns a segment (no input names
// one: the memfd's name carries 128 random bits this process made after
// the input was written) and either answers exactly "SHMA" and 0 or throws
// input_error (not an offer: magic or flags) or runtime_failure (the peer
// closed before 40 bytes); reading an answer returns the segment only for
// exactly "SHMA" and 1, null for "SHMA" and 0, and otherwise throws
// input_error (a malformed answer) or runtime_failure (fewer than 8 bytes).
// Nothing else is thrown, nothing hangs (the peer's side is closed, and a
// deadline of 2 s bounds every wait).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <sys/socket.h>
#include <unistd.h>

#include "cluster/net/shm_segment.hpp"
#include "cluster/net/shm_offer.hpp"
#include "cluster/net/tls_channel.hpp"
#include "core/error.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  bool answer = (in.u8() & 1) != 0;
  auto bytes = in.rest();
  if (bytes.size() > 4096)
    return 0; // more than a socket pair's buffer takes without a reader
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return 0;
  int peer = fds[1];
  auto sent = ::send(peer, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  fuzz::check(sent == static_cast<ssize_t>(bytes.size()),
              "the socket pair took fewer bytes than sent");
  shutdown(peer, SHUT_WR);
  channel ch{fds[0], nullptr};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::string why;
  std::unique_ptr<shm_segment> segment;
  bool threw_input = false;
  bool threw_runtime = false;
  try {
    if (answer)
      segment = offer_shm(ch, shm_segment::ring_bytes_for(1), deadline, why);
    else
      segment = answer_shm(ch, true, deadline, why);
  } catch (const input_error&) {
    threw_input = true;
  } catch (const runtime_failure&) {
    threw_runtime = true;
  } catch (const std::exception& e) {
    fuzz::fail(std::string{"an exception other than input_error or "
                           "runtime_failure: "}
               + e.what());
  }
  if (answer) {
    uint32_t yes = 2;
    if (bytes.size() >= 8 && std::memcmp(bytes.data(), "SHMA", 4) == 0)
      std::memcpy(&yes, bytes.data() + 4, 4);
    if (bytes.size() < shm_answer_size)
      fuzz::check(threw_runtime, "a short answer was not a closed peer");
    else if (yes == 1)
      fuzz::check(segment != nullptr, "\"SHMA\" 1 did not take the segment");
    else if (yes == 0)
      fuzz::check(segment == nullptr && !threw_input && !threw_runtime,
                  "\"SHMA\" 0 was not a plain no");
    else
      fuzz::check(threw_input, "a malformed answer was taken");
  } else {
    fuzz::check(segment == nullptr, "an offer from the fuzzer was taken");
    uint32_t flags = 0;
    if (bytes.size() >= 8)
      std::memcpy(&flags, bytes.data() + 4, 4);
    if (bytes.size() < shm_offer_size) {
      fuzz::check(threw_runtime, "a short offer was not a closed peer");
    } else if (std::memcmp(bytes.data(), "SHMO", 4) != 0 || flags > 1) {
      fuzz::check(threw_input, "a malformed offer was answered");
    } else {
      fuzz::check(!threw_input && !threw_runtime,
                  "a well-formed offer was not answered");
      // Answered: exactly "SHMA" and 0, nothing more.
      char got[16] = {};
      auto n = ::recv(peer, got, sizeof(got), MSG_DONTWAIT);
      fuzz::check(n == static_cast<ssize_t>(shm_answer_size)
                    && std::memcmp(got, "SHMA", 4) == 0 && got[4] == 0
                    && got[5] == 0 && got[6] == 0 && got[7] == 0,
                  "the answer to an offer is not \"SHMA\" and 0");
    }
  }
  ::close(peer);
  return 0;
}
