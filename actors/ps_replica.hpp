#pragma once

// One replica group on one parameter server: the shards the placement puts on
// one ps index, their values and optimizer state, the clock and the applied
// update ids (actors/ps_actor.cpp routes messages here).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "caf/actor.hpp"
#include "caf/error.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "core/table_store.hpp"
#include "core/update_rule.hpp"

namespace actorps {

/// The row gradients of one table shard summed over a sync round.
struct round_rows {
  std::vector<uint64_t> keys;
  std::vector<float> sums;
  absl::flat_hash_map<uint64_t, uint32_t> index;
};

/// The state of one replica group on one server.
///
/// Role: a *primary* serves pulls and pushes of its group; with a backup it
/// forwards every update there (chain replication). A *backup* applies only
/// its primary's forwards, in their order, so both copies hold the same
/// values. `view` counts the group's role changes (set by the chief's job
/// setup or the dispatcher's failover); a request naming another view is
/// refused (errc::stale_view).
struct ps_replica {
  uint32_t group = 0;
  uint64_t view = 0;
  bool primary = true;
  /// The backup this primary forwards to (null: none).
  caf::actor backup;
  /// Update ids of forwards the backup has not acknowledged yet, with the
  /// promises of the pushes waiting for them.
  struct forward {
    uint64_t seq = 0;
    std::vector<caf::typed_response_promise<uint64_t>> acks;
    uint64_t clock = 0;
  };
  std::vector<forward> forwards;
  uint64_t next_forward = 0;
  /// The install of the backup's copy awaits the backup's answer.
  bool installing = false;
  // -- a planned move (actors/ps_move.hpp) ------------------------------------------
  /// Handing the group over to its backup: pushes wait in held_pushes
  /// (since fenced_at, for the log line).
  bool handing_off = false;
  std::chrono::steady_clock::time_point fenced_at;
  /// Names the current handoff (for its timer), and its reply (pending
  /// from the coordinator's request): the clock once the backup has every
  /// update applied here.
  uint64_t handoff_number = 0;
  std::vector<caf::typed_response_promise<uint64_t>> handoff_replies;
  struct held_push {
    push_request req;
    caf::typed_response_promise<uint64_t> promise;
  };
  std::vector<held_push> held_pushes;
  // -- values ---------------------------------------------------------------------
  dense_region dense;
  uint64_t dense_shards = 0;
  std::map<uint32_t, table_store> tables; ///< by shard id
  /// The token of the last checkpoint mark of every table shard
  /// (save_and_mark); 0: not marked since the tables were created or
  /// replaced (a restore or an install), so no delta can be given.
  uint64_t marked = 0;
  /// The table shards' admission and eviction, by variable
  /// (ps_options::tables; a shard keeps the policy it was created with:
  /// table_store::policy()), and the rows each push sweeps per shard (0: no
  /// table sweeps).
  table_policies policies;
  uint64_t sweep_rows = 0;
  /// Each table shard with a budget: its row limit; and whether this replica
  /// warned that a shard is nearly full (once: the first shard at 90%).
  std::map<uint32_t, uint64_t> row_limits;
  bool budget_warned = false;
  uint32_t server = 0; ///< this server's index, for its log lines
  ps_stats stats;
  /// Closure ids of the pushes applied (each at most once); ids in
  /// [pruned_first, watermark) were pruned (their closures all finished): a
  /// push with such an id is a late duplicate.
  std::set<uint64_t> applied;
  uint64_t pruned_first = 0;
  uint64_t watermark = 0;
  /// Pushes in pieces of which some arrived, by closure id: the runs of the
  /// region applied so far (actors/ps_pieces.hpp).
  struct partial_push {
    uint64_t step = 0;      ///< the dense region's step its runs apply with
    uint64_t staleness = 0; ///< the update's, taken at its first piece
    uint64_t covered = 0;   ///< floats of the region applied
    std::vector<std::pair<uint64_t, uint64_t>> runs; ///< (offset, floats)
  };
  std::map<uint64_t, partial_push> partial;
  // -- sync -----------------------------------------------------------------------
  std::vector<float> round_sum;
  std::map<uint32_t, round_rows> round_tables;
  std::vector<bool> pushed_this_round;
  std::vector<update_id> round_ids;
  std::vector<caf::typed_response_promise<uint64_t>> round_acks;
  // -- ssp ------------------------------------------------------------------------
  std::vector<uint64_t> worker_clock; ///< pushes applied per worker
  struct held_pull {
    pull_request req;
    caf::typed_response_promise<pull_reply> promise;
    uint64_t seq = 0; ///< names it for its timeout
  };
  std::vector<held_pull> held_pulls;
  uint64_t next_hold = 1;

  ps_replica(uint32_t g, const ps_options& opts,
             std::shared_ptr<const update_rule> dense_rule);

  /// Whether closure id `closure` was applied (or pruned as finished).
  bool was_applied(uint64_t closure) const {
    return (closure >= pruned_first && closure < watermark)
           || applied.count(closure) > 0;
  }
};

/// The replica's counters with its table shards' counts added: summed into
/// the table_* fields and by table (ps_stats::tables).
ps_stats replica_stats(const ps_replica& r);

/// Checks the table parts of a pull or push against `r`: every shard held,
/// keys inside the vocabulary, and (`values`: a push) each shard once, keys
/// x dim values and no key twice.
caf::error check_tables(ps_replica& r, const std::vector<table_rows>& tables,
                        bool values, uint32_t ps_index);

/// Reads what `req` asks for (the dense region, table rows). The dense
/// values are copied into `values`, or with `share` (for a reader in
/// another process, whose reply is only serialised) handed out as the
/// region's snapshot in `shared_values`.
pull_reply read_replica(ps_replica& r, const pull_request& req,
                        bool share = false);

/// Applies `update` (dense gradient and table rows), each multiplied by
/// `scale`, with the replica's rules.
/// `dense_step` and `table_step` scale the change of the dense region's and
/// the table rows' steps (staleness-aware steps; 1 = the whole step).
void apply_update(ps_replica& r, const push_request& update, float scale,
                  float dense_step = 1.0f, float table_step = 1.0f);

/// Adds one push to the sync round's sums.
void add_to_round(ps_replica& r, const push_request& req);

/// The sync round's sum as one update (apply with scale 1 / pushes).
push_request round_update(ps_replica& r);

/// Everything the replica holds; with `replication`, also the applied ids,
/// push count and ssp clocks (an install on a new backup).
ps_snapshot save_replica(const ps_replica& r, bool replication);

/// For a checkpoint of a chain: save_replica(r, false), except that with
/// `base` != 0 and equal to r.marked each table shard gives only its rows
/// changed since the mark and its tombstones (table_snapshot::delta). Then
/// marks every table shard clean and sets r.marked to `mark`.
ps_snapshot save_and_mark(ps_replica& r, uint64_t base, uint64_t mark);

/// Replaces the replica's state with `snap` (checked whole first; nothing
/// changes on error). With `replication` the applied ids, push count and ssp
/// clocks come from `snap`; without (a checkpoint) the ids are forgotten.
caf::error restore_replica(ps_replica& r, ps_snapshot& snap, bool replication,
                           const std::shared_ptr<const update_rule>& table_rule,
                           consistency mode, uint32_t ps_index);

/// Creates one shard in the replica (see ps_actor's create_atom).
caf::result<uint64_t>
create_in_replica(ps_replica& r, create_shard& req,
                  const std::shared_ptr<const update_rule>& table_rule);

/// Forgets the applied ids in [first, watermark): they count as applied from
/// now on (see ps_actor's prune_atom).
void prune_replica(ps_replica& r, uint64_t first, uint64_t watermark);

} // namespace actorps
