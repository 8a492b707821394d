#pragma once

// A bound on what a peer may announce in CAF's BASP stream, checked before
// CAF sees it.
//
// CAF 0.17's BASP reads a 32-byte header, then resizes its read buffer to
// the payload length the header announces (up to 4 GiB) before a byte of
// payload has arrived: one header from an admitted peer made a ps allocate
// 1 GiB and stop answering. A node's connections therefore read through a
// basp_guard (cluster/net/tls_channel.cpp), which follows the same framing over
// the bytes as they arrive and ends the connection at the first header that
// announces more than the limits allow, or an operation BASP does not have.
//
// The header (caf/io/basp/header.hpp, serialized in network byte order):
// byte 0 the operation (0 server_handshake, 1 client_handshake, 2
// direct_message, 3 routed_message, 4 monitor_message, 5 down_message, 6
// heartbeat), bytes 1-2 padding, byte 3 flags, bytes 4-7 the payload
// length, then operation data, source and destination actor (8 bytes each).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace actorps {

/// Bytes of a BASP header.
inline constexpr size_t basp_header_bytes = 32;

/// What a peer may announce.
struct basp_limits {
  /// The payload of a handshake (server_handshake, client_handshake): a
  /// node id, application ids and the published actor's interface, a few KB.
  uint32_t handshake_bytes = 1 << 20;
  /// The payload of any other message (UINT32_MAX: CAF's own limit).
  uint32_t message_bytes = UINT32_MAX;
  /// Whether routed_message headers may come. CAF 0.17 routes a message
  /// through a node when it has no connection of its own to the
  /// destination yet (a ps sends to its backup through the coordinator
  /// until it has dialed it), and a routed message names its sending node
  /// itself: the receiver cannot check it against the connection's
  /// certificate. Workers talk to the nodes they dial directly, so a
  /// worker's connection never needs them (basp_limits_for).
  bool routed = true;
};

/// Follows one direction of a BASP stream (see above).
class basp_guard {
public:
  explicit basp_guard(basp_limits limits = {}) : limits_(limits) {
  }

  /// Takes the next `n` bytes of the stream, in order. Returns an empty
  /// string, or why the stream must end (e.g. "a client_handshake
  /// announcing 1073741824 bytes, more than 1048576", or "a BASP
  /// routed_message, which names its own sender ..."); once it said so, it
  /// says so again for every later call.
  std::string feed(const char* bytes, size_t n);

  const basp_limits& limits() const {
    return limits_;
  }

private:
  basp_limits limits_;
  std::array<unsigned char, basp_header_bytes> header_{};
  size_t have_ = 0;           ///< header bytes collected
  uint64_t payload_left_ = 0; ///< payload bytes still to pass
  std::string failed_;
};

} // namespace actorps
