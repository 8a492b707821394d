#include "cluster/data_conn.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <poll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cluster/gate_io.hpp"
#include "cluster/tls_channel.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

/// At most this many bytes are read in one go before queued frames get a
/// turn (a peer that sends without pause does not starve our own sends).
constexpr size_t read_budget = size_t{8} << 20;

/// The frame being read: header, then meta, then bulk.
struct reader {
  std::array<char, frame_header_size> header{};
  size_t got = 0; ///< of the current part
  int part = 0;   ///< 0 header, 1 meta, 2 bulk
  in_frame frame;

  /// Where the current part's next bytes go, and how many are missing.
  std::pair<char*, size_t> space() {
    switch (part) {
      case 0:
        return {header.data() + got, frame_header_size - got};
      case 1:
        return {frame.meta.data() + got, frame.meta.size() - got};
      default:
        return {reinterpret_cast<char*>(frame.bulk.data()) + got,
                frame.bulk.size() * sizeof(float) - got};
    }
  }

  /// Bytes of the current frame still to come (0 between frames).
  size_t missing() const {
    switch (part) {
      case 0:
        return got == 0 ? 0 : frame_header_size - got;
      case 1:
        return frame.meta.size() - got + frame.bulk.size() * sizeof(float);
      default:
        return frame.bulk.size() * sizeof(float) - got;
    }
  }

  /// Moves on after `n` more bytes; true when a whole frame is in `frame`.
  bool advance(size_t n) {
    got += n;
    for (;;) {
      if (space().second > 0)
        return false;
      got = 0;
      if (part == 0) {
        frame = in_frame{};
        frame.header = parse_frame_header(header.data()); // throws
        frame.meta.resize(frame.header.meta_bytes);
        frame.bulk.resize(frame.header.bulk_bytes / sizeof(float));
        part = 1;
      } else if (part == 1) {
        part = 2;
      } else {
        part = 0;
        return true;
      }
    }
  }
};

/// The frame being written: header, meta, bulk.
struct writer {
  std::deque<out_frame> frames;
  int part = 0;
  size_t done = 0;

  std::pair<const char*, size_t> next() {
    auto& f = frames.front();
    switch (part) {
      case 0:
        return {f.header.data() + done, frame_header_size - done};
      case 1:
        return {f.meta.data() + done, f.meta.size() - done};
      default:
        return {f.bulk + done, f.bulk_bytes - done};
    }
  }

  void advance(size_t n) {
    done += n;
    while (!frames.empty() && next().second == 0) {
      done = 0;
      if (++part == 3) {
        part = 0;
        frames.pop_front();
      }
    }
  }

  /// Passes over the first `n` bytes of the front frame (sent already).
  void skip(size_t n) {
    while (n > 0 && !frames.empty()) {
      auto k = std::min(n, next().second);
      advance(k);
      n -= k;
    }
  }
};

/// Sends as much of `f` from byte `from` on as the socket `fd` takes now,
/// without blocking; returns the offset reached (f.size(): all of it).
/// Stops early when the socket is full or fails (the connection's thread
/// then finds the failure itself).
size_t send_now(int fd, const out_frame& f, size_t from) {
  const std::pair<const char*, size_t> parts[3] = {
    {f.header.data(), frame_header_size},
    {f.meta.data(), f.meta.size()},
    {f.bulk, f.bulk_bytes}};
  size_t base = 0;
  for (auto [p, n] : parts) {
    while (from < base + n) {
      auto off = from - base;
      auto r = ::send(fd, p + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r <= 0)
        return from;
      from += static_cast<size_t>(r);
    }
    base += n;
  }
  return from;
}

/// A frame with at least this many bytes still to come is waited for
/// whole (SO_RCVLOWAT), not woken for at each segment.
constexpr size_t lowat_from = size_t{64} << 10;

/// What the kernel may hold of a TLS frame's bytes fewer than the frame's
/// plaintext: the part of a record OpenSSL has read and not yet decrypted
/// (at most one record, 16 KiB and its overhead).
constexpr size_t tls_slack = size_t{32} << 10;

/// The poll wake-up threshold for a connection whose current frame misses
/// `missing` bytes: 1 (any byte) for small remainders, else about all of
/// them.
int wake_threshold(size_t missing, bool tls) {
  if (missing < lowat_from)
    return 1;
  auto want = missing - (tls ? tls_slack : 0);
  return static_cast<int>(std::min<size_t>(want, size_t{1} << 30));
}

} // namespace

data_conn::data_conn(std::unique_ptr<channel> ch, frame_handler on_frame,
                     close_handler on_close, std::string label,
                     size_t caller_limit)
  : ch_(std::move(ch)),
    on_frame_(std::move(on_frame)),
    on_close_(std::move(on_close)),
    label_(std::move(label)),
    caller_limit_(caller_limit) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0)
    throw runtime_failure(fmt::format("{}: eventfd: {}", label_,
                                      std::strerror(errno)));
  detail::set_nonblocking(ch_->fd(), true);
  detail::set_nodelay(ch_->fd());
  ch_->allow_partial_writes();
  thread_ = std::thread([this] { run(); });
}

data_conn::~data_conn() {
  close();
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach(); // cannot happen with handlers that only send
    else
      thread_.join();
  }
  if (wake_fd_ >= 0)
    ::close(wake_fd_);
}

void data_conn::wake() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof(one));
}

void data_conn::send(out_frame f) {
  std::unique_lock<std::mutex> guard{mtx_};
  if (stop_.load())
    return;
  if (ch_->tls() || f.size() > caller_limit_ || thread_writes_
      || caller_writes_ || !queue_.empty()) {
    queue_.push_back(std::move(f));
    guard.unlock();
    wake();
    return;
  }
  // Nothing waits to be written: the caller writes the frame itself, which
  // saves waking the connection's thread (two thread switches per frame).
  // Plain TCP only: a TLS session is used by one thread.
  caller_writes_ = true;
  guard.unlock();
  auto sent = send_now(ch_->fd(), f, 0);
  guard.lock();
  caller_writes_ = false;
  bool rest = sent < f.size();
  if (rest) {
    // The socket is full: the connection's thread writes the rest, first.
    queue_.push_front(std::move(f));
    front_sent_ = sent;
  }
  bool more = rest || !queue_.empty();
  guard.unlock();
  if (more)
    wake();
}

void data_conn::close() {
  stop_.store(true);
  wake();
}

void data_conn::run() {
  reader in;
  writer out;
  auto end = [&](std::string why) {
    if (!stop_.exchange(true) && on_close_)
      on_close_(why);
  };
  bool write_wants_read = false; // TLS: a write waits for readable
  bool write_blocked = false;
  // Poll wakes the thread when this many bytes can be read (SO_RCVLOWAT):
  // the rest of a large frame comes in with one wake-up instead of one per
  // burst of segments. With the caller's own writes (send()), a 1M-float
  // push's p50 went from 1.7-1.9 to 1.4-1.6 ms (actorps-bench, loopback).
  int lowat = 1;
  try {
    for (;;) {
      {
        std::lock_guard<std::mutex> guard{mtx_};
        if (stop_.load())
          return;
        if (!caller_writes_) {
          // (out.frames is empty when a caller wrote: see send().)
          bool adopt = out.frames.empty();
          while (!queue_.empty()) {
            out.frames.push_back(std::move(queue_.front()));
            queue_.pop_front();
          }
          if (adopt)
            out.skip(std::exchange(front_sent_, 0));
          thread_writes_ = !out.frames.empty();
        }
      }
      // -- write what the socket takes --------------------------------------
      write_blocked = false;
      write_wants_read = false;
      bool held = !out.frames.empty(); // thread_writes_ is set
      while (!out.frames.empty()) {
        auto [p, n] = out.next();
        size_t wrote = 0;
        auto s = ch_->write_some(p, n, wrote);
        if (s == channel::status::done) {
          out.advance(wrote);
          continue;
        }
        if (s == channel::status::want_write || s == channel::status::want_read) {
          write_blocked = true;
          write_wants_read = s == channel::status::want_read;
          break;
        }
        return end(s == channel::status::closed
                     ? "the peer closed the connection"
                     : "write failed: " + ch_->error());
      }
      if (held && out.frames.empty()) {
        std::lock_guard<std::mutex> guard{mtx_};
        thread_writes_ = false;
      }
      // -- read what has arrived ----------------------------------------------
      size_t budget = read_budget;
      for (;;) {
        auto [p, n] = in.space();
        size_t got = 0;
        auto s = n == 0 ? channel::status::done : ch_->read(p, n, got);
        if (s == channel::status::done) {
          if (in.advance(got)) // throws input_error on a bad header
            on_frame_(std::move(in.frame));
          if (got >= budget) {
            budget = 0;
            break;
          }
          budget -= got;
          continue;
        }
        if (s == channel::status::want_read || s == channel::status::want_write)
          break;
        return end(s == channel::status::closed
                     ? "the peer closed the connection"
                     : "read failed: " + ch_->error());
      }
      // -- wait ---------------------------------------------------------------
      short events = POLLIN;
      if (write_blocked && !write_wants_read)
        events |= POLLOUT;
      pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {ch_->fd(), events, 0}};
      bool more = !out.frames.empty() && !write_blocked;
      if (budget == 0 || more)
        continue; // still work to do without waiting
      auto want = wake_threshold(in.missing(), ch_->tls());
      if (want != lowat) {
        // Best effort: without it, poll wakes at each segment as before.
        if (setsockopt(ch_->fd(), SOL_SOCKET, SO_RCVLOWAT, &want,
                       sizeof(want))
            == 0)
          lowat = want;
      }
      if (poll(fds, 2, -1) < 0 && errno != EINTR)
        return end(fmt::format("poll failed: {}", std::strerror(errno)));
      if (fds[0].revents != 0) {
        uint64_t n = 0;
        [[maybe_unused]] auto r = read(wake_fd_, &n, sizeof(n));
      }
    }
  } catch (const input_error& e) {
    log::warn("data", -1, "{}: closing: the peer sent {}", label_, e.what());
    end(std::string{"malformed frame: "} + e.what());
  } catch (const std::exception& e) {
    log::warn("data", -1, "{}: closing: {}", label_, e.what());
    end(e.what());
  }
}

} // namespace actorps
