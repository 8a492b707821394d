#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "actors/messages.hpp"
#include "core/table_policy.hpp"
#include "core/update_rule.hpp"

namespace actorps {

/// One parameter server. It hosts replica groups: group g holds the shards
/// the placement puts on ps index g (its dense shards in one contiguous dense
/// region in creation order, with the dense rule's slots; its table shards
/// as key -> row hash maps with per-row slots and update counts, see
/// core/table_store.hpp) and a clock, the number of updates applied to the
/// group. Without replication, server p hosts group p only, as its primary.
/// With replication (cluster.replicas 1), a server also holds a backup of
/// another group, which it updates only from that group's primary (chain
/// replication); after a failover it may be primary of several groups.
/// Every request names a group and the view of it the sender knows; a
/// server answers only as the group's primary at that view.
using ps_actor = caf::typed_actor<
  // Creates one shard of group `req.group` (the group itself on first use,
  // as its primary at view 0): a dense one is appended to the group's dense
  // region (replies with its float offset there); a table shard is
  // registered under its shard id (replies with 0).
  // Errors: errc::shape_mismatch if values.size() != (row_end - row_begin) *
  // cols, or a table has cols 0 or values, or the shard id is taken.
  caf::replies_to<create_atom, create_shard>::with<uint64_t>,
  // Reads the group's dense region (if asked) and the rows of the keys asked
  // for, for worker `worker` (no_worker: the coordinator, never held back).
  // Replies with the values and the clock they were read at. Under ssp the
  // reply waits while the worker is more than `staleness` pushes ahead of
  // the slowest worker.
  // Errors: errc::no_shards before the first create; errc::unknown_group;
  // errc::stale_view (not the group's primary at that view);
  // errc::unknown_worker (sync, ssp: an index past the job's workers);
  // errc::unknown_variable for a shard id the group
  // does not hold; errc::key_out_of_range (variable, key) for a key outside
  // a table's vocabulary. On error nothing is created.
  caf::replies_to<pull_atom, pull_request>::with<pull_reply>,
  // Applies the dense gradient and the row gradients of every table shard
  // with the server's rules, unless its closure id was applied before (then
  // only the clock is returned). With a backup, the update is forwarded
  // there and the reply waits until the backup has applied it too. Replies
  // with the group's clock after the update. Staleness (clock at arrival
  // minus read_clock) is recorded. Under sync the reply waits until every
  // worker pushed for this round (or the round timed out); the round's mean
  // gradient (dense and per row) is applied once.
  // Errors: errc::unknown_group; errc::stale_view (also when the backup
  // refuses the forward because it was promoted: this server was deposed;
  // the update is then not acknowledged); errc::shape_mismatch if the dense
  // gradient's size differs from the region's or a table's values are not
  // keys x dim floats; errc::unknown_variable; errc::key_out_of_range;
  // errc::bad_message for a key that repeats within one table shard (or a
  // shard named twice), and under sync for a second push of one worker in
  // the same round; errc::unknown_worker. On error nothing changes.
  caf::replies_to<push_atom, push_request>::with<uint64_t>,
  // A backup applies its primary's update (in the order sent) and sets the
  // group's clock to the primary's; ids applied before are skipped. Replies
  // with the clock. Errors: errc::unknown_group; errc::stale_view if this
  // server is not the group's backup at that view (e.g. it was promoted).
  caf::replies_to<replicate_atom, replicate_request>::with<uint64_t>,
  // The coordinator sets this server's role in a group (see
  // replica_config). Replies with true; with a backup to install, once the
  // backup has installed this server's state (else with its error).
  // Errors: errc::unknown_group; errc::stale_view for a view older than the
  // group's.
  caf::replies_to<configure_atom, replica_config>::with<bool>,
  // A planned move (the coordinator's): as the primary of group `group` at
  // view `view`, this server stops applying pushes for it (they wait here)
  // and replies with the group's clock once its backup, the move's target,
  // has applied every update applied here (its install and every forward);
  // an open sync round is closed first. The pushes held are answered
  // stale_view when the group is dropped here (the workers send them again
  // to the new primary), or applied here if the handoff is abandoned: after
  // 10 s (then errc::cancelled) or when the backup is lost (errc::ps_lost).
  // Errors: errc::unknown_group; errc::stale_view (not the group's primary
  // at that view); errc::bad_message (no backup to hand the group to, or a
  // handoff already in progress).
  caf::replies_to<handoff_atom, uint32_t, uint64_t>::with<uint64_t>,
  // Group `group` moved away at view `view` (not older than this server's):
  // what waits here for it is answered stale_view, its values and slots are
  // freed, and later requests naming it are answered stale_view ("moved")
  // until it is created here again. Replies with true.
  // Errors: errc::unknown_group; errc::stale_view for an older view.
  caf::replies_to<drop_atom, uint32_t, uint64_t>::with<bool>,
  // A new backup receives its primary's state for group `group` at view
  // `view` (values, slots, steps, clock, applied ids, ssp clocks). Replies
  // with the clock. Errors: errc::unknown_group; errc::stale_view;
  // errc::shape_mismatch (nothing changes then).
  caf::replies_to<install_atom, uint32_t, uint64_t, ps_snapshot>::with<
    uint64_t>,
  // Replies with the counters of group `group` (and the process's memory).
  // Errors: errc::unknown_group.
  caf::replies_to<stats_atom, uint32_t>::with<ps_stats>,
  // Replies with a copy of everything group `group` holds (dense values,
  // slots and steps, every table shard's rows, clock), for a checkpoint.
  caf::replies_to<save_atom, uint32_t>::with<ps_snapshot>,
  // The same for a checkpoint of a chain (delta checkpoints): when `base` is
  // not 0 and is the token of the group's last mark, each table shard holds
  // only its rows changed since that mark and its tombstones
  // (table_snapshot::delta); otherwise (a full checkpoint, or a server that
  // did not take part in the base: restored, installed, promoted, restarted)
  // every row. Then marks every table shard clean under token `mark`, so
  // that the next delta is relative to this snapshot. The dense region is
  // always whole. Errors: errc::unknown_group.
  caf::replies_to<save_atom, uint32_t, uint64_t, uint64_t>::with<ps_snapshot>,
  // Replaces everything group `group` holds with the snapshot's (a restored
  // checkpoint). Replies with the clock. A sync round in progress is
  // abandoned (its pushes were computed on the state being replaced; their
  // acks fail with errc::cancelled).
  // Errors: errc::unknown_group; errc::shape_mismatch if the dense sizes or
  // the number of slots differ from the group's, or a table snapshot does
  // not fit its shard or names it twice; errc::unknown_variable for a table
  // shard the group does not hold (nothing changes then).
  caf::replies_to<restore_atom, uint32_t, ps_snapshot>::with<uint64_t>,
  // The coordinator's closure ids [first, watermark) have all finished and
  // will not run again: the applied ids among them are forgotten (a later
  // push with such an id counts as a duplicate). `first` is the coordinator's
  // first id: a restarted coordinator's ids lie elsewhere, and its range
  // replaces the old one.
  caf::reacts_to<prune_atom, uint64_t, uint64_t>,
  // Liveness probe. Replies with the server's index.
  caf::replies_to<ping_atom>::with<uint32_t>,
  // Internal (sync): group `group`'s round `round` (the clock it closes at)
  // has waited its timeout; if it is still open, it is closed with the
  // pushes it has.
  caf::reacts_to<caf::flush_atom, uint32_t, uint64_t>,
  // Internal: group `group`'s handoff number `n` has waited its timeout; if
  // it is still waiting, it is abandoned.
  caf::reacts_to<caf::timeout_atom, uint32_t, uint64_t>>;

/// The worker index of pulls that are not a worker's (evaluation, tests).
inline constexpr uint32_t no_worker = std::numeric_limits<uint32_t>::max();

/// How pushes of different workers are combined.
/// - async: each push is applied on arrival (Hogwild-style asynchronous SGD).
/// - sync:  bulk-synchronous (BSP): each server waits for one push from every
///          worker, applies their mean, then acknowledges them all (as TF's
///          SyncReplicasOptimizer). A round that has not heard from every
///          worker within ps_options::round_timeout is closed with the
///          pushes it has (a worker without closures, lost or straggling
///          then joins the next round).
/// - ssp:   stale-synchronous parallel (Ho et al., "More Effective
///          Distributed ML via a Stale Synchronous Parallel Parameter Server",
///          NIPS 2013): pushes apply on arrival, but a worker that has pushed
///          more than `staleness` times more than the slowest worker waits at
///          its next pull.
enum class consistency : uint8_t { async, sync, ssp };

/// Parses "async" | "sync" | "ssp"; throws input_error.
consistency parse_consistency(const std::string& name);

/// The requests of a parameter server's protocol, by kind, for
/// authorization (ps_options::authorize).
enum class ps_request : uint8_t {
  create,
  pull,
  push,
  replicate,
  configure,
  install,
  stats,
  save,
  restore,
  prune,
  ping,
  handoff,
  drop,
};

/// The request's name for people and log lines ("pull", "save", ...).
const char* to_string(ps_request kind);

/// Decides whether the sender of a request may send it: returns an empty
/// string if it may, else why not (for the error and the log line).
/// `worker` is the worker index the request claims (pulls and pushes; else
/// no_worker). Called on the server's thread for every request but its own
/// timers.
using ps_authorizer = std::function<std::string(
  const caf::strong_actor_ptr& sender, ps_request kind, uint32_t worker)>;

/// What a parameter server is spawned with.
struct ps_options {
  /// This server's index in the cluster (for log lines).
  uint32_t index = 0;
  /// The rule applied to the dense region.
  optimizer_config optimizer;
  consistency mode = consistency::async;
  /// Number of workers (sync, ssp: worker indices are below it).
  uint32_t workers = 1;
  /// ssp: the bound s.
  uint64_t staleness = 0;
  /// The rule applied to the rows of table shards.
  optimizer_config table_optimizer{"adagrad", 0.05f, {}};
  /// Admission and eviction of the table shards (default: neither), each
  /// by its variable's policy (table_policies::for_table, picked when the
  /// shard is created), and the rows each push sweeps per shard for a time
  /// to live or an L2 norm.
  table_policies tables;
  uint64_t sweep_rows = 256;
  /// sync: how long a round waits for its last pushes; then it is closed
  /// with the pushes it has (their mean), so that an idle, lost or slow
  /// worker does not stall the others forever (0 = wait forever). ssp: how
  /// long a pull is held for the slowest worker; then it is answered past
  /// the bound, with a warning.
  std::chrono::milliseconds round_timeout{1000};
  /// Replication of this server's groups: 0 = chain (a push is acknowledged
  /// once the backup applied it too); N > 0 = async (acknowledged when the
  /// primary applied it while at most N forwards await the backup; a push
  /// past that waits until the backlog is N again).
  uint32_t replication_lag = 0;
  /// Across processes: connects to parameter server `index` directly (its
  /// gate and handshake) and returns its actor; throws when it cannot. A
  /// primary dials its backup so that forwards do not travel through the
  /// node that named the backup (in CAF 0.17 such indirect routes lost
  /// messages after a restarted server came back). Empty in one process.
  std::function<caf::actor(uint32_t index)> dial;
  /// Across processes: who may send what (cluster/net/authorization.hpp). A
  /// request it refuses is answered with errc::not_authorized (a message
  /// without reply is dropped) and logged with the sender. Empty: every
  /// request is served (one process).
  ps_authorizer authorize;
};

/// Where one replica group is served: by parameter server `index` (its
/// primary) as `ps`, at view `view` (requests must name it).
struct server_route {
  ps_actor ps;
  uint64_t view = 0;
  uint32_t index = 0;
};

/// Spawns a parameter server; its behaviour lives in ps_actor.cpp.
ps_actor spawn_ps(caf::actor_system& sys, ps_options opts);

} // namespace actorps
