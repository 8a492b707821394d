#pragma once

// Between a running cluster and a checkpoint on disk (core/checkpoint.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "core/checkpoint.hpp"
#include "core/dataset.hpp"
#include "core/error.hpp"

namespace actorps {

class cluster;
struct job_config;
struct placement;

/// Where a training job is: what a checkpoint records besides the variables.
struct training_progress {
  uint64_t global_step = 0;   ///< closures finished in the whole job
  uint32_t epoch = 0;         ///< epochs completed
  uint64_t step_in_epoch = 0; ///< closures finished in epoch `epoch + 1`
  /// Each worker's data position after its last finished closure.
  std::vector<data_position> workers;
};

/// A checkpoint could not be taken because a parameter server was lost
/// while it was being saved (its group may fail over or be brought back:
/// the job's own recovery decides; nothing was written).
class checkpoint_interrupted : public runtime_failure {
public:
  using runtime_failure::runtime_failure;
};

/// Which checkpoint of a chain capture_checkpoint takes.
struct checkpoint_request {
  /// The new checkpoint's id (checkpoint_state::id), with which every
  /// server marks its table shards clean; 0: an unchained full checkpoint
  /// (no server marks anything).
  uint64_t id = 0;
  /// A delta's base: its directory name in the checkpoint root and its id
  /// ("" and 0: a full checkpoint).
  std::string base;
  uint64_t base_id = 0;
};

/// Snapshots every parameter server of `cl` (values, optimizer slots and
/// steps, clock) and cuts the buffers into the shards of the placement. Call
/// it with no closure running, so that the snapshot is consistent.
/// With `req.id`, each server marks its table shards clean under that id
/// after it answered (a checkpoint of a chain); with `req.base` too, a
/// server whose last mark is `req.base_id` answers with a delta of each
/// table shard (rows changed since and tombstones), any other with whole
/// shards. The result is a delta (of `req.base`) if any table shard is one,
/// else a full checkpoint.
/// @throws checkpoint_interrupted if a server is lost before it answered;
///         runtime_failure if one fails or does not answer. Servers that
///         answered have marked: the next checkpoint of the chain must be
///         full, or a delta of a checkpoint that was written.
checkpoint_state capture_checkpoint(cluster& cl, const job_config& cfg,
                                    const training_progress& progress,
                                    const checkpoint_request& req = {});

/// Restores every parameter server of `cl` from `st` (checked with
/// check_checkpoint) and moves each worker's data to its saved position.
/// @throws runtime_failure if a server or worker refuses or is lost.
void restore_checkpoint(cluster& cl, const checkpoint_state& st);

/// Restores the variables of `st` (checked with check_checkpoint_variables)
/// into every parameter server of `cl` as the start of a new run: values of
/// the dense variables and the table rows, the optimizer state of cfg's rules
/// started afresh (see variables_snapshot_for), clocks 0. The workers keep
/// their fresh data positions.
/// @throws runtime_failure if a server refuses or is lost.
void restore_variables(cluster& cl, const checkpoint_state& st,
                       const job_config& cfg);

/// The state of parameter server `ps` in `st` (checked with
/// check_checkpoint), in the server's buffer layout.
ps_snapshot snapshot_for(const placement& layout, const checkpoint_state& st,
                         uint32_t ps);

/// The variables of parameter server `ps` in `st` (checked with
/// check_checkpoint_variables) with a fresh optimizer state: the dense values
/// and table rows (keys, values) of the checkpoint; every slot at the initial
/// value of cfg's rule (update_rule::slot_init; cfg.optimizer for the dense
/// region, cfg.table_optimizer for tables), whatever the checkpoint's rule
/// kept; step counts (the region's and each table row's) and the clock 0.
/// @throws input_error if cfg names an unknown rule.
ps_snapshot variables_snapshot_for(const placement& layout,
                                   const checkpoint_state& st, uint32_t ps,
                                   const job_config& cfg);

/// Restores parameter server `ps` (index `index`) from `snap`.
/// @throws runtime_failure if it refuses or is lost.
void restore_ps(caf::actor_system& sys, const ps_actor& ps, uint32_t index,
                ps_snapshot snap);

/// Gives a new parameter server `ps` (index `index`, shards created) the
/// state of the newest checkpoint in cfg.checkpoint_dir; with none, it keeps
/// the initial values (logged). Returns the checkpoint used ("" if none).
/// @throws input_error for an unreadable checkpoint; runtime_failure if the
///         server refuses.
std::string restore_ps_from_latest(caf::actor_system& sys,
                                   const placement& layout,
                                   const job_config& cfg, const ps_actor& ps,
                                   uint32_t index);

/// The progress recorded in `st`.
training_progress progress_of(const checkpoint_state& st);

} // namespace actorps
