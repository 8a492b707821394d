#pragma once

// Who may send what to a node of a cluster of processes (the coordinator's
// role is "chief").
//
// The gate admits a connection (with TLS: a certificate of the cluster's CA
// whose role may dial this node), and a peer's hello redeems its ticket: from
// then on this node knows the peer's CAF node by the identity its
// certificate names (peer_registry). Every request a node's actors get from
// another process is checked against that identity:
//
//   sender        | node actor              | parameter server
//   --------------+-------------------------+------------------------------
//   chief         | hello (as the chief),   | create, pull (any worker),
//                 | shutdown, ping, and the | configure, install, stats,
//                 | faults of its job plan  | save, restore, prune, ping,
//                 |                         | handoff, drop (a planned move)
//   worker        | hello, ping             | pull, push (its own index
//                 |                         | only; a pull also as no
//                 |                         | worker), ping
//   ps            | hello, ping             | replicate, install, ping
//   evaluator     | nothing                 | nothing
//   no hello yet  | hello                   | nothing
//
// Actors of the node's own process (its data-channel sessions, its timers)
// may send anything. Without TLS a hello's role is taken as claimed: the
// table then keeps honest nodes from mistakes, not an attacker out.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "caf/node_id.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/net/basp_guard.hpp"
#include "cluster/net/tls.hpp"

namespace actorps {

/// What a peer's admitted hello established about it (with TLS: the role
/// and index of its certificate).
struct peer_identity {
  std::string role;
  uint32_t index = 0;
  uint64_t incarnation = 0;
};

/// "worker 1 (incarnation 3)", for log lines.
std::string to_string(const peer_identity& id);

/// The peers of one node by CAF node id, as their admitted hellos
/// introduced them. Thread-safe (the node actor writes, the role's actors
/// read).
class peer_registry {
public:
  /// Records that node `peer` is `id`. One process per identity: another
  /// node that held the same role and index is forgotten (its requests are
  /// refused from now on; the newer process wins, as a restarted worker's
  /// must) and returned, for the caller's log line.
  std::optional<caf::node_id> admit(const caf::node_id& peer,
                                    const peer_identity& id);

  /// The identity of node `peer`, if it was admitted and not displaced.
  std::optional<peer_identity> find(const caf::node_id& peer) const;

private:
  mutable std::mutex mtx_;
  std::map<caf::node_id, peer_identity> peers_;
};

/// What a peer may announce in BASP (cluster/net/basp_guard.hpp) to a node of
/// a job whose dense variables take `dense_bytes`: any peer a handshake of
/// at most 1 MiB; a worker (its certificate says so) messages of at most
/// twice the dense variables plus 64 MiB (its largest, a push, carries one
/// server's dense gradient and the rows of one batch); the coordinator and
/// the servers, whose checkpoint and replication messages carry whole
/// tables, CAF's own limit. Without a certificate (no TLS) nobody is
/// authenticated and a peer may be any of them: only its handshake is
/// bounded.
basp_limits basp_limits_for(const std::optional<node_identity>& peer,
                            uint64_t dense_bytes);

/// Whether a peer of role `role` may send a parameter server request
/// `kind` (the table above).
bool may_send(const std::string& role, ps_request kind);

/// Why a peer of role `role` and index `index` may not send a parameter
/// server request `kind` in the name of worker `worker`, or "" if it may:
/// the table above, and a worker pulls and pushes only under its own index
/// (a pull also as no_worker: a read outside the clocks, as the wire-format
/// probe's). The one rule for BASP (authorize_ps_requests) and data
/// channels (cluster/net/data_link.cpp); the caller names the sender.
std::string request_refusal(const std::string& role, uint32_t index,
                            ps_request kind, uint32_t worker);

/// The authorizer of a parameter server in the process of node `self`:
/// actors of that process may send anything; another process only what
/// its identity in `peers` may send (a worker pulling or pushing only under
/// its own index); an anonymous sender or an unknown node nothing.
ps_authorizer authorize_ps_requests(std::shared_ptr<const peer_registry> peers,
                                    caf::node_id self);

} // namespace actorps
