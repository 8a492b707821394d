// Fuzz target: what a peer on the same host puts into a data channel's
// shared-memory ring (cluster/net/shm_segment.hpp), read as the frame pump
// reads it (cluster/net/frame_io.hpp's reader over shm_segment::read_some).
// The peer owns its half of the segment: it writes any bytes, and it may
// write the ring's counters too.
//
// Input: one byte of flags (bit 0: the peer overwrites the ring's head
// counter with the next 8 bytes, bit 1: its tail counter with the 8 after,
// bit 2: between writes of 1 to 64 bytes rather than whole ring-fulls),
// then the bytes the peer writes.
//
// Properties: with the counters left alone, the reader gets exactly the
// bytes written, in order, across the ring's wraps (a 4 KiB ring, inputs up
// to 64 KiB); the frame reader either completes frames or throws
// input_error (a header that does not parse or announces more than its
// limits), never anything else; with counters overwritten, reading and
// writing either go on or throw input_error ("counters that do not add
// up"), never another exception, and never read or write outside the
// mapping (AddressSanitizer in the fuzz build).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cluster/net/frame_io.hpp"
#include "cluster/net/shm_segment.hpp"
#include "core/error.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

constexpr size_t ring = 4096;

/// The peer's own mapping of the segment, to write the counters as a
/// hostile peer would (ring 0's control at byte 64: its head, and its tail
/// 64 bytes on).
struct raw_mapping {
  char* base = nullptr;
  size_t bytes = 0;

  explicit raw_mapping(int creator_fd) {
    auto path = "/proc/self/fd/" + std::to_string(creator_fd);
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return;
    bytes = 4096; // the control page
    auto* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    base = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }

  ~raw_mapping() {
    if (base != nullptr)
      munmap(base, bytes);
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto flags = in.u8();
  auto head = in.bytes(8);
  auto tail = in.bytes(8);
  auto bytes = in.rest();
  if (bytes.size() > (size_t{64} << 10))
    return 0;
  auto a = shm_segment::create(ring); // the peer: writes ring 0
  auto b = shm_segment::open(static_cast<uint32_t>(getpid()), a->fd(), ring,
                             a->nonce()); // this end: reads ring 0
  bool hostile = (flags & 3) != 0;
  if (hostile) {
    raw_mapping raw{a->fd()};
    fuzz::check(raw.base != nullptr, "cannot map the segment");
    head.resize(8, '\0');
    tail.resize(8, '\0');
    if (flags & 1)
      std::memcpy(raw.base + 64, head.data(), 8);
    if (flags & 2)
      std::memcpy(raw.base + 128, tail.data(), 8);
  }
  bool small = (flags & 4) != 0;
  detail::reader frames;
  frames.limits.meta = 64 << 10;
  frames.limits.bulk = 1 << 20;
  bool frames_bad = false; // the frame reader refused the bytes
  std::string read_back;
  size_t sent = 0;
  size_t step = 0;
  try {
    // The peer writes while this end reads, a ring-full (or 1-64 bytes) at
    // a time: the ring is never full for long, so nothing waits.
    while (sent < bytes.size() || read_back.size() < sent) {
      size_t wrote = 0;
      if (sent < bytes.size()) {
        auto n = small ? 1 + (step++ % 64) : bytes.size() - sent;
        n = std::min(n, bytes.size() - sent);
        wrote = a->write_some(bytes.data() + sent, n);
        sent += wrote;
      }
      char buf[1024];
      auto got = b->read_some(buf, sizeof(buf));
      if (got == 0 && wrote == 0) {
        // Neither end can move: only counters the peer wrote get here
        // (a ring that says it is full and empty at once).
        fuzz::check(hostile, "a ring with nothing to read and no room");
        break;
      }
      read_back.append(buf, got);
      // The same bytes through the frame reader, as the pump hands them on.
      for (size_t i = 0; i < got && !frames_bad;) {
        auto [at, room] = frames.space();
        auto k = std::min(room, got - i);
        std::memcpy(at, buf + i, k);
        i += k;
        try {
          frames.advance(k);
        } catch (const input_error&) {
          frames_bad = true;
        }
      }
    }
  } catch (const input_error&) {
    fuzz::check(hostile, "input_error from a ring whose counters the peer "
                         "left alone");
    return 0;
  } catch (const std::exception& e) {
    fuzz::fail(std::string{"an exception other than input_error: "}
               + e.what());
  }
  if (!hostile)
    fuzz::check(read_back == bytes,
                "the ring gave back other bytes than were written");
  return 0;
}
