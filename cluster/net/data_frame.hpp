#pragma once

// Frames of the data channel (cluster/net/data_link.hpp): a worker's pulls and
// pushes to a parameter server in another process, and the server's
// answers, without CAF's BASP. What BASP copies twice (it serialises a whole
// message into a buffer before the first byte leaves, and deserialises it
// after the last arrives), a frame sends from where it lies and reads into
// where it stays: the dense floats of a push or a pull reply are the frame's
// "bulk", written from the message's own vector and read into the vector
// the receiving message keeps. Everything else of the message (ids, view,
// tables, encoded parts) is the frame's "meta": the message serialised by
// CAF's binary serializer with its dense floats left out.
//
// A frame on the wire (integers little-endian, floats in the host's order
// as on BASP: all nodes of a cluster share endianness):
//
//   magic "APSF" (4) | kind (1) | 3 bytes of 0 | id (8) | meta bytes (4)
//   | 4 bytes of 0 | bulk bytes (8) | meta | bulk
//
// `id` pairs an answer with its request (the requester picks it). A frame
// whose header is malformed (magic, kind, sizes beyond the limits below, a
// bulk that is no whole number of floats) or whose meta does not decode is
// refused with input_error naming the problem: the channel is then closed.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <chrono>
#include <vector>

#include "caf/fwd.hpp"

#include "actors/messages.hpp"

namespace actorps {

enum class frame_kind : uint8_t {
  pull = 1,       ///< worker -> ps: pull_request
  push = 2,       ///< worker -> ps: push_request (bulk: the dense gradient)
  pull_reply = 3, ///< ps -> worker: pull_reply (bulk: the dense values)
  push_reply = 4, ///< ps -> worker: the server's clock (meta: 8 bytes)
  error = 5,      ///< ps -> worker: the request failed (meta: caf::error)
};

/// Bytes of a frame header.
inline constexpr size_t frame_header_size = 32;
/// Largest meta a peer may send (64 MiB) and largest bulk (1 GiB, as
/// float_buffer).
inline constexpr uint64_t max_frame_meta = uint64_t{1} << 26;
inline constexpr uint64_t max_frame_bulk = uint64_t{1} << 30;

/// The largest meta and bulk one connection takes (at most the limits
/// above): a server's are its job's (serve_data_channel). A frame whose
/// header announces more closes the connection before anything is
/// allocated for it; the meta buffer then grows as its bytes arrive.
struct frame_limits {
  uint64_t meta = max_frame_meta;
  uint64_t bulk = max_frame_bulk;
  /// How long a frame may take from its first byte to its last over TCP
  /// (a peer that starts a frame and stops holds its buffer and thread
  /// until then); through shared memory the peer is a process of the same
  /// user on the same host, and no timeout applies.
  std::chrono::milliseconds frame_timeout{30000};
};

struct frame_header {
  frame_kind kind = frame_kind::pull;
  uint64_t id = 0;
  uint32_t meta_bytes = 0;
  uint64_t bulk_bytes = 0;
};

/// Reads a header from `frame_header_size` bytes.
/// @throws input_error naming what is wrong (magic, kind, a size).
frame_header parse_frame_header(const char* bytes);

/// @throws input_error if `h` announces more meta or bulk than `limits`
///         ("a push frame announces 2000000 bytes of bulk, more than the
///         1048576 this connection takes").
void check_limits(const frame_header& h, const frame_limits& limits);

/// A frame to send: header and meta as bytes; the bulk as a pointer into
/// the message that `keep` holds alive until the frame is written.
struct out_frame {
  std::array<char, frame_header_size> header{};
  std::vector<char> meta;
  const char* bulk = nullptr;
  size_t bulk_bytes = 0;
  std::shared_ptr<const void> keep;

  /// Bytes of the whole frame.
  size_t size() const {
    return frame_header_size + meta.size() + bulk_bytes;
  }
};

/// A frame received: its header, meta and bulk (dense floats; empty if the
/// frame has none), read straight into the vector decode_* moves on.
struct in_frame {
  frame_header header;
  std::vector<char> meta;
  float_vector bulk;
};

/// `f` as its receiver gets it: the header parsed, meta and bulk copied
/// (for tests and fuzzing; a connection reads them off its socket).
/// @throws input_error as parse_frame_header.
in_frame as_received(const out_frame& f);

// -- encoding (`sys` resolves type names in caf::error contexts) -------------

out_frame encode(caf::actor_system& sys, uint64_t id, pull_request req);
out_frame encode(caf::actor_system& sys, uint64_t id, push_request req);
out_frame encode(caf::actor_system& sys, uint64_t id, pull_reply reply);
out_frame encode_clock(uint64_t id, uint64_t clock);
out_frame encode_error(caf::actor_system& sys, uint64_t id,
                       const caf::error& err);

// -- decoding: @throws input_error naming the frame and what is wrong -------

pull_request decode_pull(caf::actor_system& sys, in_frame& f);
push_request decode_push(caf::actor_system& sys, in_frame& f);
pull_reply decode_pull_reply(caf::actor_system& sys, in_frame& f);
uint64_t decode_clock(const in_frame& f);
caf::error decode_error(caf::actor_system& sys, const in_frame& f);

} // namespace actorps
