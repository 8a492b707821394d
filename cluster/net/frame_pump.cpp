#include "cluster/net/frame_pump.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <poll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cluster/net/frame_io.hpp"
#include "cluster/net/gate_io.hpp"
#include "cluster/net/shm_segment.hpp"
#include "cluster/net/shm_offer.hpp"
#include "cluster/net/tls_channel.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

using detail::reader;
using detail::writer;

/// At most this many bytes are read in one go before queued frames get a
/// turn (a peer that sends without pause does not starve our own sends).
constexpr size_t read_budget = size_t{8} << 20;

/// Writes `f` from byte `from` on with `write(p, n)`, which returns the
/// bytes it took (0: no more now), part by part (header, meta, bulk);
/// returns the offset reached (f.size(): all of it).
template <class Write>
size_t write_parts(const out_frame& f, size_t from, Write write) {
  const std::pair<const char*, size_t> parts[3] = {
    {f.header.data(), frame_header_size},
    {f.meta.data(), f.meta.size()},
    {f.bulk, f.bulk_bytes}};
  size_t base = 0;
  for (auto [p, n] : parts) {
    while (from < base + n) {
      auto off = from - base;
      auto k = write(p + off, n - off);
      if (k == 0)
        return from;
      from += k;
    }
    base += n;
  }
  return from;
}

/// Sends as much of `f` from byte `from` on as the socket `fd` takes now,
/// without blocking. Stops early when the socket is full or fails (the
/// pump's thread then finds the failure itself).
size_t send_now(int fd, const out_frame& f, size_t from) {
  return write_parts(f, from, [fd](const char* p, size_t n) -> size_t {
    auto r = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    return r > 0 ? static_cast<size_t>(r) : 0;
  });
}

/// send_now() into a shared-memory ring: as much of `f` from byte `from`
/// on as the ring takes now.
size_t send_shm(shm_segment& shm, const out_frame& f, size_t from) {
  return write_parts(f, from, [&shm](const char* p, size_t n) {
    return shm.write_some(p, n);
  });
}

/// Wakes a peer sleeping on the shared-memory rings: one byte on the
/// connection (a failure shows on the next read).
void ring_doorbell(int fd) {
  char b = 1;
  [[maybe_unused]] auto r = ::send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/// How long the ends may take to settle on shared memory or TCP.
constexpr auto settle_timeout = std::chrono::seconds(10);

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

/// Set on every pump's thread (frame_pump::on_pump_thread).
thread_local bool connection_thread = false;

} // namespace

struct frame_pump::state {
  state(std::unique_ptr<channel> ch, frame_handler on_frame,
        close_handler on_close, std::string label, size_t caller_limit,
        shm_mode mode)
    : ch_(std::move(ch)),
      on_frame_(std::move(on_frame)),
      on_close_(std::move(on_close)),
      label_(std::move(label)),
      caller_limit_(caller_limit),
      mode_(mode) {
  }

  ~state() {
    if (wake_fd_ >= 0)
      ::close(wake_fd_);
  }

  void run();
  void run_socket();
  void run_shm();
  void settle();
  /// Moves the queued frames to `out` (see run_socket()).
  void adopt(writer& out);
  /// Moves `in` on by `got` bytes and hands on a frame it completes; false
  /// if the connection stopped (before or in the handler).
  bool deliver(reader& in, size_t got);
  void end(const std::string& why);
  void wake();
  void send(out_frame f);
  void close();

  std::unique_ptr<channel> ch_;
  frame_handler on_frame_;
  close_handler on_close_;
  std::string label_;
  size_t caller_limit_;
  /// The largest frame parts the peer may send.
  frame_limits limits_;
  shm_mode mode_;
  /// Each ring's bytes, when this end offers shared memory.
  size_t ring_bytes_ = 0;
  /// Set by the thread before ready_ (and read by callers after it).
  std::unique_ptr<shm_segment> shm_;
  std::atomic<bool> on_shm_{false};
  int wake_fd_ = -1;
  std::mutex mtx_;
  std::deque<out_frame> queue_;
  /// Bytes of queue_.front() written already (by a caller of send()).
  size_t front_sent_ = 0;
  /// Who writes to the socket now: the thread (it holds frames that the
  /// socket did not take yet), or a caller of send() (plain TCP, nothing
  /// queued). Frames queued meanwhile wait for them.
  bool thread_writes_ = false;
  bool caller_writes_ = false;
  /// The ends have settled on shared memory or TCP: callers may write.
  bool ready_ = false;
  std::atomic<bool> stop_{false};
};

frame_pump::frame_pump(std::unique_ptr<channel> ch, frame_handler on_frame,
                       close_handler on_close, std::string label,
                       size_t caller_limit, shm_mode shm,
                       size_t frame_bytes, frame_limits limits,
                       std::unique_ptr<shm_segment> segment)
  : s_(std::make_shared<state>(std::move(ch), std::move(on_frame),
                               std::move(on_close), std::move(label),
                               caller_limit, shm)) {
  auto& st = *s_;
  st.limits_ = limits;
  if (shm == shm_mode::settled) {
    st.shm_ = std::move(segment);
    st.on_shm_.store(st.shm_ != nullptr);
  }
  st.ring_bytes_ = shm_segment::ring_bytes_for(frame_bytes);
  st.wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (st.wake_fd_ < 0)
    throw runtime_failure(fmt::format("{}: eventfd: {}", st.label_,
                                      std::strerror(errno)));
  detail::set_nonblocking(st.ch_->fd(), true);
  detail::set_nodelay(st.ch_->fd());
  st.ch_->allow_partial_writes();
  // The thread holds the state: it outlives this handle if the handle goes
  // first (see ~frame_pump).
  thread_ = std::thread([s = s_] {
    connection_thread = true;
    s->run();
  });
}

frame_pump::~frame_pump() {
  s_->close();
  if (thread_.joinable()) {
    // Joining from a pump's thread could wait for a thread that waits
    // for this one (two handlers dropping each other's connection), or for
    // itself.
    if (on_pump_thread())
      thread_.detach();
    else
      thread_.join();
  }
}

void frame_pump::send(out_frame f) {
  s_->send(std::move(f));
}

void frame_pump::close() {
  s_->close();
}

const std::string& frame_pump::label() const {
  return s_->label_;
}

bool frame_pump::on_shared_memory() const {
  return s_->on_shm_.load();
}

bool frame_pump::on_pump_thread() {
  return connection_thread;
}

void frame_pump::state::wake() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof(one));
}

void frame_pump::state::send(out_frame f) {
  std::unique_lock<std::mutex> guard{mtx_};
  if (stop_.load())
    return;
  if (!ready_ || (ch_->tls() && !shm_) || f.size() > caller_limit_
      || thread_writes_ || caller_writes_ || !queue_.empty()) {
    queue_.push_back(std::move(f));
    guard.unlock();
    wake();
    return;
  }
  // Nothing waits to be written: the caller writes the frame itself, which
  // saves waking the pump's thread (two thread switches per frame).
  // Plain TCP or shared memory only: a TLS session is used by one thread.
  caller_writes_ = true;
  guard.unlock();
  size_t sent = 0;
  if (shm_) {
    try {
      sent = send_shm(*shm_, f, 0);
    } catch (const std::exception&) {
      // Counters that do not add up: the thread finds them too and ends.
    }
    if (sent > 0 && shm_->reader_needs_wake())
      ring_doorbell(ch_->fd());
  } else {
    sent = send_now(ch_->fd(), f, 0);
  }
  guard.lock();
  caller_writes_ = false;
  bool rest = sent < f.size();
  if (rest) {
    // The socket is full: the pump's thread writes the rest, first.
    queue_.push_front(std::move(f));
    front_sent_ = sent;
  }
  bool more = rest || !queue_.empty();
  guard.unlock();
  if (more)
    wake();
}

void frame_pump::state::close() {
  stop_.store(true);
  wake();
}

void frame_pump::state::end(const std::string& why) {
  if (!stop_.exchange(true) && on_close_)
    on_close_(why);
}

void frame_pump::state::adopt(writer& out) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (caller_writes_)
    return;
  // (out.frames is empty when a caller wrote: see send().)
  bool fresh = out.frames.empty();
  while (!queue_.empty()) {
    out.frames.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (fresh)
    out.skip(std::exchange(front_sent_, 0));
  thread_writes_ = !out.frames.empty();
}

bool frame_pump::state::deliver(reader& in, size_t got) {
  if (!in.advance(got)) // throws input_error on a bad header
    return true;
  if (stop_.load())
    return false;
  on_frame_(std::move(in.frame));
  return !stop_.load(); // closed by the handler (or meanwhile)
}

void frame_pump::state::settle() {
  std::string why;
  auto deadline = std::chrono::steady_clock::now() + settle_timeout;
  shm_cancel cancel{wake_fd_, &stop_};
  if (mode_ == shm_mode::answer || mode_ == shm_mode::decline)
    shm_ = answer_shm(*ch_, mode_ == shm_mode::answer, deadline, why, cancel);
  else
    shm_ = offer_shm(*ch_, mode_ == shm_mode::offer ? ring_bytes_ : 0,
                     deadline, why, cancel);
  // Said once per channel, by the worker's end.
  auto dialed = mode_ == shm_mode::offer || mode_ == shm_mode::no_offer;
  auto level = dialed ? log::level::info : log::level::debug;
  if (log::enabled(level))
    log::write(level, "data", -1,
               shm_ ? fmt::format("{}: frames through shared memory", label_)
                    : fmt::format("{}: frames over TCP ({})", label_, why));
  on_shm_.store(shm_ != nullptr);
}

void frame_pump::state::run() {
  if (mode_ != shm_mode::none && mode_ != shm_mode::settled) {
    try {
      settle();
    } catch (const input_error& e) {
      log::warn("data", -1, "{}: closing: the peer sent {}", label_,
                e.what());
      return end(std::string{"malformed shared-memory negotiation: "}
                 + e.what());
    } catch (const std::exception& e) {
      return end(e.what());
    }
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    ready_ = true;
  }
  if (shm_)
    run_shm();
  else
    run_socket();
}

void frame_pump::state::run_socket() {
  reader in;
  in.limits = limits_;
  writer out;
  bool write_wants_read = false; // TLS: a write waits for readable
  bool write_blocked = false;
  // Poll wakes the thread when this many bytes can be read (SO_RCVLOWAT):
  // the rest of a large frame comes in with one wake-up instead of one per
  // burst of segments. With the caller's own writes (send()), a 1M-float
  // push's p50 went from 1.7-1.9 to 1.4-1.6 ms (actorps-bench, loopback).
  int lowat = 1;
  // When the frame being read began (its first byte), for limits_'s
  // frame_timeout; none between frames.
  std::optional<std::chrono::steady_clock::time_point> frame_began;
  uint64_t began_after = 0; // in.completed when it began
  try {
    for (;;) {
      if (stop_.load())
        return;
      adopt(out);
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
          if (!deliver(in, got))
            return;
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
      int timeout_ms = -1;
      if (in.missing() == 0) {
        frame_began.reset();
      } else {
        auto now = std::chrono::steady_clock::now();
        if (!frame_began || began_after != in.completed) {
          frame_began = now; // a new frame since the last wait
          began_after = in.completed;
        }
        auto left = *frame_began + limits_.frame_timeout - now;
        if (left <= std::chrono::steady_clock::duration::zero()) {
          auto why = fmt::format(
            "a frame in progress for {} s, {} bytes still missing",
            limits_.frame_timeout.count() / 1000.0, in.missing());
          log::warn("data", -1, "{}: closing: {}", label_, why);
          return end(why);
        }
        timeout_ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(left).count()
          + 1);
      }
      if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR)
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

void frame_pump::state::run_shm() {
  reader in;
  in.limits = limits_;
  writer out;
  int fd = ch_->fd();
  // The connection ended: what the peer wrote before is still read (as TCP
  // delivers the bytes before its end), then the close is reported.
  bool peer_gone = false;
  try {
    for (;;) {
      if (stop_.load())
        return;
      adopt(out);
      // -- write what the ring takes ------------------------------------------
      bool write_blocked = false;
      bool wrote = false;
      bool held = !out.frames.empty(); // thread_writes_ is set
      while (!out.frames.empty()) {
        auto [p, n] = out.next();
        auto k = shm_->write_some(p, n);
        if (k == 0) {
          write_blocked = true;
          break;
        }
        out.advance(k);
        wrote = true;
      }
      if (wrote && shm_->reader_needs_wake())
        ring_doorbell(fd);
      if (held && out.frames.empty()) {
        std::lock_guard<std::mutex> guard{mtx_};
        thread_writes_ = false;
      }
      // -- read what has arrived ----------------------------------------------
      size_t budget = read_budget;
      for (;;) {
        auto [p, n] = in.space();
        size_t got = n == 0 ? 0 : shm_->read_some(p, n);
        if (n > 0 && got == 0)
          break;
        // Room for a writer waiting for it, at once (not after the frame).
        if (got > 0 && shm_->writer_needs_wake())
          ring_doorbell(fd);
        if (!deliver(in, got))
          return;
        if (got >= budget) {
          budget = 0;
          break;
        }
        budget -= got;
      }
      // -- wait ---------------------------------------------------------------
      if (budget == 0 || (!out.frames.empty() && !write_blocked))
        continue;
      if (peer_gone)
        return end("the peer closed the connection");
      if (!shm_->reader_may_sleep()
          || (write_blocked && !shm_->writer_may_sleep())) {
        shm_->woke();
        continue;
      }
      pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {fd, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0 && errno != EINTR)
        return end(fmt::format("poll failed: {}", std::strerror(errno)));
      shm_->woke();
      if (fds[0].revents != 0) {
        uint64_t n = 0;
        [[maybe_unused]] auto r = read(wake_fd_, &n, sizeof(n));
      }
      if (fds[1].revents != 0) {
        // Doorbells carry nothing but the wake-up; the end of the
        // connection is the end of the peer.
        char bells[256];
        for (;;) {
          auto r = ::recv(fd, bells, sizeof(bells), MSG_DONTWAIT);
          if (r > 0)
            continue;
          if (r == 0) {
            peer_gone = true;
            break;
          }
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            break;
          return end(fmt::format("read failed: {}", std::strerror(errno)));
        }
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
