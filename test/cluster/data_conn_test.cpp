// One data channel connection (cluster/data_conn.hpp) over loopback TCP,
// without TLS (the TLS channel is tested in tls_test.cpp and by the TLS jobs
// of cluster_test.sh): frames sent from several threads at once arrive
// whole and in each thread's order, also when the socket takes only part of
// a frame and the connection's thread writes the rest after the caller's
// own write, and when only small frames are the callers' to write; a large frame that trickles in is read whole (the wake-up
// threshold waits for it without hanging), and a peer that closes in the
// middle of a frame is reported closed. Every wait is bounded.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "caf/actor_system.hpp"

#include "cluster/data_conn.hpp"
#include "cluster/data_frame.hpp"
#include "cluster/system_config.hpp"
#include "cluster/tls_channel.hpp"

using namespace actorps;
using namespace std::chrono_literals;

namespace {

/// Two ends of a TCP connection over 127.0.0.1.
std::pair<int, int> tcp_pair() {
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

/// A push frame of `n` floats, each `value`.
out_frame push_frame(caf::actor_system& sys, uint64_t id, size_t n,
                     float value) {
  push_request req;
  req.gradient.values.assign(n, value);
  return encode(sys, id, std::move(req));
}

/// The bytes of `f` as they go on the wire.
std::string wire_bytes(const out_frame& f) {
  std::string s(f.header.data(), f.header.size());
  s.append(f.meta.data(), f.meta.size());
  s.append(f.bulk, f.bulk_bytes);
  return s;
}

/// What a receiving connection got: each frame's id, its number of floats
/// and whether all of them had the value its id implies; and why it closed.
struct received {
  struct frame {
    uint64_t id;
    size_t floats;
    bool values_right;
  };
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<frame> frames;
  std::string closed;
  bool is_closed = false;

  template <class Pred>
  bool wait_for(Pred pred, std::chrono::seconds limit = 30s) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, limit, [&] { return pred(*this); });
  }
};

/// The value of every float of frame `id` (sender thread and number).
float value_of(uint64_t id) {
  return static_cast<float>((id >> 32) * 1000 + (id & 0xffffffff));
}

std::unique_ptr<data_conn> receiver(caf::actor_system& sys, int fd,
                                    received& got) {
  return std::make_unique<data_conn>(
    std::make_unique<channel>(fd, nullptr),
    [&sys, &got](in_frame f) {
      auto id = f.header.id;
      auto req = decode_push(sys, f);
      auto& v = req.gradient.values;
      bool right = true;
      for (auto x : v)
        right = right && x == value_of(id);
      std::lock_guard<std::mutex> guard{got.mtx};
      got.frames.push_back({id, v.size(), right});
      got.cv.notify_all();
    },
    [&got](const std::string& why) {
      std::lock_guard<std::mutex> guard{got.mtx};
      got.closed = why;
      got.is_closed = true;
      got.cv.notify_all();
    },
    "test receiver");
}

struct system_fixture {
  system_config cfg{1};
  caf::actor_system sys{cfg};
};

} // namespace

TEST_CASE_METHOD(system_fixture,
                 "frames sent from several threads arrive whole and in each "
                 "thread's order, when the socket takes only part of one too",
                 "[data]") {
  auto [a, b] = tcp_pair();
  // A small send buffer: a large frame never fits at once, so the caller's
  // write stops part of the way and the connection's thread goes on.
  int small = 64 << 10;
  REQUIRE(::setsockopt(a, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
  received got;
  auto rx = receiver(sys, b, got);
  // Callers write any frame themselves (a worker), only small ones (a
  // server: large ones go to the connection's thread, between them), or
  // none.
  size_t limit = GENERATE(SIZE_MAX, size_t{64} << 10, size_t{0});
  data_conn tx{std::make_unique<channel>(a, nullptr), [](in_frame) {},
               [](const std::string&) {}, "test sender", limit};
  constexpr uint64_t threads = 3;
  constexpr uint64_t per_thread = 24;
  auto floats = [](uint64_t i) -> size_t {
    return i % 3 == 0 ? 300000 : 5 + i; // 1.2 MB, or a few floats
  };
  std::vector<std::thread> senders;
  for (uint64_t t = 0; t < threads; ++t)
    senders.emplace_back([&, t] {
      for (uint64_t i = 0; i < per_thread; ++i) {
        auto id = (t << 32) | i;
        tx.send(push_frame(sys, id, floats(i), value_of(id)));
      }
    });
  for (auto& s : senders)
    s.join();
  REQUIRE(got.wait_for(
    [&](received& r) { return r.frames.size() == threads * per_thread; }));
  std::vector<uint64_t> next(threads, 0);
  for (auto& f : got.frames) {
    auto t = f.id >> 32;
    auto i = f.id & 0xffffffff;
    REQUIRE(t < threads);
    CHECK(i == next[t]); // in the order its thread sent them
    next[t] = i + 1;
    CHECK(f.floats == floats(i));
    CHECK(f.values_right);
  }
  CHECK_FALSE(got.is_closed);
}

TEST_CASE_METHOD(system_fixture,
                 "a large frame that trickles in is read whole, and a peer "
                 "closing in the middle of a frame is reported",
                 "[data]") {
  auto [a, b] = tcp_pair();
  received got;
  auto rx = receiver(sys, b, got);
  uint64_t id = 7;
  auto bytes = wire_bytes(push_frame(sys, id, 256 << 10, value_of(id)));
  // 1 MB in 16 pieces, 5 ms apart: the receiver waits for the rest of the
  // frame (its wake-up threshold) but must wake when it is all there.
  size_t piece = bytes.size() / 16 + 1;
  for (size_t off = 0; off < bytes.size(); off += piece) {
    auto n = std::min(piece, bytes.size() - off);
    REQUIRE(::send(a, bytes.data() + off, n, MSG_NOSIGNAL)
            == static_cast<ssize_t>(n));
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE(got.wait_for([](received& r) { return r.frames.size() == 1; }));
  CHECK(got.frames[0].id == id);
  CHECK(got.frames[0].floats == size_t{256} << 10);
  CHECK(got.frames[0].values_right);
  // Half of a second frame, then the peer goes: no frame, a close.
  REQUIRE(::send(a, bytes.data(), bytes.size() / 2, MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size() / 2));
  std::this_thread::sleep_for(20ms);
  ::close(a);
  REQUIRE(got.wait_for([](received& r) { return r.is_closed; }, 10s));
  CHECK(got.closed == "the peer closed the connection");
  CHECK(got.frames.size() == 1);
}
