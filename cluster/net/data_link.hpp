#pragma once

// The data channel between a worker and a parameter server in another
// process (`cluster.data_channel`): a TCP connection of its own
// beside CAF's BASP, through the same gate, TLS and role checks, that
// carries only the worker's pulls and pushes and their answers, as frames
// (cluster/net/data_frame.hpp) that move dense floats from where they lie to
// where they stay. Everything else (create, stats, checkpoints, routes,
// heartbeats) still goes over BASP.
//
// Worker side: open_data_link() returns an actor with the server's
// interface that the worker uses in place of the server's handle: pulls
// and pushes go over the data channel, every other message to the server.
// It ends (and with it the channel) when the server's actor is down, when
// the channel closes or fails with requests outstanding, or when nobody
// holds it any more; the worker, which monitors it, then sees the server
// lost and reconnects, as over BASP. A channel idle for a while is closed
// (by the worker first, by the server if the worker does not) and opened
// again at the next request: an idle channel costs the server no thread. The server decides everything as for a message over BASP
// (views, fencing, duplicates, staleness), since the frames reach the same
// actor.
//
// Server side: serve_data_channel() answers a connection the gate admitted
// as a data channel (gate::data_handler) with `server`'s answers, until the
// connection closes or `server` is down. A peer that sends a malformed
// frame is logged and its connection closed; the server never sees it.
//
// Both ends on one host: the frames go through shared memory
// (cluster/net/shm_segment.hpp, `cluster.transport`), the TCP connection
// only wakes the ends and tells when one is gone.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "caf/fwd.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/net/data_frame.hpp"

namespace actorps {

class channel;
class tls_context;
struct host_port;
struct node_identity;

/// Which way a data channel's frames go (`cluster.transport`).
enum class link_transport : uint8_t {
  /// Through shared memory when the server takes the worker's offer (both on
  /// one host, same user, shared memory not off there), else over TCP.
  automatic,
  /// Over the TCP connection (TLS where it is on); no offer.
  tcp,
  /// Through shared memory or not at all: a server that declines the offer
  /// fails open_data_link() with an input_error naming why.
  shm,
};

/// "auto", "tcp" or "shm". @throws input_error naming the choices.
link_transport parse_link_transport(const std::string& name);

/// Worker-side channels open in this process by the way their frames go
/// (each counted once, from the settling of its ends until it closes): what
/// a worker reports with its steps so that the job's summary says which
/// transport each link took.
struct link_census {
  uint32_t shm = 0;
  uint32_t tcp = 0;
};
link_census data_link_census();

/// How a worker's end of a data channel behaves.
struct data_link_options {
  /// Whether to offer the server shared memory (cluster/net/shm_offer.hpp),
  /// which a server on this host takes; the frames then go through it, in
  /// rings sized for frames of `frame_bytes` (the largest dense push or
  /// pull expected; 0: 2 MiB; shm_segment::ring_bytes_for).
  link_transport transport = link_transport::automatic;
  uint64_t frame_bytes = 0;
  /// With nothing outstanding and no request for this long, the link
  /// closes its channel (the server's thread for it ends) and opens it
  /// again at the next request; 0: never. A node passes half the server's
  /// idle timeout (data_session_options), so that a live worker closes
  /// first and a request never meets a server closing the channel.
  std::chrono::milliseconds idle_close{0};
};

/// Opens a data channel to the gate at `where` (with `tls`, whose peer
/// must be `expect`) within `timeout`, for `server` (the actor the same
/// node published there), and returns the worker-side link. `label` names
/// it in log lines ("worker 0 -> ps 1"). A channel closed with nothing
/// outstanding (idle, by either end) is opened again at the next request,
/// within `timeout` (`tls` must outlive the link); if that fails, the link
/// logs why and passes its requests to `server` over BASP. A channel that
/// ends with requests outstanding ends the link (its requests fail with
/// sec::socket_disconnected): the worker handles it as a lost server.
/// The ends settle on shared memory or TCP before it returns (one round
/// trip), and the link logs which.
/// @throws runtime_failure naming `where` and why (refused, unreachable);
///         input_error with link_transport::shm if the server declines
///         shared memory (why: another host or network namespace, another
///         user, or transport tcp there).
ps_actor open_data_link(caf::actor_system& sys, ps_actor server,
                        const host_port& where, const tls_context* tls,
                        const node_identity* expect,
                        std::chrono::milliseconds timeout, std::string label,
                        data_link_options opts = {});

/// How a server's end of a data channel behaves.
struct data_session_options {
  /// Take the worker's offer of shared memory if it can.
  bool shared_memory = true;
  /// With a TLS channel, its certificate decides (cluster/net/authorization.hpp):
  /// a worker's pulls and pushes are served only under its own index, any
  /// other role's not at all (answered not_authorized, logged). Off only
  /// where one party plays several workers (actorps-bench).
  bool authorize = true;
  /// The largest frame parts a worker may send this server
  /// (frame_limits_for).
  frame_limits limits = {};
  /// With `authorize`, a worker keeps at most this many channels to the
  /// same server: a newer one closes its oldest (logged). A worker opens
  /// one per replica group the server serves (two after the server took
  /// over a failed one's group), so a node passes its job's number of
  /// servers plus one (a reconnect may overlap its predecessor).
  size_t max_channels = 2;
  /// With no request outstanding and none arriving for this long, the
  /// session closes the channel (logged), which ends its thread; 0: never.
  /// A frame in progress is bounded by limits.frame_timeout instead.
  std::chrono::milliseconds idle_timeout{0};
};

/// Serves data channel `ch` (from a gate) with `server`; returns at once.
/// `label` names it in log lines ("ps 0 <- worker1").
void serve_data_channel(caf::actor_system& sys, ps_actor server,
                        std::unique_ptr<channel> ch, std::string label,
                        data_session_options opts = {});

/// The largest frame parts a worker may send a server whose dense region
/// holds at most `region_bytes` (a node passes its job's dense variables):
/// a push of the region (its bulk) with its fields (in compressed formats
/// the meta carries the codes), twice over and 1 MiB more. Pulls and
/// pushes with table rows go over BASP.
frame_limits frame_limits_for(uint64_t region_bytes);

} // namespace actorps
