#pragma once

// The frame pump of one data channel (cluster/net/data_link.hpp): it owns
// the channel's socket and a thread that writes queued frames
// (cluster/net/data_frame.hpp) from where their bytes lie and reads incoming
// frames straight into the vectors the messages keep, on a non-blocking
// socket, plain or TLS (one thread per pump, so that a TLS session is only
// ever used by one thread), or through shared memory when both ends are on
// one host (cluster/net/shm_segment.hpp; settled first,
// cluster/net/shm_offer.hpp). Both directions go on at once: a large pull
// reply streams in while a push streams out.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "cluster/net/data_frame.hpp"
#include "cluster/net/shm_segment.hpp"

namespace actorps {

class channel;

/// Whether a connection first settles on shared memory
/// (cluster/net/shm_offer.hpp): `none` (no, and no offer is exchanged: both
/// ends must say none), `offer` / `no_offer` (this end dialed: it offers a
/// segment, or says it wants TCP), `answer` / `decline` (this end
/// accepted: it answers the offer, taking the segment if it can, or
/// saying TCP), `settled` (the dialing end settled before the pump started,
/// cluster/net/data_link.cpp: the segment passed, or none for TCP).
enum class shm_mode { none, offer, no_offer, answer, decline, settled };

/// Moves the frames of one data channel in both directions on a thread of
/// its own; its owner (a data link or data session) sends with send() and
/// receives through the handlers.
class frame_pump {
public:
  /// Called on the pump's thread with each complete frame. May throw
  /// input_error (a frame that does not decode): the connection closes.
  using frame_handler = std::function<void(in_frame)>;
  /// Called once on the pump's thread when it ends by itself: the
  /// peer closed it, it failed, or the peer sent a malformed frame (`why`
  /// says which). Not called after close().
  using close_handler = std::function<void(const std::string& why)>;

  /// Takes over `ch` (after the gate's or dial's preamble) and starts the
  /// thread. `label` names the connection in log lines. A frame of at most
  /// `caller_limit` bytes may be written by the caller of send() itself
  /// (see there): a server passes a small limit, so that its actor's thread
  /// does not spend its time writing large pull replies, which the
  /// pump's thread writes beside it. `shm`: see shm_mode; frames
  /// sent before the ends settled wait in the queue. `frame_bytes`: the
  /// largest frame expected, when this end offers shared memory: each ring
  /// holds two (shm_segment::ring_bytes_for; 0: 2 MiB). `limits`: the largest
  /// frame parts the peer may send (a frame announcing more closes the
  /// connection, through the close handler). `segment`: with
  /// shm_mode::settled, the segment the ends settled on (null: TCP).
  frame_pump(std::unique_ptr<channel> ch, frame_handler on_frame,
             close_handler on_close, std::string label,
             size_t caller_limit = SIZE_MAX, shm_mode shm = shm_mode::none,
             size_t frame_bytes = 0, frame_limits limits = {},
             std::unique_ptr<shm_segment> segment = nullptr);

  /// close(), then waits for the thread, unless called on the thread of a
  /// frame pump (this one's, from a handler, or another's): the thread then
  /// ends by itself, and keeps what it uses alive until it does, so a
  /// handler may drop the last reference to its own pump.
  ~frame_pump();

  frame_pump(const frame_pump&) = delete;
  frame_pump& operator=(const frame_pump&) = delete;

  /// Sends `f` (thread-safe, also from a handler); frames go out in the
  /// order of the calls. Over plain TCP with nothing queued and `f` within
  /// the caller limit, the caller writes what the socket takes at once
  /// (saving the thread's wake-up); the pump's thread writes the
  /// rest. Frames sent after the connection ended are dropped.
  void send(out_frame f);

  /// Ends the connection without calling the close handler; frames that
  /// arrive afterwards are not handed on (one being handed on at that
  /// moment still is).
  void close();

  const std::string& label() const;

  /// Whether the frames go through shared memory (false until the ends
  /// settled, and for TCP).
  bool on_shared_memory() const;

  /// Whether the calling thread is a pump's thread (its
  /// handlers run there).
  static bool on_pump_thread();

private:
  /// The connection's state, shared by this handle and its thread.
  struct state;

  std::shared_ptr<state> s_;
  std::thread thread_;
};

} // namespace actorps
