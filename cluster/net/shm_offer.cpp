#include "cluster/net/shm_offer.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cluster/net/shm_segment.hpp"
#include "cluster/net/tls_channel.hpp"
#include "core/error.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

/// Waits until `ch` is ready for `events` (or may be: the caller tries
/// again), the deadline passes or `cancel` says stop.
void wait_for(channel& ch, short events, steady_clock::time_point deadline,
              shm_cancel cancel) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - steady_clock::now());
  if (left.count() <= 0)
    throw runtime_failure("the peer did not settle shared memory or TCP "
                          "in time");
  pollfd fds[2] = {{ch.fd(), events, 0}, {cancel.wake_fd, POLLIN, 0}};
  if (poll(fds, cancel.wake_fd >= 0 ? 2 : 1, static_cast<int>(left.count()))
        < 0
      && errno != EINTR)
    throw runtime_failure(
      fmt::format("poll failed: {}", std::strerror(errno)));
  if (cancel.wake_fd >= 0 && fds[1].revents != 0) {
    // Frames queued meanwhile wake it too: they wait for the settling.
    uint64_t n = 0;
    [[maybe_unused]] auto r = read(cancel.wake_fd, &n, sizeof(n));
  }
  if (cancel.stop != nullptr && cancel.stop->load())
    throw runtime_failure("closed");
}

[[noreturn]] void channel_failed(channel& ch, channel::status s) {
  throw runtime_failure(s == channel::status::closed
                          ? std::string{"the peer closed the connection"}
                          : "the connection failed: " + ch.error());
}

void write_all(channel& ch, const char* p, size_t n,
               steady_clock::time_point deadline, shm_cancel cancel) {
  while (n > 0) {
    size_t wrote = 0;
    auto s = ch.write_some(p, n, wrote);
    if (s == channel::status::done) {
      p += wrote;
      n -= wrote;
    } else if (s == channel::status::want_write) {
      wait_for(ch, POLLOUT, deadline, cancel);
    } else if (s == channel::status::want_read) {
      wait_for(ch, POLLIN, deadline, cancel);
    } else {
      channel_failed(ch, s);
    }
  }
}

void read_exact(channel& ch, char* p, size_t n,
                steady_clock::time_point deadline, shm_cancel cancel) {
  while (n > 0) {
    size_t got = 0;
    auto s = ch.read(p, n, got);
    if (s == channel::status::done) {
      p += got;
      n -= got;
    } else if (s == channel::status::want_read) {
      wait_for(ch, POLLIN, deadline, cancel);
    } else if (s == channel::status::want_write) {
      wait_for(ch, POLLOUT, deadline, cancel);
    } else {
      channel_failed(ch, s);
    }
  }
}

template <class T>
void put(char* at, T x) {
  std::memcpy(at, &x, sizeof(T)); // little-endian hosts only (x86-64, arm64)
}

template <class T>
T get(const char* at) {
  T x;
  std::memcpy(&x, at, sizeof(T));
  return x;
}

} // namespace

std::unique_ptr<shm_segment> offer_shm(channel& ch, size_t ring_bytes,
                                       steady_clock::time_point deadline,
                                       std::string& why, shm_cancel cancel) {
  std::unique_ptr<shm_segment> segment;
  if (ring_bytes > 0) {
    try {
      segment = shm_segment::create(ring_bytes);
    } catch (const std::exception& e) {
      why = e.what();
    }
  } else {
    why = "shared memory is off here";
  }
  char msg[shm_offer_size] = {'S', 'H', 'M', 'O'};
  put<uint32_t>(msg + 4, segment ? 1 : 0);
  if (segment) {
    put<uint32_t>(msg + 8, static_cast<uint32_t>(getpid()));
    put<int32_t>(msg + 12, segment->fd());
    put<uint64_t>(msg + 16, segment->ring_bytes());
    std::memcpy(msg + 24, segment->nonce().data(), segment->nonce().size());
  }
  write_all(ch, msg, sizeof(msg), deadline, cancel);
  char answer[shm_answer_size];
  read_exact(ch, answer, sizeof(answer), deadline, cancel);
  if (std::memcmp(answer, "SHMA", 4) != 0)
    throw input_error("a malformed answer to the shared-memory offer");
  auto yes = get<uint32_t>(answer + 4);
  if (yes > 1 || (yes == 1 && !segment))
    throw input_error(fmt::format("an answer {} to the shared-memory offer",
                                  yes));
  if (segment)
    segment->close_fd(); // the peer has opened it, or never will
  if (yes == 0) {
    if (segment)
      why = "the peer declined shared memory: another host, user or "
            "network namespace, or it is off there";
    return nullptr;
  }
  return segment;
}

std::unique_ptr<shm_segment> answer_shm(channel& ch, bool accept,
                                        steady_clock::time_point deadline,
                                        std::string& why, shm_cancel cancel) {
  char msg[shm_offer_size];
  read_exact(ch, msg, sizeof(msg), deadline, cancel);
  if (std::memcmp(msg, "SHMO", 4) != 0)
    throw input_error("a malformed shared-memory offer (no \"SHMO\")");
  auto offered = get<uint32_t>(msg + 4);
  if (offered > 1)
    throw input_error(
      fmt::format("a shared-memory offer with flags {}", offered));
  std::unique_ptr<shm_segment> segment;
  if (offered == 0) {
    why = "the peer wants TCP";
  } else if (!accept) {
    why = "shared memory is off here";
  } else {
    shm_segment::nonce_type nonce;
    std::memcpy(nonce.data(), msg + 24, nonce.size());
    try {
      segment = shm_segment::open(get<uint32_t>(msg + 8),
                                  get<int32_t>(msg + 12),
                                  get<uint64_t>(msg + 16), nonce);
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  char answer[shm_answer_size] = {'S', 'H', 'M', 'A'};
  put<uint32_t>(answer + 4, segment ? 1 : 0);
  write_all(ch, answer, sizeof(answer), deadline, cancel);
  return segment;
}

} // namespace actorps
