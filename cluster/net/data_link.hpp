#pragma once

// The data channel between a worker and a parameter server in another
// process (issue 10, `cluster.data_channel`): a TCP connection of its own
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
// the channel closes or fails, or when nobody holds it any more; the
// worker, which monitors it, then sees the server lost and reconnects, as
// over BASP. The server decides everything as for a message over BASP
// (views, fencing, duplicates, staleness), since the frames reach the same
// actor.
//
// Server side: serve_data_channel() answers a connection the gate admitted
// as a data channel (gate::data_handler) with `server`'s answers, until the
// connection closes or `server` is down. A peer that sends a malformed
// frame is logged and its connection closed; the server never sees it.
//
// Both ends on one host: the frames go through shared memory
// (cluster/net/shm_link.hpp, `cluster.shared_memory`), the TCP connection only
// wakes the ends and tells when one is gone.

#include <chrono>
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

/// Opens a data channel to the gate at `where` (with `tls`, whose peer
/// must be `expect`) within `timeout`, for `server` (the actor the same
/// node published there), and returns the worker-side link. `label` names
/// it in log lines ("worker 0 -> ps 1"). With `shared_memory`, the
/// channel offers the server shared memory (cluster/net/shm_offer.hpp), which
/// a server on this host takes; the frames then go through it, in rings
/// sized for frames of `frame_bytes` (the largest dense push or pull
/// expected; 0: 2 MiB; shm_link::ring_bytes_for).
/// @throws runtime_failure naming `where` and why (refused, unreachable).
ps_actor open_data_link(caf::actor_system& sys, ps_actor server,
                        const host_port& where, const tls_context* tls,
                        const node_identity* expect,
                        std::chrono::milliseconds timeout, std::string label,
                        bool shared_memory = true,
                        uint64_t frame_bytes = 0);

/// Serves data channel `ch` (from a gate) with `server`; returns at once.
/// Takes the worker's offer of shared memory if `shared_memory` and it can.
/// With `authorize` and a TLS channel, its certificate decides
/// (cluster/net/authorization.hpp): a worker's pulls and pushes are served
/// only under its own index, any other role's not at all (answered
/// not_authorized, logged), and a worker keeps at most `max_channels`
/// channels to the same server: a newer one closes its oldest (logged). A
/// worker opens one per replica group the server serves (two after the
/// server took over a failed one's group), so a node passes its job's
/// number of servers plus one (a reconnect may overlap its predecessor).
/// Off only where one party plays several workers (actorps-bench).
/// `limits`: the largest frame parts a worker may send this server
/// (frame_limits_for).
void serve_data_channel(caf::actor_system& sys, ps_actor server,
                        std::unique_ptr<channel> ch, std::string label,
                        bool shared_memory = true, bool authorize = true,
                        frame_limits limits = {}, size_t max_channels = 2);

/// The largest frame parts a worker may send a server whose dense region
/// holds at most `region_bytes` (a node passes its job's dense variables):
/// a push of the region (its bulk) with its fields (in compressed formats
/// the meta carries the codes), twice over and 1 MiB more. Pulls and
/// pushes with table rows go over BASP.
frame_limits frame_limits_for(uint64_t region_bytes);

} // namespace actorps
