#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "actors/messages.hpp"
#include "actors/worker_actor.hpp"

namespace actorps {

/// The coordinator's dispatcher: a FIFO queue of closures and the idle
/// workers. A closure goes to the first idle worker; when its reply comes,
/// the closure's remote_value is completed and the worker takes the next one.
///
/// Two kinds of failure, never mixed:
/// - Node failure. The dispatcher monitors every worker: a closure whose
///   worker dies (or, remote, becomes unreachable) before replying goes back
///   to the front of the queue and the worker leaves service (at-least-once
///   execution, as TensorFlow's ClusterCoordinator). A closure that fails
///   with errc::ps_lost while the lost server is recovered runs again too.
/// - Closure error. Any other error of a closure (errc::step_failed,
///   errc::unknown_function, an error of a pull or push) completes that
///   closure with the error and a text naming the closure, its function and
///   the worker; it is not retried and the worker stays in service. Then
///   every closure of the same epoch (see detail::closure_state) is
///   cancelled: queued ones at once (errc::cancelled), running ones at their
///   next message boundary (`cancel_atom, id` to their worker; a worker whose
///   push was already sent replies with its value, the closure then counts
///   as finished), and ones that arrive later at once, until the facade has
///   raised the error (closures of a later epoch run normally).
///
/// With every worker lost and no restart pending, queued closures wait
/// `no_worker_grace` for a worker to come back (replace_atom), then fail with
/// errc::no_workers (the text says for how long and why each worker was
/// lost); so do closures scheduled while still no worker is in service.
///
/// Parameter servers host replica groups (group g: the shards the placement
/// puts on ps index g; see ps_actor). The dispatcher knows who serves each
/// group and tells the workers (`route_atom`). When a server is lost, each
/// group it was primary of fails over to its backup (the backup is promoted
/// at a new view, which fences the old primary: see replica_config), each
/// group it backed up runs without a backup, and a group left without any
/// copy pauses dispatch. A helper brings the server back (ps_recovery); it
/// then becomes the backup of groups that have none (their primary copies
/// its state to it), and a group without a copy is restored on it from the
/// newest checkpoint (or kept, if it is the same incarnation still holding
/// it). A lost parameter server that cannot be recovered (`abort_atom,
/// error`) ends the job: every queued, running and later closure fails with
/// that error.
///
/// In one process only (closures travel as closure_ptr). Closures still
/// unfinished when the dispatcher stops are cancelled.
using dispatcher_actor = caf::typed_actor<
  // Queues a closure. No reply: the closure state itself is completed.
  caf::reacts_to<schedule_atom, closure_ptr>,
  // Cancels every queued closure and every running one (at its next message
  // boundary); for a facade that goes away.
  caf::reacts_to<cancel_atom>,
  // Takes worker `index` out of service as if it had died (its running
  // closure is re-queued): for workers found unresponsive by other means.
  caf::reacts_to<lost_atom, uint32_t>,
  // The job cannot go on (e.g. a parameter server lost and not recovered):
  // fails every queued and running closure (running ones are cancelled at
  // their next message boundary first) and every later one with `reason`.
  caf::reacts_to<abort_atom, caf::error>,
  // Worker `index` (lost before) is back as `worker`, e.g. a process that
  // joined again; `restarted`: a new incarnation (a restarted process),
  // which is first moved to the data position of its last finished closure.
  // It is watched and takes closures again.
  caf::reacts_to<replace_atom, uint32_t, worker_actor, bool>,
  // Internal: worker `index`'s back-off number `n` is over (it sat out
  // after failing closures with errc::ps_lost for a server that was not
  // being recovered); it takes closures again.
  caf::reacts_to<backoff_atom, uint32_t, uint64_t>,
  // Internal: restart lost worker `index` with the respawn function.
  caf::reacts_to<respawn_atom, uint32_t>,
  // Internal: the no-worker grace period number `n` is over; if still no
  // worker is in service, queued closures fail with errc::no_workers.
  caf::reacts_to<grace_atom, uint64_t>,
  // Internal: parameter server `index` is back as `ps`, holding replicas of
  // the groups listed.
  caf::reacts_to<ps_back_atom, uint32_t, ps_actor, std::vector<uint32_t>>,
  // Internal: parameter server `index` could not be brought back (why).
  caf::reacts_to<ps_gone_atom, uint32_t, std::string>,
  // Internal: group `g`'s replica on server `p` was created (and restored
  // from a checkpoint if `restored`), or failed with the error.
  caf::reacts_to<replica_atom, uint32_t, uint32_t, bool, caf::error>,
  // Copies every group's state from its primary to its backup again (the
  // primaries were restored from a checkpoint).
  caf::reacts_to<install_atom>,
  // Replies with where each replica group is served now (groups without a
  // live copy are left out).
  caf::replies_to<route_atom>::with<std::vector<group_route>>,
  // Parameter server `index` is lost (found by other means, e.g. a remote
  // node's silence): recover it as when its actor goes down.
  caf::reacts_to<ps_lost_atom, uint32_t>,
  // Worker `index` joins the running job as `worker` (an index past every
  // other, or one that left or was lost before): it is watched, learns the
  // routes and takes closures. With dynamic data shards it takes ranges
  // from the queue like any other.
  // Replies with the number of workers in service then.
  // Errors: errc::shape_mismatch if a worker of that index is in service.
  caf::replies_to<enlist_atom, uint32_t, worker_actor>::with<uint32_t>,
  // Worker `index` leaves gracefully (scaled down, or its process got
  // SIGTERM): it gets no closure from now on, finishes the ones it holds
  // (their pushes applied as usual), and then leaves service without being
  // counted lost (nothing re-queued or re-executed, no restart; its actor
  // is no longer watched). Replies, once it holds no closure, with the
  // closures it finished after the request. A worker lost before it is
  // done is lost as usual (its closures go back to the queue) and the
  // reply is the error errc::no_workers.
  // Errors: errc::no_workers if no worker of that index is in service.
  caf::replies_to<leave_atom, uint32_t>::with<uint32_t>,
  // A planned move: every replica parameter server `from` holds moves to
  // server `to` while training goes on, one group at a time (see
  // actors/dispatcher_moves.cpp): no update lost or applied twice. Replies
  // with the number of replicas moved once every move ended.
  // Errors: errc::bad_message, saying why, if refused (a server the job
  // does not have, the same server, `from` lost or holding nothing, `to`
  // lost or leaving) or if a move failed (its group stays where it was).
  caf::replies_to<move_atom, uint32_t, uint32_t>::with<uint32_t>,
  // Parameter server `index` joins the running job as `ps`, holding
  // nothing; replicas can then move to it. Replies with `index`.
  // Errors: errc::bad_message unless `index` is the next server index.
  caf::replies_to<ps_join_atom, uint32_t, ps_actor>::with<uint32_t>,
  // Parameter server `index` leaves the running job: each replica it holds
  // moves to the server holding the fewest (with replication, every group
  // keeps a backup elsewhere), then it is stopped (ps_recovery::retire).
  // Replies with the number of replicas moved.
  // Errors: errc::bad_message if refused (no such server, lost, leaving or
  // left already, or the last parameter server) or if a replica could not
  // move (the server then stays).
  caf::replies_to<ps_drain_atom, uint32_t>::with<uint32_t>,
  // Replies with what the moves of groups so far did: moves ended (of
  // primaries and of backups), floats and table rows they moved, and the
  // longest time pushes to a moving group waited, in microseconds.
  caf::replies_to<move_atom>::with<uint64_t, uint64_t, uint64_t, uint64_t>,
  // Internal: the running move number `n` waited for its group (busy with
  // a failover or a backup being built) and tries again.
  caf::reacts_to<move_atom, uint64_t>>;

/// Makes a new incarnation of worker `index` (in one process).
/// @throws std::exception if it cannot (logged; counts as a restart).
using worker_respawn = std::function<worker_actor(uint32_t index,
                                                  uint32_t incarnation)>;

/// How the dispatcher brings lost parameter servers back and rebuilds their
/// replicas. The functions block, and the dispatcher runs them in helper
/// threads, unless `blocking` is false. Without `bring_back`, a lost server
/// ends the job.
/// Where one replica group is served: its primary and its backup, as
/// server indices (backup -1: none).
struct group_place {
  uint32_t primary = 0;
  int64_t backup = -1;
};

struct ps_recovery {
  /// Brings server `index` back: a new actor in one process, or the process
  /// that joined again (the same incarnation, still holding its replicas, if
  /// it was only paused or cut off). Returns it and the groups it holds.
  /// @throws std::exception if it does not come back in time.
  std::function<std::pair<ps_actor, std::vector<uint32_t>>(uint32_t index)>
    bring_back;
  /// Creates replica group `group`'s shards on `ps` (initial values).
  std::function<void(const ps_actor& ps, uint32_t group)> create_group;
  /// Gives `ps`'s replica of `group` the state of the newest checkpoint.
  /// @throws std::exception if there is none (and the job does not allow
  ///         starting the group again from its initial values).
  std::function<void(const ps_actor& ps, uint32_t group)> restore_group;
  /// Stops server `index` (`ps`), which left the job (drained): in one
  /// process its actor ends, across processes its node exits 0. Must not
  /// block. Empty: it is only forgotten.
  std::function<void(uint32_t index, const ps_actor& ps)> retire;
  /// Backups per group: 0 or 1 (cluster.replicas).
  uint32_t replicas = 0;
  /// Replica groups (cluster.groups; 0: one per server). Group g starts on
  /// server g % n (core/group_balance.hpp), its backup on the next.
  uint32_t groups = 0;
  /// The view every group starts at (see replica_config).
  uint64_t initial_view = 0;
  /// Where each group starts, one per group, when the servers hold them
  /// elsewhere than the default (a coordinator restarted after moves learns
  /// it from the servers). Empty: as `groups` says. A group
  /// without a backup gets one as after a failure. With a placement, a null
  /// server among the dispatcher's servers is one that left the job.
  std::vector<group_place> placement;
  /// True: the functions block (they ask actors and wait), so the
  /// dispatcher runs them in helper threads. False: they only spawn actors
  /// and send messages (a simulation, where every actor runs on one thread
  /// in virtual time, cluster/sim/simulator.hpp); the dispatcher calls them
  /// itself, so their messages reach a server before its own later ones.
  bool blocking = true;
};

/// Spawns the dispatcher over `workers`. With `respawn`, a lost worker is
/// restarted after 100 ms, doubling with each restart of the same index, at
/// most `restart_budget` times per index (supervision in one process).
/// With every worker lost and no restart pending, queued closures wait
/// `no_worker_grace` (from the moment the last one was lost) for one to
/// come back (replace_atom) before they fail with errc::no_workers; 0 fails
/// them at once.
/// The dispatcher watches `servers` (group g of recovery.groups starts with
/// server g % n as its primary and, with recovery.replicas 1, the next
/// server as its backup; with as many groups as servers, server p serves
/// group p; or as recovery.placement says):
/// see above for what happens when one is lost; closures that failed with
/// errc::ps_lost meanwhile run again.
/// Each worker is handed up to `closures_per_worker` closures at once (at
/// least 1): it runs one and queues the others, so that across processes it
/// starts the next without waiting a round trip to the dispatcher; a lost
/// worker's closures all go back to the queue.
dispatcher_actor spawn_dispatcher(
  caf::actor_system& sys, std::vector<worker_actor> workers,
  worker_respawn respawn = nullptr, uint32_t restart_budget = 0,
  std::chrono::milliseconds no_worker_grace = std::chrono::milliseconds{0},
  std::vector<ps_actor> servers = {}, ps_recovery recovery = {},
  uint32_t closures_per_worker = 1);

struct fault_spec;

/// Sends `dispatcher` a planned change of the parameter servers from the
/// job's plan (core/fault_spec.hpp), logged: a move (move_atom) or a leave
/// (ps_drain_atom). Returns false, sending nothing, for anything else: a
/// join's new server is the caller's to start (in this process, or the
/// spec's next node) before it tells the dispatcher (ps_join_atom).
bool send_server_change(const dispatcher_actor& dispatcher,
                        const fault_spec& f);

} // namespace actorps
