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
/// The dispatcher monitors every worker: a closure whose worker dies (or,
/// remote, becomes unreachable) before replying goes back to the front of the
/// queue and the worker leaves service (at-least-once execution, as
/// TensorFlow's ClusterCoordinator). With no worker left, queued closures
/// fail with errc::no_workers. A closure that fails otherwise completes with
/// its error, and every closure still queued is cancelled (errc::cancelled).
using coordinator_actor = caf::typed_actor<
  // Queues a closure. No reply: the closure state itself is completed.
  caf::reacts_to<schedule_atom, closure_ptr>,
  // Cancels every queued closure (running ones finish).
  caf::reacts_to<cancel_atom>,
  // Takes worker `index` out of service as if it had died (its running
  // closure is re-queued): for workers found unresponsive by other means.
  caf::reacts_to<lost_atom, uint32_t>,
  // Fails every running and queued closure with `reason` (e.g. a lost
  // parameter server): the job cannot go on.
  caf::reacts_to<cancel_atom, caf::error>,
  // Worker `index` (lost before) is back as `worker`, e.g. a restarted
  // process that joined again: it is watched and takes closures again.
  caf::reacts_to<replace_atom, uint32_t, worker_actor>,
  // Internal: restart lost worker `index` with the respawn function.
  caf::reacts_to<replace_atom, uint32_t>,
  // Internal: with no worker left for the grace period, queued closures
  // fail with errc::no_workers.
  caf::reacts_to<lost_atom>,
  // Internal: parameter server `index` is recovered as `ps`; the workers
  // switch to it and dispatch resumes.
  caf::reacts_to<restore_atom, uint32_t, ps_actor>,
  // Parameter server `index` is lost (found by other means, e.g. a remote
  // node's silence): recover it as when its actor goes down.
  caf::reacts_to<restore_atom, uint32_t>,
  // Fault injection: every worker (also later restarted ones) drops the
  // share `drop` of its pulls and pushes and delays the share `delay` by
  // `delay_ms`; a negative share leaves that setting as it is.
  caf::reacts_to<chaos_atom, double, double, uint64_t>>;

/// Makes a new incarnation of worker `index` (in one process).
using worker_respawn = std::function<worker_actor(uint32_t index,
                                                  uint32_t incarnation)>;

/// Brings lost parameter server `index` back: a new actor with its shards
/// restored. Blocking; the dispatcher runs it in a helper thread.
/// @throws std::exception if that fails (the job then fails).
using ps_respawn = std::function<ps_actor(uint32_t index)>;

/// Spawns the dispatcher over `workers`. With `respawn`, a lost worker is
/// restarted after 100 ms, doubling with each restart of the same index, at
/// most `restart_budget` times per index (supervision in one process).
/// With every worker lost, queued closures wait `no_worker_grace` for one
/// to come back (replace_atom) before they fail with errc::no_workers.
/// With `recover_ps`, the dispatcher watches `servers`: when one is lost it
/// pauses dispatch, recovers the server, hands it to every worker and
/// resumes; closures that failed with errc::ps_lost meanwhile run again.
coordinator_actor spawn_coordinator(
  caf::actor_system& sys, std::vector<worker_actor> workers,
  worker_respawn respawn = nullptr, uint32_t restart_budget = 0,
  std::chrono::milliseconds no_worker_grace = std::chrono::milliseconds{0},
  std::vector<ps_actor> servers = {}, ps_respawn recover_ps = nullptr);

} // namespace actorps
