#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "caf/actor.hpp"
#include "caf/actor_control_block.hpp"
#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "actors/messages.hpp"
#include "core/exit_codes.hpp"

namespace actorps {

class peer_registry;

/// The actor a node publishes at its address: it answers handshakes and
/// carries the node's lifetime. A ps or worker process runs while its node
/// actor runs.
using node_actor = caf::typed_actor<
  // A peer introduces itself; `chief` is the chief's watcher actor when the
  // peer is the chief (the node then watches it), else null. Replies with
  // this node's handshake and the actor of its role.
  // Errors: errc::handshake_refused when protocol, build or job differ (the
  // context lists each difference; the node logs the same), when
  // `authorize` refuses the peer (with TLS: its certificate names another
  // node than the handshake), when a peer other than the coordinator
  // (role chief) names a `chief`, or (with node_options::peers) when the
  // hello has no sender.
  //
  // With node_options::peers, every message but hello is authorized by its
  // sender (cluster/net/authorization.hpp): shutdown and the fault-injection
  // messages only from the coordinator that joined (and a fault only if the
  // job's fault plan names it for this node), ping from an admitted peer;
  // anything else is refused (errc::not_authorized where a reply is due)
  // and logged with the sender.
  caf::replies_to<hello_atom, handshake, caf::actor>::with<node_welcome>,
  // The coordinator ends the job: the node stops with exit status 0 if
  // `status` is 0 (the job succeeded), else exit_job_failed. Replies with
  // the node's index once its actors are told to stop.
  caf::replies_to<shutdown_atom, int32_t>::with<uint32_t>,
  // Liveness probe of the coordinator. Replies with the node's index.
  caf::replies_to<ping_atom>::with<uint32_t>,
  // Fault injection: the node's process kills itself with SIGKILL.
  caf::reacts_to<kill_atom>,
  // Fault injection: the node's process stops itself (SIGSTOP) for `ms`
  // milliseconds; a helper process it forks sends the SIGCONT.
  caf::reacts_to<freeze_atom, uint64_t>,
  // Fault injection: a worker's next step throws (node_options::faults).
  caf::reacts_to<fail_atom>,
  // Fault injection: a ps holds back the share `drop` of the pulls and
  // pushes it gets for the retry timeout and the share `delay` for
  // `delay_ms` (node_options::faults; a negative share leaves that setting).
  caf::reacts_to<chaos_atom, double, double, uint64_t>,
  // Internal: fires once `join_timeout` after the start; stops the node with
  // status 1 if no coordinator has joined by then.
  caf::reacts_to<caf::tick_atom>,
  // A graceful leave of a worker (its process got SIGTERM), from this
  // process only: asks the coordinator that joined to let this worker go
  // (it gets no new closure and finishes the ones it holds); once it has,
  // replies with the closures finished meanwhile and stops the node with
  // status 0.
  // Errors: errc::no_workers if this node is no worker, no coordinator
  // joined, or the coordinator refused or did not answer within
  // `join_timeout` (the node then serves on); errc::not_authorized from
  // another process.
  caf::replies_to<leave_atom>::with<uint32_t>,
  // A worker that joined a running job through the coordinator's join desk
  // (it dialed the coordinator; nobody dials it): `chief` (the watcher the
  // desk answered with) is this node's coordinator from now on, as if it
  // had said hello. From this process only; logged and dropped otherwise.
  caf::reacts_to<enlist_atom, caf::actor>>;

// exit_job_failed (3), the status of a node the coordinator stopped at the
// end of a failed job, lives in core/exit_codes.hpp with the other codes:
// `actorps launch` does not start such a node again (it restarts nodes that
// die: another non-zero status, or a signal).

/// What a node actor is spawned with.
struct node_options {
  /// This node's own handshake (role, index, job).
  handshake self;
  /// The ps or worker actor that peers get in the welcome.
  caf::strong_actor_ptr role_actor;
  /// How long to wait for the coordinator's first hello, and, after the
  /// coordinator is lost, for a new one.
  std::chrono::milliseconds join_timeout{30000};
  /// Set before the node actor quits: the process's exit status.
  std::shared_ptr<std::atomic<int>> exit_status;
  /// Who introduced itself (cluster/net/authorization.hpp), shared with the
  /// role's actors. Null: no message is authorized by its sender (actors
  /// composed in one process, tests).
  std::shared_ptr<peer_registry> peers;
  /// Checks a peer's handshake before anything else (with TLS, its ticket
  /// against the certificate of its connection): returns why it is refused,
  /// or an empty string. Unset: every peer with a matching job is admitted.
  std::function<std::string(const handshake&)> authorize;
  /// What fault injection was put around the role actor
  /// (actors/fault_injection.hpp), for the faults of the job's config only:
  /// nothing for a fault it does not name (the node says so).
  struct fault_hooks {
    /// A worker's failing model: arms it.
    std::function<void()> arm_step_error;
    /// A ps proxy (the role actor then), which takes chaos_atom.
    caf::actor ps_proxy;
    /// Whether the job's fault plan kills or stops (SIGSTOP) this node:
    /// kill_atom and freeze_atom are refused otherwise.
    bool kill = false;
    bool freeze = false;
  } faults;
};

/// Spawns a node actor; its behaviour lives in node_actor.cpp.
node_actor spawn_node(caf::actor_system& sys, node_options opts);

} // namespace actorps
