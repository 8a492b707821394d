#pragma once

#include <cstdint>
#include <limits>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "actors/messages.hpp"
#include "core/optimizer.hpp"

namespace actorps {

/// One parameter server. Holds the shards placed on it in one contiguous
/// buffer (creation order), the optimizer slots for them, and a clock: the
/// number of updates applied so far.
using ps_actor = caf::typed_actor<
  // Appends one shard with its initial values. Replies with the shard's float
  // offset in the server's buffer.
  // Errors: errc::shape_mismatch if values.size() != (row_end - row_begin) * cols.
  caf::replies_to<create_atom, create_shard>::with<uint64_t>,
  // Reads every shard for worker `worker` (no_worker: for the coordinator,
  // never held back). Replies with the values and the clock they were read
  // at. Under ssp the reply waits while the worker is more than `staleness`
  // pushes ahead of the slowest worker.
  // Errors: errc::no_shards before the first create; errc::unknown_worker.
  caf::replies_to<pull_atom, uint32_t>::with<pull_reply>,
  // Applies a gradient for every shard with the server's optimizer, unless its
  // update id was applied before (then only the clock is returned). Replies
  // with the server clock after the update. Staleness (clock at arrival
  // minus read_clock) is recorded. Under sync the reply waits until every
  // worker pushed for this round; the round's mean gradient is applied once.
  // Errors: errc::shape_mismatch if the gradient's size differs from the
  // buffer's; errc::unknown_worker; on error nothing changes.
  caf::replies_to<push_atom, push_request>::with<uint64_t>,
  // Replies with the server's counters.
  caf::replies_to<stats_atom>::with<ps_stats>,
  // Replies with a copy of everything the server holds (values, optimizer
  // slots and steps, clock), for a checkpoint.
  caf::replies_to<save_atom>::with<ps_snapshot>,
  // Replaces values, optimizer slots and steps, and the clock with the
  // snapshot's (a restored checkpoint). Replies with the clock.
  // Errors: errc::shape_mismatch if the sizes or the number of slots differ
  // from the server's (nothing changes then).
  caf::replies_to<restore_atom, ps_snapshot>::with<uint64_t>,
  // Fault injection: the server stops answering for `ms` milliseconds (its
  // thread blocks, as a hung process would).
  caf::reacts_to<freeze_atom, uint64_t>>;

/// The worker index of pulls that are not a worker's (evaluation, tests).
inline constexpr uint32_t no_worker = std::numeric_limits<uint32_t>::max();

/// How pushes of different workers are combined.
/// - async: each push is applied on arrival (Hogwild-style asynchronous SGD).
/// - sync:  bulk-synchronous (BSP): each server waits for one push from every
///          worker, applies their mean, then acknowledges them all (as TF's
///          SyncReplicasOptimizer). Requires every worker to push each round.
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
  /// The rule applied to every update.
  optimizer_config optimizer;
  consistency mode = consistency::async;
  /// Number of workers (sync, ssp: worker indices are below it).
  uint32_t workers = 1;
  /// ssp: the bound s.
  uint64_t staleness = 0;
};

/// Spawns a parameter server; its behaviour lives in ps_actor.cpp.
ps_actor spawn_ps(caf::actor_system& sys, ps_options opts);

} // namespace actorps
