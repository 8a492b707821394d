#pragma once

#include <cstdint>
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
  caf::reacts_to<cancel_atom, caf::error>>;

/// Spawns the dispatcher over `workers`.
coordinator_actor spawn_coordinator(caf::actor_system& sys,
                                    std::vector<worker_actor> workers);

} // namespace actorps
