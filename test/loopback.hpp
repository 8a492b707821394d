#pragma once

// Loopback sockets for tests of what runs over them
// (cluster/net/frame_pump.hpp, cluster/net/shm_segment.hpp,
// cluster/net/data_link.hpp): a connected TCP pair, a frame's bytes as they
// go on the wire, reading an exact number of bytes.

#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/net/data_frame.hpp"

namespace actorps::test {

/// The dialing end first, then the accepted one.
inline std::pair<int, int> tcp_pair() {
  int lst = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(lst >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  REQUIRE(::bind(lst, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  REQUIRE(::listen(lst, 1) == 0);
  REQUIRE(::getsockname(lst, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  int a = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(a, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  int b = ::accept(lst, nullptr, nullptr);
  REQUIRE(b >= 0);
  ::close(lst);
  return {a, b};
}

/// The bytes of `f` as they go on the wire: header, meta, bulk.
inline std::string wire_bytes(const out_frame& f) {
  std::string s(f.header.data(), f.header.size());
  s.append(f.meta.data(), f.meta.size());
  s.append(f.bulk, f.bulk_bytes);
  return s;
}

/// Reads exactly `n` bytes from `fd`, each wait at most 5 s (REQUIRE
/// fails on a timeout or the end of the connection).
inline std::string recv_exact(int fd, size_t n) {
  std::string s(n, '\0');
  size_t got = 0;
  while (got < n) {
    pollfd p{fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
    auto r = ::recv(fd, s.data() + got, n - got, 0);
    REQUIRE(r > 0);
    got += static_cast<size_t>(r);
  }
  return s;
}

} // namespace actorps::test
