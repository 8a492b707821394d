// One data channel connection (cluster/net/frame_pump.hpp) over loopback TCP,
// without TLS (the TLS channel is tested in tls_test.cpp and by the TLS jobs
// of cluster_test.sh): frames sent from several threads at once arrive
// whole and in each thread's order, also when the socket takes only part of
// a frame and the connection's thread writes the rest after the caller's
// own write, and when only small frames are the callers' to write; a large frame that trickles in is read whole (the wake-up
// threshold waits for it without hanging), and a peer that closes in the
// middle of a frame is reported closed; a frame handler may end its own
// connection or another one (actors run on the connections' threads:
// cluster/net/inline_unit.hpp). Every wait is bounded.

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "caf/actor_system.hpp"

#include "cluster/net/frame_pump.hpp"
#include "cluster/net/data_frame.hpp"
#include "cluster/job/system_config.hpp"
#include "cluster/net/tls_channel.hpp"

#include "test/cluster/frame_sink.hpp"
#include "test/loopback.hpp"

using namespace actorps;
using namespace std::chrono_literals;
using actorps::test::push_frame;
using actorps::test::received;
using actorps::test::tcp_pair;
using actorps::test::value_of;
using actorps::test::wire_bytes;

namespace {

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
  auto rx = actorps::test::receiving_conn(sys, b, got);
  // Callers write any frame themselves (a worker), only small ones (a
  // server: large ones go to the connection's thread, between them), or
  // none.
  size_t limit = GENERATE(SIZE_MAX, size_t{64} << 10, size_t{0});
  frame_pump tx{std::make_unique<channel>(a, nullptr), [](in_frame) {},
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
  auto rx = actorps::test::receiving_conn(sys, b, got);
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

TEST_CASE_METHOD(system_fixture,
                 "a frame handler may drop the last reference to its own "
                 "connection: no frame follows, and the connection closes",
                 "[data]") {
  auto [a, b] = tcp_pair();
  std::mutex mtx;
  std::condition_variable cv;
  std::shared_ptr<frame_pump> conn; // its only owner
  int frames = 0;
  bool dropped = false;
  {
    // Held until `conn` is set: the handler waits for it.
    std::lock_guard<std::mutex> guard{mtx};
    conn = std::make_shared<frame_pump>(
      std::make_unique<channel>(b, nullptr),
      [&](in_frame) {
        std::shared_ptr<frame_pump> last;
        {
          std::lock_guard<std::mutex> guard{mtx};
          ++frames;
          last = std::move(conn);
        }
        last.reset(); // ~frame_pump on the connection's own thread
        std::lock_guard<std::mutex> guard{mtx};
        dropped = true;
        cv.notify_all();
      },
      [](const std::string&) {}, "test receiver");
  }
  // Three frames at once: the handler ends the connection at the first.
  std::string bytes;
  for (uint64_t id = 1; id <= 3; ++id)
    bytes += wire_bytes(push_frame(sys, id, 16, 1.0f));
  REQUIRE(::send(a, bytes.data(), bytes.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size()));
  {
    std::unique_lock<std::mutex> guard{mtx};
    REQUIRE(cv.wait_for(guard, 10s, [&] { return dropped; }));
  }
  // The thread ends by itself and closes the socket: the peer reads the end
  // (a reset, since frames it sent were left unread), not a timeout.
  timeval limit{10, 0};
  ::setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  char c = 0;
  auto n = ::recv(a, &c, 1, 0);
  auto err = errno;
  CHECK((n == 0 || (n < 0 && err == ECONNRESET)));
  std::lock_guard<std::mutex> guard{mtx};
  CHECK(frames == 1);
  ::close(a);
}

TEST_CASE_METHOD(system_fixture,
                 "a frame handler that ends another connection does not wait "
                 "for that connection's thread",
                 "[data]") {
  // The second connection's handler waits for the first one's handler to
  // finish; the first one's handler ends the second connection. Waiting
  // for the second one's thread there would wait 10 s (its handler's
  // limit) for nothing: two handlers that end each other's connection
  // would wait for ever.
  auto [a1, b1] = tcp_pair();
  auto [a2, b2] = tcp_pair();
  std::mutex mtx;
  std::condition_variable cv;
  bool second_waits = false;
  bool first_done = false;
  bool second_done = false;
  auto second = std::make_unique<frame_pump>(
    std::make_unique<channel>(b2, nullptr),
    [&](in_frame) {
      std::unique_lock<std::mutex> guard{mtx};
      second_waits = true;
      cv.notify_all();
      cv.wait_for(guard, 10s, [&] { return first_done; });
      second_done = true;
      cv.notify_all();
    },
    [](const std::string&) {}, "test second");
  auto first = std::make_unique<frame_pump>(
    std::make_unique<channel>(b1, nullptr),
    [&](in_frame) {
      std::unique_ptr<frame_pump> other;
      {
        std::unique_lock<std::mutex> guard{mtx};
        cv.wait_for(guard, 10s, [&] { return second_waits; });
        other = std::move(second);
      }
      other.reset();
      std::lock_guard<std::mutex> guard{mtx};
      first_done = true;
      cv.notify_all();
    },
    [](const std::string&) {}, "test first");
  auto bytes = wire_bytes(push_frame(sys, 1, 16, 1.0f));
  REQUIRE(::send(a2, bytes.data(), bytes.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size()));
  REQUIRE(::send(a1, bytes.data(), bytes.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size()));
  {
    std::unique_lock<std::mutex> guard{mtx};
    CHECK(cv.wait_for(guard, 5s, [&] { return first_done && second_done; }));
    // (If not, the 10 s limits above still end both handlers.)
    cv.wait_for(guard, 15s, [&] { return first_done && second_done; });
  }
  first.reset();
  ::close(a1);
  ::close(a2);
}

TEST_CASE_METHOD(system_fixture,
                 "a connection takes frames within its limits and closes at "
                 "a header that announces more, naming the limit",
                 "[data]") {
  auto [a, b] = tcp_pair();
  received got;
  frame_limits limits;
  limits.meta = 4096;
  limits.bulk = 4000 * sizeof(float);
  auto conn = test::receiving_conn(sys, b, got, SIZE_MAX, shm_mode::none,
                                   limits);
  auto ok = wire_bytes(push_frame(sys, 1, 4000, value_of(1)));
  auto big = wire_bytes(push_frame(sys, 2, 4001, value_of(2)));
  // Only the header of the big frame: the refusal must not wait for a
  // payload the receiver would have had to allocate first.
  auto bytes = ok + big.substr(0, frame_header_size);
  REQUIRE(::send(a, bytes.data(), bytes.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size()));
  REQUIRE(got.wait_for([](received& r) { return r.is_closed; }, 10s));
  std::lock_guard<std::mutex> guard{got.mtx};
  REQUIRE(got.frames.size() == 1);
  CHECK(got.frames[0].floats == 4000);
  CHECK(got.frames[0].values_right);
  CHECK_THAT(got.closed, Catch::Contains("a push frame announces 16004 bytes "
                                         "of bulk, more than the 16000"));
  ::close(a);
}

TEST_CASE_METHOD(system_fixture,
                 "a meta larger than the first buffer grows as it arrives "
                 "and is delivered whole",
                 "[data]") {
  auto [a, b] = tcp_pair();
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<uint64_t> keys_got;
  bool done = false;
  auto conn = std::make_unique<frame_pump>(
    std::make_unique<channel>(b, nullptr),
    [&](in_frame f) {
      auto req = decode_pull(sys, f);
      std::lock_guard<std::mutex> guard{mtx};
      if (!req.tables.empty())
        keys_got = req.tables[0].keys.keys;
      done = true;
      cv.notify_all();
    },
    [&](const std::string&) {
      std::lock_guard<std::mutex> guard{mtx};
      done = true;
      cv.notify_all();
    },
    "test receiver");
  // 100,000 keys: 800 KB of meta, 13 doublings of the first 64 KiB.
  pull_request req;
  table_rows rows;
  for (uint64_t k = 0; k < 100000; ++k)
    rows.keys.keys.push_back(k * 7919);
  req.tables.push_back(rows);
  auto bytes = wire_bytes(encode(sys, 9, req));
  REQUIRE(bytes.size() > (size_t{64} << 10) * 8);
  // In pieces, as a network delivers it.
  for (size_t at = 0; at < bytes.size(); at += 50000) {
    auto n = std::min<size_t>(50000, bytes.size() - at);
    REQUIRE(::send(a, bytes.data() + at, n, MSG_NOSIGNAL)
            == static_cast<ssize_t>(n));
  }
  std::unique_lock<std::mutex> guard{mtx};
  REQUIRE(cv.wait_for(guard, 10s, [&] { return done; }));
  REQUIRE(keys_got.size() == 100000);
  CHECK(keys_got[99999] == 99999 * 7919);
  CHECK(keys_got[12345] == 12345 * 7919);
  ::close(a);
}

TEST_CASE_METHOD(system_fixture,
                 "a frame that stops arriving closes the connection after "
                 "the frame timeout, and frames that keep coming do not",
                 "[data]") {
  auto [a, b] = tcp_pair();
  received got;
  frame_limits limits;
  limits.frame_timeout = std::chrono::milliseconds(300);
  auto conn = test::receiving_conn(sys, b, got, SIZE_MAX, shm_mode::none,
                                   limits);
  // Ten frames, each sent in two halves 150 ms apart, the second half of
  // one with the first half of the next: for 1.5 s a frame is always in
  // progress, but none takes longer than the timeout.
  std::string stream;
  for (uint64_t id = 1; id <= 10; ++id)
    stream += wire_bytes(push_frame(sys, id, 1000, value_of(id)));
  auto frame = stream.size() / 10;
  for (size_t at = 0; at < stream.size(); at += frame) {
    auto from = at == 0 ? 0 : at - frame / 2;
    auto to = std::min(stream.size(), at + frame / 2);
    REQUIRE(::send(a, stream.data() + from, to - from, MSG_NOSIGNAL)
            == static_cast<ssize_t>(to - from));
    std::this_thread::sleep_for(150ms);
  }
  auto rest = stream.size() - frame / 2;
  REQUIRE(::send(a, stream.data() + rest, stream.size() - rest, MSG_NOSIGNAL)
          == static_cast<ssize_t>(stream.size() - rest));
  REQUIRE(got.wait_for([](received& r) { return r.frames.size() == 10; },
                       10s));
  // Then half a frame and nothing more.
  auto bytes = wire_bytes(push_frame(sys, 11, 1000, value_of(11)));
  REQUIRE(::send(a, bytes.data(), bytes.size() / 2, MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size() / 2));
  REQUIRE(got.wait_for([](received& r) { return r.is_closed; }, 10s));
  std::lock_guard<std::mutex> guard{got.mtx};
  CHECK(got.frames.size() == 10);
  CHECK_THAT(got.closed, Catch::Contains("a frame in progress for 0.3 s"));
  ::close(a);
}
