#include "cluster/net/basp_guard.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/binary_serializer.hpp"
#include "caf/io/basp/header.hpp"

using namespace actorps;
using caf::io::basp::message_type;

namespace {

/// A BASP header as CAF 0.17 writes it (its own serializer, so the test
/// checks the guard's reading of the format, not a copy of it).
std::vector<char> header_bytes(message_type op, uint32_t payload) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  caf::io::basp::header hdr{op, 0, payload, 7, 1, 2};
  auto err = sink(hdr);
  REQUIRE(!err);
  REQUIRE(buf.size() == basp_header_bytes);
  return buf;
}

} // namespace

TEST_CASE("a BASP guard passes messages within the limits, split anyhow, "
          "and follows the framing across their payloads",
          "[cluster][basp]") {
  basp_guard guard{basp_limits{1000, 5000}};
  std::vector<char> stream;
  auto add = [&](message_type op, uint32_t len) {
    auto h = header_bytes(op, len);
    stream.insert(stream.end(), h.begin(), h.end());
    // A payload of bytes that look like an oversized header: the guard
    // must not read them as one.
    stream.insert(stream.end(), len, static_cast<char>(0xff));
  };
  add(message_type::client_handshake, 1000);
  add(message_type::direct_message, 5000);
  add(message_type::heartbeat, 0);
  add(message_type::direct_message, 17);
  // One byte at a time, then in uneven chunks.
  for (auto chunk : {size_t{1}, size_t{7}, size_t{33}, stream.size()}) {
    basp_guard g{basp_limits{1000, 5000}};
    for (size_t at = 0; at < stream.size(); at += chunk) {
      auto n = std::min(chunk, stream.size() - at);
      INFO("chunk " << chunk << " at " << at);
      REQUIRE(g.feed(stream.data() + at, n).empty());
    }
  }
  CHECK(guard.feed(stream.data(), stream.size()).empty());
}

TEST_CASE("a BASP guard stops at the first header that announces more than "
          "the peer may send, before its payload",
          "[cluster][basp]") {
  SECTION("a handshake of 1 GiB") {
    basp_guard g;
    auto h = header_bytes(message_type::client_handshake, 1u << 30);
    auto why = g.feed(h.data(), h.size());
    CHECK_THAT(why, Catch::Contains("client_handshake announcing 1073741824 "
                                    "bytes, more than the 1048576"));
    // It stays refused.
    CHECK(g.feed(h.data(), 1) == why);
  }
  SECTION("a message over the message limit, after a good one") {
    basp_guard g{basp_limits{1 << 20, 4096}};
    auto ok = header_bytes(message_type::direct_message, 4096);
    CHECK(g.feed(ok.data(), ok.size()).empty());
    std::vector<char> payload(4096, 0);
    CHECK(g.feed(payload.data(), payload.size()).empty());
    auto big = header_bytes(message_type::direct_message, 4097);
    // The refusal comes with the header's last byte, not before.
    CHECK(g.feed(big.data(), big.size() - 1).empty());
    CHECK_THAT(g.feed(big.data() + big.size() - 1, 1),
               Catch::Contains("direct_message announcing 4097 bytes"));
  }
  SECTION("a routed message, which names its own sender") {
    basp_limits refuse{};
    refuse.routed = false;
    basp_guard g{refuse};
    auto ok = header_bytes(message_type::heartbeat, 0);
    CHECK(g.feed(ok.data(), ok.size()).empty());
    auto routed = header_bytes(message_type::routed_message, 64);
    CHECK_THAT(g.feed(routed.data(), routed.size()),
               Catch::Contains("routed_message, which names its own sender"));
    basp_guard allowed; // CAF's default: routed messages pass
    CHECK(allowed.feed(routed.data(), routed.size()).empty());
  }
  SECTION("an operation BASP does not have") {
    basp_guard g;
    auto h = header_bytes(message_type::heartbeat, 0);
    h[0] = 9;
    CHECK_THAT(g.feed(h.data(), h.size()),
               Catch::Contains("operation 9, which BASP does not have"));
  }
}
