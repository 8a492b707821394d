// Shared memory between the ends of a data channel
// (cluster/net/shm_segment.hpp, cluster/net/shm_offer.hpp,
// cluster/net/frame_pump.hpp): the rings carry bytes in order across their
// wrap, say when they are full or empty, wake a sleeping end exactly when
// needed, and refuse a segment that is not the one offered or counters that do
// not add up; two connections settle on shared memory (or on TCP when an end
// says so) and carry frames from several threads whole and in order, larger
// than a ring too; a malformed offer and a peer that goes are reported. Every
// wait is bounded.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caf/actor_system.hpp"

#include "cluster/net/frame_pump.hpp"
#include "cluster/net/data_frame.hpp"
#include "cluster/net/shm_segment.hpp"
#include "cluster/net/shm_offer.hpp"
#include "cluster/job/system_config.hpp"
#include "cluster/net/tls_channel.hpp"
#include "core/error.hpp"

#include "test/cluster/frame_sink.hpp"
#include "test/loopback.hpp"

using namespace actorps;
using namespace std::chrono_literals;
using actorps::test::received;
using actorps::test::recv_exact;
using actorps::test::value_of;
using actorps::test::tcp_pair;
using actorps::test::wire_bytes;

namespace {

std::string pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return s;
}

/// A connection of `mode` whose frames and end go into `got`.
std::unique_ptr<frame_pump> conn(caf::actor_system& sys, int fd,
                                received& got, shm_mode mode,
                                size_t limit = SIZE_MAX) {
  return actorps::test::receiving_conn(sys, fd, got, limit, mode);
}

/// A push frame of `n` floats, each value_of(id).
out_frame push_frame(caf::actor_system& sys, uint64_t id, size_t n) {
  return actorps::test::push_frame(sys, id, n, value_of(id));
}

struct system_fixture {
  system_config cfg{1};
  caf::actor_system sys{cfg};
};

} // namespace

TEST_CASE("a ring carries bytes in order across its wrap and says when it "
          "is full or empty",
          "[data][shm]") {
  auto a = shm_segment::create(4096);
  auto b = shm_segment::open(static_cast<uint32_t>(getpid()), a->fd(), 4096,
                             a->nonce());
  std::string out;
  std::string in;
  char buf[1500];
  // 1000-byte writes, 700-byte reads: the positions wrap many times.
  for (int i = 0; i < 40; ++i) {
    auto chunk = pattern(1000, i);
    size_t off = 0;
    while (off < chunk.size()) {
      auto k = a->write_some(chunk.data() + off, chunk.size() - off);
      if (k == 0) { // full: the reader makes room
        auto r = b->read_some(buf, 700);
        REQUIRE(r > 0);
        in.append(buf, r);
        continue;
      }
      off += k;
    }
    out += chunk;
  }
  for (size_t r; (r = b->read_some(buf, sizeof(buf))) > 0;)
    in.append(buf, r);
  CHECK(in == out);
  // Full: 4096 bytes and not one more.
  auto big = pattern(5000, 7);
  CHECK(a->write_some(big.data(), big.size()) == 4096);
  CHECK(a->write_some(big.data(), 1) == 0);
  // The other direction is a ring of its own.
  CHECK(b->write_some("xyz", 3) == 3);
  CHECK(a->read_some(buf, sizeof(buf)) == 3);
  CHECK(std::string(buf, 3) == "xyz");
}

TEST_CASE("an end about to sleep is woken exactly when the other end wrote "
          "or made room",
          "[data][shm]") {
  auto a = shm_segment::create(4096);
  auto b = shm_segment::open(static_cast<uint32_t>(getpid()), a->fd(), 4096,
                             a->nonce());
  char buf[4096];
  CHECK_FALSE(a->reader_needs_wake()); // nobody sleeps
  CHECK(b->reader_may_sleep());        // empty: b may sleep
  REQUIRE(a->write_some("hello", 5) == 5);
  CHECK(a->reader_needs_wake());       // b sleeps: ring the doorbell
  CHECK_FALSE(a->reader_needs_wake()); // once
  CHECK_FALSE(b->reader_may_sleep());  // bytes there: do not sleep
  CHECK(b->read_some(buf, sizeof(buf)) == 5);
  // The writer waits for room.
  auto big = pattern(4096, 3);
  REQUIRE(a->write_some(big.data(), big.size()) == 4096);
  CHECK(a->writer_may_sleep());
  CHECK(b->read_some(buf, 10) == 10);
  CHECK(b->writer_needs_wake());
  CHECK_FALSE(b->writer_needs_wake());
  CHECK_FALSE(a->writer_may_sleep()); // room now
  a->woke();
  b->woke();
}

TEST_CASE("a segment offered by a process of another user is declined "
          "naming its uid, before its file is touched",
          "[data][shm]") {
  if (geteuid() != 0) {
    WARN("not root: cannot start a process of another user; not checked");
    return;
  }
  // A child that becomes nobody (65534) and waits to be killed (at most
  // 30 s); only async-signal-safe calls after fork.
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  auto child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(ready[0]);
    alarm(30);
    char c = 0;
    if (setresgid(65534, 65534, 65534) != 0
        || setresuid(65534, 65534, 65534) != 0)
      _exit(3);
    [[maybe_unused]] auto w = write(ready[1], &c, 1);
    for (;;)
      pause();
  }
  close(ready[1]);
  char c = 1;
  CHECK(read(ready[0], &c, 1) == 1); // it runs as nobody now
  close(ready[0]);
  auto mine = shm_segment::create(8192); // the nonce of a real segment
  CHECK_THROWS_WITH(shm_segment::open(static_cast<uint32_t>(child), 3, 8192,
                                      mine->nonce()),
                    Catch::Contains("the peer runs as another user (uid "
                                    "65534"));
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL); // not the alarm, nor a failed setresuid
  // A process of this user passes that check (and fails on the offer).
  CHECK_THROWS_WITH(shm_segment::open(static_cast<uint32_t>(getpid()),
                                      1 << 20, 8192, mine->nonce()),
                    !Catch::Contains("another user"));
}

TEST_CASE("a segment that is not the one offered is refused with a reason",
          "[data][shm]") {
  auto a = shm_segment::create(8192);
  auto pid = static_cast<uint32_t>(getpid());
  auto other = a->nonce();
  other[0] ^= 1;
  CHECK_THROWS_WITH(shm_segment::open(pid, a->fd(), 8192, other),
                    Catch::Contains("not the peer's segment"));
  CHECK_THROWS_WITH(shm_segment::open(pid, a->fd(), 4096, a->nonce()),
                    Catch::Contains("expected 12288 bytes"));
  CHECK_THROWS_WITH(shm_segment::open(pid, a->fd(), 5000, a->nonce()),
                    Catch::Contains("power of two"));
  CHECK_THROWS_WITH(shm_segment::open(pid, a->fd(), size_t{512} << 20,
                                      a->nonce()),
                    Catch::Contains("to 256 MiB"));
  CHECK_THROWS_AS(shm_segment::open(pid, 1 << 20, 8192, a->nonce()),
                  input_error);
  CHECK_THROWS_AS(shm_segment::open(pid, -1, 8192, a->nonce()), input_error);
  CHECK_THROWS_AS(shm_segment::create(1000), std::invalid_argument);
  // A plain file of this process is not opened as a segment either.
  int fd = ::open("/dev/null", O_RDONLY);
  REQUIRE(fd >= 0);
  CHECK_THROWS_WITH(shm_segment::open(pid, fd, 8192, a->nonce()),
                    Catch::Contains("/dev/null"));
  ::close(fd);
}

TEST_CASE("counters that do not add up are a malformed peer, not a crash",
          "[data][shm]") {
  auto a = shm_segment::create(4096);
  auto b = shm_segment::open(static_cast<uint32_t>(getpid()), a->fd(), 4096,
                             a->nonce());
  // A peer that writes the counters itself (the layout: ring 0's control at
  // byte 64, its head first, its tail 64 bytes on).
  int fd = ::open(fmt::format("/proc/self/fd/{}", a->fd()).c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  auto* p = static_cast<char*>(
    mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  REQUIRE(p != MAP_FAILED);
  ::close(fd);
  uint64_t head = 1 << 20;
  std::memcpy(p + 64, &head, sizeof(head));
  char buf[16];
  CHECK_THROWS_AS(b->read_some(buf, sizeof(buf)), input_error);
  uint64_t tail = 2 << 20; // read more than was written
  std::memcpy(p + 128, &tail, sizeof(tail));
  CHECK_THROWS_AS(a->write_some("x", 1), input_error);
  munmap(p, 4096);
}

TEST_CASE_METHOD(system_fixture,
                 "two ends settle on shared memory and carry frames from "
                 "several threads whole and in order, larger than a ring "
                 "too",
                 "[data][shm]") {
  auto [fa, fb] = tcp_pair();
  received at_a;
  received at_b;
  // The accepting end writes small frames itself (a server) or none.
  size_t limit = GENERATE(size_t{64} << 10, size_t{0});
  auto b = conn(sys, fb, at_b, shm_mode::answer, limit);
  auto a = conn(sys, fa, at_a, shm_mode::offer);
  constexpr uint64_t threads = 3;
  constexpr uint64_t per_thread = 20;
  auto floats = [](uint64_t i) -> size_t {
    // 4 MB (twice a ring), 1.2 MB, or a few floats.
    return i % 5 == 0 ? (1u << 20) : i % 3 == 0 ? 300000 : 5 + i;
  };
  std::vector<std::thread> senders;
  for (uint64_t t = 0; t < threads; ++t)
    senders.emplace_back([&, t] {
      for (uint64_t i = 0; i < per_thread; ++i) {
        auto id = (t << 32) | i;
        a->send(push_frame(sys, id, floats(i)));
        b->send(push_frame(sys, id, floats(i)));
      }
    });
  for (auto& s : senders)
    s.join();
  for (auto* got : {&at_a, &at_b}) {
    REQUIRE(got->wait_for([](received& r) {
      return r.frames.size() == threads * per_thread;
    }));
    std::vector<uint64_t> next(threads, 0);
    for (auto& f : got->frames) {
      auto t = f.id >> 32;
      auto i = f.id & 0xffffffff;
      REQUIRE(t < threads);
      CHECK(i == next[t]);
      next[t] = i + 1;
      CHECK(f.floats == floats(i));
    }
    CHECK(got->all_right());
    CHECK_FALSE(got->is_closed);
  }
  CHECK(a->on_shared_memory());
  CHECK(b->on_shared_memory());
  // One end goes: the other hears it over the TCP connection.
  a.reset();
  REQUIRE(at_b.wait_for([](received& r) { return r.is_closed; }, 10s));
  CHECK(at_b.closed == "the peer closed the connection");
}

TEST_CASE_METHOD(system_fixture,
                 "an end that says TCP, or a segment the peer cannot open, "
                 "leaves the frames on TCP",
                 "[data][shm]") {
  auto [fa, fb] = tcp_pair();
  received at_a;
  received at_b;
  auto modes = GENERATE(std::make_pair(shm_mode::no_offer, shm_mode::answer),
                        std::make_pair(shm_mode::offer, shm_mode::decline));
  auto b = conn(sys, fb, at_b, modes.second);
  auto a = conn(sys, fa, at_a, modes.first);
  a->send(push_frame(sys, 1, 300000));
  b->send(push_frame(sys, 2, 10));
  REQUIRE(at_b.wait_for([](received& r) { return r.frames.size() == 1; }));
  REQUIRE(at_a.wait_for([](received& r) { return r.frames.size() == 1; }));
  CHECK(at_b.all_right());
  CHECK(at_a.all_right());
  CHECK_FALSE(a->on_shared_memory());
  CHECK_FALSE(b->on_shared_memory());
}

TEST_CASE_METHOD(system_fixture,
                 "an offer of another host's segment is declined and the "
                 "frames go over TCP, a malformed offer ends the connection",
                 "[data][shm]") {
  SECTION("another host") {
    auto [fa, fb] = tcp_pair();
    received at_b;
    auto b = conn(sys, fb, at_b, shm_mode::answer);
    // An offer naming a pid and descriptor that are not a segment here.
    char offer[shm_offer_size] = {'S', 'H', 'M', 'O', 1};
    uint32_t pid = static_cast<uint32_t>(getpid());
    int32_t fd = 0; // stdin
    uint64_t ring = 4096;
    std::memcpy(offer + 8, &pid, 4);
    std::memcpy(offer + 12, &fd, 4);
    std::memcpy(offer + 16, &ring, 8);
    REQUIRE(::send(fa, offer, sizeof(offer), MSG_NOSIGNAL) == sizeof(offer));
    auto answer = recv_exact(fa, shm_answer_size);
    CHECK(answer.substr(0, 4) == "SHMA");
    CHECK(answer[4] == 0); // declined
    // The frames go over TCP.
    auto bytes = wire_bytes(push_frame(sys, 9, 1000));
    REQUIRE(::send(fa, bytes.data(), bytes.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(bytes.size()));
    REQUIRE(at_b.wait_for([](received& r) { return r.frames.size() == 1; }));
    CHECK(at_b.all_right());
    ::close(fa);
  }
  SECTION("malformed") {
    auto [fa, fb] = tcp_pair();
    received at_b;
    auto b = conn(sys, fb, at_b, shm_mode::answer);
    std::string junk(shm_offer_size, 'x');
    REQUIRE(::send(fa, junk.data(), junk.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(junk.size()));
    REQUIRE(at_b.wait_for([](received& r) { return r.is_closed; }, 10s));
    CHECK_THAT(at_b.closed, Catch::Contains("malformed shared-memory"));
    ::close(fa);
  }
}

TEST_CASE_METHOD(system_fixture,
                 "a connection closed while it waits for the peer's answer "
                 "ends at once, and a frame queued meanwhile does not end "
                 "the wait",
                 "[data][shm]") {
  auto [fa, fb] = tcp_pair();
  received got;
  auto a = conn(sys, fa, got, shm_mode::offer);
  a->send(push_frame(sys, 1, 10)); // wakes the thread, which waits on
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(got.is_closed);
  auto t0 = std::chrono::steady_clock::now();
  a.reset(); // not the 10 s the peer would have to answer
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK_FALSE(got.is_closed); // close() calls no handler
  ::close(fb);
}

TEST_CASE("rings are sized for two frames, a power of two within bounds",
          "[data][shm]") {
  CHECK(shm_segment::ring_bytes_for(0) == shm_segment::default_ring_bytes);
  CHECK(shm_segment::ring_bytes_for(1) == size_t{64} << 10);
  // Half of Fashion-MNIST's MLP (2 ps): 117,573 floats.
  CHECK(shm_segment::ring_bytes_for(117573 * 4) == size_t{1} << 20);
  CHECK(shm_segment::ring_bytes_for(size_t{1} << 20) == size_t{2} << 20);
  CHECK(shm_segment::ring_bytes_for((size_t{1} << 20) + 1) == size_t{4} << 20);
  CHECK(shm_segment::ring_bytes_for(uint64_t{1} << 40) == size_t{256} << 20);
  // Every size it gives is one create() takes.
  CHECK_NOTHROW(shm_segment::create(shm_segment::ring_bytes_for(12345)));
}

TEST_CASE_METHOD(system_fixture,
                 "frames a peer wrote into the ring before it went are "
                 "delivered, then its end",
                 "[data][shm]") {
  auto [fa, fb] = tcp_pair();
  received at_b;
  auto b = conn(sys, fb, at_b, shm_mode::answer);
  // The worker's end by hand: the offer of a segment, the answer.
  auto segment = shm_segment::create(size_t{1} << 20);
  char offer[shm_offer_size] = {'S', 'H', 'M', 'O', 1};
  auto pid = static_cast<uint32_t>(getpid());
  int32_t fd = segment->fd();
  uint64_t ring = segment->ring_bytes();
  std::memcpy(offer + 8, &pid, 4);
  std::memcpy(offer + 12, &fd, 4);
  std::memcpy(offer + 16, &ring, 8);
  std::memcpy(offer + 24, segment->nonce().data(), 16);
  REQUIRE(::send(fa, offer, sizeof(offer), MSG_NOSIGNAL) == sizeof(offer));
  auto answer = recv_exact(fa, shm_answer_size);
  REQUIRE(answer[4] == 1);
  // (b says so just after it answered.)
  for (int i = 0; i < 500 && !b->on_shared_memory(); ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(b->on_shared_memory());
  std::this_thread::sleep_for(100ms); // b sleeps on an empty ring
  // Five frames into the ring and no doorbell, then the end: b wakes for
  // the end only, and must read the ring before it reports it.
  for (uint64_t i = 0; i < 5; ++i) {
    auto bytes = wire_bytes(push_frame(sys, i, 1000));
    REQUIRE(segment->write_some(bytes.data(), bytes.size()) == bytes.size());
  }
  ::close(fa);
  REQUIRE(at_b.wait_for([](received& r) { return r.is_closed; }, 10s));
  CHECK(at_b.closed == "the peer closed the connection");
  CHECK(at_b.all_right());
  std::lock_guard<std::mutex> guard{at_b.mtx};
  REQUIRE(at_b.frames.size() == 5);
  for (uint64_t i = 0; i < 5; ++i)
    CHECK(at_b.frames[i].id == i);
}
