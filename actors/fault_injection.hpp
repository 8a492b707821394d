#pragma once

// Fault injection as wrappers around the production actors: the
// parameter server and the worker implement only the real protocol; a
// stopped (frozen) node, dropped or delayed messages and a failing step are
// added from outside, only to the actors a job injects faults into.
//
// - A *ps proxy* is an actor in front of a parameter server: it forwards
//   every request (the server answers the requester directly), and it can
//   stop answering for a while (freeze) or hold a share of the workers'
//   pulls and pushes back (chaos: dropped ones reach the server after the
//   retry timeout, as a sender that timed out would send them again;
//   delayed ones after the delay). It is linked to its server: either dying
//   takes the other along, so a kill of either is seen as the server's loss.
// - A *worker proxy* does the same in front of a worker (freeze only).
// - A *failing model* wraps a model: once armed (step_error_switch), its
//   next loss_and_gradient throws, as a model would on a bad batch.

#include <atomic>
#include <cstdint>
#include <memory>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "actors/worker_actor.hpp"

namespace actorps {

class model;

/// A parameter server behind a proxy: the server's protocol plus the faults.
using faulty_ps_actor = ps_actor::extend<
  // The proxy (and with it the server, for everyone who talks to it through
  // the proxy) stops answering for `ms` milliseconds: its thread blocks, as
  // a hung process would.
  caf::reacts_to<freeze_atom, uint64_t>,
  // From now on, hold back the share `drop` of pulls and pushes for the
  // retry timeout (200 ms) and the share `delay` for `delay_ms`
  // milliseconds; a negative share leaves that setting as it is.
  caf::reacts_to<chaos_atom, double, double, uint64_t>,
  // Internal: forward held pull or push number `n` now.
  caf::reacts_to<release_atom, uint64_t>>;

/// A worker behind a proxy.
using faulty_worker_actor = worker_actor::extend<
  // As for the ps proxy.
  caf::reacts_to<freeze_atom, uint64_t>>;

/// Puts a proxy in front of `ps` (see above); `index` names it in logs.
faulty_ps_actor spawn_ps_proxy(caf::actor_system& sys, ps_actor ps,
                               uint32_t index);

/// Puts a proxy in front of `worker` (see above).
faulty_worker_actor spawn_worker_proxy(caf::actor_system& sys,
                                       worker_actor worker);

/// Arms a failing model: the next step of the worker that uses it throws.
/// Shared by the model and whoever injects the fault; thread-safe.
struct step_error_switch {
  std::atomic<bool> armed{false};
};

/// `net` with step errors injected through `sw`: every call is forwarded,
/// except that loss_and_gradient throws std::runtime_error ("injected step
/// error (fault error:worker:`worker`)") once each time `sw` is armed.
std::shared_ptr<const model> failing_model(std::shared_ptr<const model> net,
                                           std::shared_ptr<step_error_switch> sw,
                                           uint32_t worker);

} // namespace actorps
