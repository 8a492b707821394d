#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "actors/messages.hpp"
#include "core/update_rule.hpp"

namespace actorps {

/// One parameter server. Holds the dense shards placed on it in one
/// contiguous dense region (creation order) with the dense update rule's
/// slots, the table shards placed on it (key -> row hash maps with per-row
/// slots and step counts, see core/table_store.hpp), and a clock: the number
/// of updates applied so far.
using ps_actor = caf::typed_actor<
  // Creates one shard: a dense one is appended to the dense region (replies
  // with its float offset there); a table shard is registered under its
  // shard id (replies with 0).
  // Errors: errc::shape_mismatch if values.size() != (row_end - row_begin) *
  // cols, or a table has cols 0 or values, or the shard id is taken.
  caf::replies_to<create_atom, create_shard>::with<uint64_t>,
  // Reads the dense region (if asked) and the rows of the keys asked for,
  // for worker `worker` (no_worker: the coordinator, never held back).
  // Replies with the values and the clock they were read at. Under ssp the
  // reply waits while the worker is more than `staleness` pushes ahead of
  // the slowest worker.
  // Errors: errc::no_shards before the first create; errc::unknown_worker;
  // errc::unknown_variable for a shard id the server does not hold;
  // errc::key_out_of_range (variable, key) for a key outside a table's
  // vocabulary. On error nothing is created.
  caf::replies_to<pull_atom, pull_request>::with<pull_reply>,
  // Applies the dense gradient and the row gradients of every table shard
  // with the server's rules, unless its update id was applied before (then
  // only the clock is returned). Replies with the server clock after the
  // update. Staleness (clock at arrival minus read_clock) is recorded. Under
  // sync the reply waits until every worker pushed for this round; the
  // round's mean gradient (dense and per row) is applied once.
  // Errors: errc::shape_mismatch if the dense gradient's size differs from
  // the region's or a table's values are not keys x dim floats;
  // errc::unknown_variable; errc::key_out_of_range; errc::bad_message for
  // a key that repeats within one table shard (or a shard named twice), and
  // under sync for a second push of one worker in the same round;
  // errc::unknown_worker. On error nothing changes.
  caf::replies_to<push_atom, push_request>::with<uint64_t>,
  // Replies with the server's counters.
  caf::replies_to<stats_atom>::with<ps_stats>,
  // Replies with a copy of everything the server holds (dense values, slots
  // and steps, every table shard's rows, clock), for a checkpoint.
  caf::replies_to<save_atom>::with<ps_snapshot>,
  // Replaces everything the server holds with the snapshot's (a restored
  // checkpoint). Replies with the clock.
  // A sync round in progress is abandoned (its pushes were computed on the
  // state being replaced; their acks fail with errc::cancelled).
  // Errors: errc::shape_mismatch if the dense sizes or the number of slots
  // differ from the server's, or a table snapshot does not fit its shard or
  // names it twice; errc::unknown_variable for a table shard the server does
  // not hold (nothing changes then).
  caf::replies_to<restore_atom, ps_snapshot>::with<uint64_t>,
  // Fault injection: the server stops answering for `ms` milliseconds (its
  // thread blocks, as a hung process would).
  caf::reacts_to<freeze_atom, uint64_t>,
  // Liveness probe. Replies with the server's index.
  caf::replies_to<ping_atom>::with<uint32_t>,
  // Internal (sync): sync round `round` (the clock it closes at) has waited
  // its timeout; if it is still open, it is closed with the pushes it has.
  caf::reacts_to<caf::flush_atom, uint64_t>>;

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
  /// sync: how long a round waits for its last pushes; then it is closed
  /// with the pushes it has (their mean), so that an idle, lost or slow
  /// worker does not stall the others forever (0 = wait forever).
  std::chrono::milliseconds round_timeout{1000};
};

/// Spawns a parameter server; its behaviour lives in ps_actor.cpp.
ps_actor spawn_ps(caf::actor_system& sys, ps_options opts);

} // namespace actorps
