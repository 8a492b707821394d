#include "cluster/net/basp_guard.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace actorps {

namespace {

constexpr const char* operation_names[] = {
  "server_handshake", "client_handshake", "direct_message", "routed_message",
  "monitor_message",  "down_message",     "heartbeat",
};

constexpr unsigned char last_operation = 6;

} // namespace

std::string basp_guard::feed(const char* bytes, size_t n) {
  while (n > 0 && failed_.empty()) {
    if (payload_left_ > 0) {
      auto k = static_cast<size_t>(std::min<uint64_t>(payload_left_, n));
      payload_left_ -= k;
      bytes += k;
      n -= k;
      continue;
    }
    auto k = std::min(n, basp_header_bytes - have_);
    std::copy(bytes, bytes + k, header_.begin() + have_);
    have_ += k;
    bytes += k;
    n -= k;
    if (have_ < basp_header_bytes)
      break;
    have_ = 0;
    auto op = header_[0];
    uint32_t len = (uint32_t{header_[4]} << 24) | (uint32_t{header_[5]} << 16)
                   | (uint32_t{header_[6]} << 8) | uint32_t{header_[7]};
    if (op > last_operation) {
      failed_ = fmt::format("a BASP header with operation {}, which BASP "
                            "does not have",
                            static_cast<int>(op));
      break;
    }
    if (op == 3 && !limits_.routed) {
      failed_ = "a BASP routed_message, which names its own sender (this "
                "peer talks directly to the nodes it dials)";
      break;
    }
    auto limit = op <= 1 ? limits_.handshake_bytes : limits_.message_bytes;
    if (len > limit) {
      failed_ = fmt::format("a BASP {} announcing {} bytes, more than the {} "
                            "this peer may send",
                            operation_names[op], len, limit);
      break;
    }
    payload_left_ = len;
  }
  return failed_;
}

} // namespace actorps
