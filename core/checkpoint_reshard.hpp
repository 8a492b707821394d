#pragma once

// Offline re-sharding: a checkpoint's shards (core/checkpoint.hpp) re-cut for
// another placement of the same variables (core/placement.hpp), so that a
// checkpoint written with one number of parameter servers (or one
// partitioning) restores onto another.

#include <cstddef>
#include <cstdint>

#include "core/checkpoint.hpp"
#include "core/placement.hpp"

namespace actorps {

/// A re-cut checkpoint and how many of the target's shards of each kind it
/// holds.
struct resharded_checkpoint {
  checkpoint_state state;
  /// Shards of the target placement, dense and table.
  size_t dense_shards = 0;
  size_t table_shards = 0;
};

/// Whether the shards of `st` are laid out exactly as `target` places them:
/// as many shards, each (variable, index) with the target's kind, rows and
/// parameter server. A checkpoint that fits needs no reshard_checkpoint.
bool checkpoint_fits_placement(const checkpoint_state& st,
                               const placement& target);

/// Re-cuts the shards of the whole checkpoint `st` (read_checkpoint's
/// result: a chain already replayed) for the placement `target` of the same
/// variables, as if a job placed as `target` had written it.
///
/// - Dense variable v (rows x cols): the checkpoint's shards must cover its
///   rows [0, rows) exactly once. Target shard [b, e) on server p gets the
///   values of global rows b..e-1, (e - b) * cols floats row-major, and
///   every optimizer slot's rows with them (slot i stays slot i).
/// - Table v: every row (key, values, each slot's row, step) of every
///   checkpoint shard of v goes to target shard target.shard_of_key(v, key)
///   (mod, div or hash, as `target` partitions v), in the order the
///   checkpoint holds them (shard by shard, row by row).
/// - Global state: global_step, epoch, step_in_epoch, workers (data
///   positions), job, id are carried as they are. ps_clocks and
///   optimizer_steps become one entry per target server, each the largest
///   of the checkpoint's: every closure pushes to every server, so these
///   are equal unless a server was restored from an older checkpoint, and a
///   server now holds rows of several old ones (Adam's bias correction then
///   takes the most advanced count). Per-row table steps stay with their
///   rows.
///
/// The result's shards are in the order of `target.shards`, each with the
/// target's index and ps; it satisfies checkpoint_fits_placement(result,
/// target). Memory: a copy of every value, slot, key and step (the input is
/// not changed).
///
/// @throws input_error naming what is wrong, with nothing returned: `st`
///         is a delta ("re-sharding needs a whole checkpoint"); a variable of
///         `target` missing from `st` or one of `st` not in `target`; a
///         shard of another kind or another number of columns than its
///         variable; a dense variable whose shards overlap, leave rows
///         uncovered or reach past its rows, or whose values or slots are not
///         rows * cols floats; shards of one variable with different numbers
///         of slots; a table key at or above a fixed vocabulary, or held
///         twice; no ps clocks, or ps_clocks and optimizer_steps of
///         different lengths.
resharded_checkpoint reshard_checkpoint(const checkpoint_state& st,
                                        const placement& target);

} // namespace actorps
