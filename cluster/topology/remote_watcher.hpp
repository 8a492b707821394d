#pragma once

// The coordinator's watcher of the nodes of a multi-process cluster
// (remote_cluster): liveness, loss, rejoin, and a worker's graceful leave.

#include <chrono>
#include <memory>
#include <vector>

#include "caf/actor.hpp"
#include "caf/fwd.hpp"

#include "actors/messages.hpp"

namespace actorps {

struct cluster_member;
struct node_table;

/// Watches every node of the cluster for the coordinator: pings each one
/// every `interval`; a node silent for half of `timeout` is *suspected*
/// (a warning naming it and how long it has been silent), one silent for
/// `timeout`, or reported down by CAF, is *lost*. CAF's own heartbeats alone
/// took about 3 s to report a stopped node while data was flowing to it (1 s
/// when idle); the pings answer within the timeout either way. A lost worker
/// leaves service (its closure is re-queued); a lost ps is recovered (see
/// remote_cluster). The watcher is also the actor the nodes watch to notice a
/// lost coordinator.
///
/// When the coordinator itself did not run for longer than `timeout` (its
/// process was paused or swapped out), the silence it sees is its own: the
/// clocks of its peers start again instead of counting against them.
///
/// A lost worker is asked to join again (e.g. `actorps launch` restarted its
/// process, or it was only paused): every 0.5 s a detached helper dials its
/// address and says hello; once it answers, the dispatcher takes it back,
/// told whether it is a new incarnation (restarted: its data position is
/// gone).
///
/// A worker that leaves gracefully (its node sends `leave_atom, index`
/// after a SIGTERM, or the coordinator asks it to: leave_worker) is let go
/// by the dispatcher once it finished the closures it holds; the watcher
/// then stops watching it (it is not lost, nothing is re-executed) and
/// answers its node with the closures it finished, and the node exits 0.
/// Only the node of that worker may ask (the sender must be its node
/// actor, joined over its own authenticated connection).
///
/// Messages: (caf::actor node, std::string name, std::string role, uint32_t
/// index) watches a joined node; (dispatcher_actor) is the dispatcher to
/// tell; (leave_atom, uint32_t index) -> uint32_t as above;
/// (enlist_atom, handshake, caf::actor node, caf::actor worker) ->
/// caf::actor: a worker that joins the running job, from the join desk
/// (this process only; see spawn_join_desk): watched, added to the node
/// table and enlisted with the dispatcher; replies with the watcher, the
/// worker node's coordinator from then on (errc::handshake_refused if that
/// index is in the job); (shutdown_atom) stops reacting to losses (the job
/// ends).
caf::actor spawn_remote_watcher(caf::actor_system& sys,
                                std::chrono::milliseconds interval,
                                std::chrono::milliseconds timeout,
                                std::vector<cluster_member> members,
                                handshake mine,
                                std::shared_ptr<node_table> table);

/// The coordinator's join desk: the actor its gate publishes at the
/// coordinator's address (the spec's chief) for workers that join a running
/// job (`actorps node --role worker --join ADDRESS`). It checks a joiner as
/// a node checks a coordinator's hello: with TLS the hello's ticket must be
/// the one the gate issued for a certificate naming that worker; the job
/// (fingerprint, protocol, build) must be `mine`'s; only a worker joins.
/// Then it asks `watcher` to take the worker.
/// Message: (enlist_atom, handshake, caf::actor node, caf::actor worker) ->
/// caf::actor (the watcher). Errors: errc::handshake_refused with the
/// reason.
caf::actor spawn_join_desk(caf::actor_system& sys, handshake mine,
                           caf::actor watcher);

} // namespace actorps
