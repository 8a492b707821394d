#pragma once

// One data channel's connection (cluster/data_link.hpp): a thread that
// writes queued frames (cluster/data_frame.hpp) from where their bytes lie
// and reads incoming frames straight into the vectors the messages keep,
// on a non-blocking socket, plain or TLS (one thread per connection, so
// that a TLS session is only ever used by one thread). Both directions go
// on at once: a large pull reply streams in while a push streams out.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cluster/data_frame.hpp"

namespace actorps {

class channel;

class data_conn {
public:
  /// Called on the connection's thread with each complete frame. May throw
  /// input_error (a frame that does not decode): the connection closes.
  using frame_handler = std::function<void(in_frame)>;
  /// Called once on the connection's thread when it ends by itself: the
  /// peer closed it, it failed, or the peer sent a malformed frame (`why`
  /// says which). Not called after close().
  using close_handler = std::function<void(const std::string& why)>;

  /// Takes over `ch` (after the gate's or dial's preamble) and starts the
  /// thread. `label` names the connection in log lines. A frame of at most
  /// `caller_limit` bytes may be written by the caller of send() itself
  /// (see there): a server passes a small limit, so that its actor's thread
  /// does not spend its time writing large pull replies, which the
  /// connection's thread writes beside it.
  data_conn(std::unique_ptr<channel> ch, frame_handler on_frame,
            close_handler on_close, std::string label,
            size_t caller_limit = SIZE_MAX);

  /// close(), then waits for the thread (unless called on it).
  ~data_conn();

  data_conn(const data_conn&) = delete;
  data_conn& operator=(const data_conn&) = delete;

  /// Sends `f` (thread-safe); frames go out in the order of the calls.
  /// Over plain TCP with nothing queued and `f` within the caller limit,
  /// the caller writes what the socket takes at once (saving the thread's
  /// wake-up); the connection's thread writes the rest. Frames sent after
  /// the connection ended are dropped.
  void send(out_frame f);

  /// Ends the connection without calling the close handler.
  void close();

  const std::string& label() const {
    return label_;
  }

private:
  void run();
  void wake();

  std::unique_ptr<channel> ch_;
  frame_handler on_frame_;
  close_handler on_close_;
  std::string label_;
  size_t caller_limit_;
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
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

} // namespace actorps
