// Fuzz target: a data channel's frames (cluster/net/data_frame.hpp) as a server
// or a worker reads them from a peer: a 32-byte header, then its meta and
// its bulk (as many as the input holds, as the connection would read them),
// then the decoder of the header's kind.
//
// Input: the frame's bytes.
//
// Properties: parsing a header and decoding either succeed or throw
// input_error (never anything else, never a crash); a header that parses
// has a known kind, a meta within max_frame_meta and a bulk of whole
// floats within max_frame_bulk; a frame that decodes encodes again to a
// frame that decodes to the same ids and sizes; a push reply decodes only
// from a meta of exactly 8 bytes (its clock); an error decodes only whole,
// context included (it encodes to its meta again). The corpus holds a frame
// of each kind with its meta cut short by a byte and one with a byte more,
// and an error cut inside its context.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cluster/net/data_frame.hpp"
#include "core/error.hpp"
#include "fuzz/fuzz_system.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < frame_header_size)
    return 0;
  auto& sys = fuzz::fuzz_system();
  auto* bytes = reinterpret_cast<const char*>(data);
  in_frame f;
  in_frame again_in; // a decoded frame encoded again, as received
  try {
    f.header = parse_frame_header(bytes);
  } catch (const input_error&) {
    return 0;
  }
  fuzz::check(f.header.meta_bytes <= max_frame_meta,
              "a header with too much meta parsed");
  fuzz::check(f.header.bulk_bytes <= max_frame_bulk
                && f.header.bulk_bytes % sizeof(float) == 0,
              "a header with a bad bulk parsed");
  size_t at = frame_header_size;
  auto meta = std::min<size_t>(f.header.meta_bytes, size - at);
  f.meta.assign(bytes + at, bytes + at + meta);
  at += meta;
  auto floats = std::min<size_t>(f.header.bulk_bytes, size - at)
                / sizeof(float);
  f.bulk.resize(floats);
  if (floats > 0)
    std::memcpy(f.bulk.data(), bytes + at, floats * sizeof(float));
  try {
    switch (f.header.kind) {
      case frame_kind::pull: {
        auto req = decode_pull(sys, f);
        again_in = as_received(encode(sys, 1, req));
        auto again = decode_pull(sys, again_in);
        fuzz::check(again.group == req.group && again.view == req.view
                      && again.tables.size() == req.tables.size(),
                    "a pull does not survive encode and decode");
        break;
      }
      case frame_kind::push: {
        auto req = decode_push(sys, f);
        auto n = req.gradient.values.size();
        again_in = as_received(encode(sys, 2, req));
        auto again = decode_push(sys, again_in);
        fuzz::check(again.id.closure == req.id.closure
                      && again.gradient.values.size() == n
                      && again.parts.size() == req.parts.size(),
                    "a push does not survive encode and decode");
        break;
      }
      case frame_kind::pull_reply: {
        auto r = decode_pull_reply(sys, f);
        auto n = r.values.values.size();
        again_in = as_received(encode(sys, 3, r));
        auto again = decode_pull_reply(sys, again_in);
        fuzz::check(again.clock == r.clock && again.values.values.size() == n,
                    "a pull reply does not survive encode and decode");
        break;
      }
      case frame_kind::push_reply: {
        auto clock = decode_clock(f);
        fuzz::check(f.meta.size() == 8,
                    "a push reply whose meta is not 8 bytes decoded");
        fuzz::check(decode_clock(as_received(encode_clock(4, clock)))
                      == clock,
                    "a push reply does not survive encode and decode");
        break;
      }
      case frame_kind::error: {
        auto err = decode_error(sys, f);
        fuzz::check(encode_error(sys, 5, err).meta == f.meta,
                    "an error frame decoded to an error that does not "
                    "encode to its meta (a context lost)");
        break;
      }
    }
  } catch (const input_error&) {
    return 0;
  }
  return 0;
}
