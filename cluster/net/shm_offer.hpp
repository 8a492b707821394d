#pragma once

// How the two ends of a data channel settle on shared memory
// (cluster/net/shm_segment.hpp) before their first frame, on the connection's
// thread, inside TLS where the channel has it.
//
// The dialing end (a worker) sends an offer of 40 bytes: "SHMO", a
// little-endian uint32 (1: offered, 0: this end wants TCP), its pid
// (uint32), the memfd's descriptor (int32), the bytes per ring (uint64)
// and the segment's 16-byte nonce. The accepting end (a parameter server)
// answers with 8 bytes: "SHMA" and a uint32, 1 if it opened the segment
// (the two ends share a host and a pid namespace), else 0. After a 1 both
// ends leave the TCP connection's bytes to doorbells (single bytes that
// mean "look at the rings"): with TLS, the session ends there, the peer
// having been authenticated; frames never touch the socket again. After
// a 0 the frames go over the connection as before.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace actorps {

class channel;
class shm_segment;

/// What ends a wait for the peer early: the connection's wake-up eventfd
/// (drained when readable) and its stop flag (set by close()).
struct shm_cancel {
  int wake_fd = -1;
  const std::atomic<bool>* stop = nullptr;
};

/// Bytes of an offer and of an answer.
inline constexpr size_t shm_offer_size = 40;
inline constexpr size_t shm_answer_size = 8;

/// The dialing end: offers a fresh segment of two rings of `ring_bytes`
/// each (0, or a segment that cannot be made, says TCP) and reads the
/// answer. Returns the segment when the peer accepted, else null (`why` says
/// why, for log lines).
/// @throws runtime_failure if the channel fails, `deadline` passes or
///         `cancel` says stop; input_error if the answer is malformed.
std::unique_ptr<shm_segment> offer_shm(channel& ch, size_t ring_bytes,
                                       std::chrono::steady_clock::time_point
                                      deadline,
                                    std::string& why, shm_cancel cancel = {});

/// The accepting end: reads the offer, opens the segment if there is one
/// and `accept`, answers. Returns the segment, or null (`why` says why).
/// @throws runtime_failure if the channel fails, `deadline` passes or
///         `cancel` says stop; input_error if the offer is malformed.
std::unique_ptr<shm_segment> answer_shm(channel& ch, bool accept,
                                        std::chrono::steady_clock::time_point
                                       deadline,
                                     std::string& why,
                                     shm_cancel cancel = {});

} // namespace actorps
