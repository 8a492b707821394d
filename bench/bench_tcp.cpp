#include "bench/bench_tcp.hpp"

#include <cstring>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

namespace actorps::bench {

namespace {

/// Reads exactly n bytes; false on EOF or error.
bool read_all(int fd, char* buf, size_t n) {
  while (n > 0) {
    auto k = ::read(fd, buf, n);
    if (k <= 0)
      return false;
    buf += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool write_all(int fd, const char* buf, size_t n) {
  while (n > 0) {
    auto k = ::send(fd, buf, n, MSG_NOSIGNAL);
    if (k <= 0)
      return false;
    buf += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// A peer may not make the sink allocate more than this per request.
constexpr uint64_t max_request = uint64_t{1} << 31;

void serve_connection(int fd) {
  std::vector<char> in;
  std::vector<char> out;
  uint64_t header[2] = {0, 0};
  while (read_all(fd, reinterpret_cast<char*>(header), sizeof(header))) {
    if (header[0] > max_request || header[1] > max_request)
      break;
    in.resize(header[0]);
    out.resize(header[1]);
    if (!read_all(fd, in.data(), in.size())
        || !write_all(fd, out.data(), out.size()))
      break;
  }
  close(fd);
}

} // namespace

int listen_loopback(uint16_t& port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0
      || listen(fd, 16) != 0) {
    close(fd);
    return -1;
  }
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  port = ntohs(sa.sin_port);
  return fd;
}

void tcp_sink(int listen_fd) {
  for (;;) {
    int fd = accept(listen_fd, nullptr, nullptr);
    if (fd < 0)
      return;
    set_nodelay(fd);
    std::thread(serve_connection, fd).detach();
  }
}

void bm_tcp(benchmark::State& st, uint16_t port, point p) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    st.SkipWithError("cannot connect to the TCP sink");
    return;
  }
  set_nodelay(fd);
  uint64_t header[2] = {p.bytes_out, p.bytes_back};
  std::vector<char> request(sizeof(header) + p.bytes_out, 1);
  std::memcpy(request.data(), header, sizeof(header));
  std::vector<char> answer(p.bytes_back);
  for (auto _ : st) {
    auto t0 = steady_clock::now();
    if (!write_all(fd, request.data(), request.size())
        || !read_all(fd, answer.data(), answer.size())) {
      st.SkipWithError("TCP sink closed");
      break;
    }
    auto dt = seconds_since(t0);
    st.SetIterationTime(dt);
    p.latencies.push_back(dt);
  }
  close(fd);
  if (!p.latencies.empty())
    record(st, std::move(p));
}

} // namespace actorps::bench
