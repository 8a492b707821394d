#pragma once

// Whether a checkpoint fits a job: to continue it, or to start a new run
// from its variables. Refusals are one sentence naming only what differs.

#include <map>
#include <string>

#include "actors/messages.hpp"
#include "core/checkpoint.hpp"

namespace actorps {

struct job_config;
struct placement;

/// The job fingerprint `fp` as the named fields a checkpoint stores
/// (checkpoint_state::job): "model", "variables", "partitioning",
/// "optimizer", "consistency", "cluster", "data".
std::map<std::string, std::string>
checkpoint_job_fields(const job_fingerprint& fp);

/// Checks that checkpoint `st`, read from `dir`, belongs to the job `cfg`
/// placed as `layout`, so that the job can continue from it: the same job
/// fingerprint (model, variables, partitioning, optimizer, consistency,
/// cluster, data), every shard of the placement present once with its shape,
/// and one data position per worker.
/// @throws input_error, one sentence naming `dir`/manifest.json and what
///         differs, only the parts of a field that differ, e.g. "DIR/
///         manifest.json: the checkpoint was written with other data: train
///         limit 6400 in the checkpoint; train limit 1000 in this job; use
///         --restore-variables-only to start a new run from its variables".
///         The hint is given when only fields that a variables-only restore
///         ignores differ. A field that follows from another is not named
///         (the variables from the model, the partitioning from the variables
///         or the number of ps).
void check_checkpoint(const checkpoint_state& st, const job_config& cfg,
                      const placement& layout, const std::string& dir);

/// Checks that the variables of checkpoint `st`, read from `dir`, fit the job
/// `cfg` placed as `layout` (for --restore-variables-only): the same model,
/// variables, partitioning and number of ps, and every shard of the placement
/// present once with its shape. Data, optimizer, consistency mode and the
/// number of workers may differ.
/// @throws input_error, one sentence naming `dir`/manifest.json and what
///         differs.
void check_checkpoint_variables(const checkpoint_state& st,
                                const job_config& cfg, const placement& layout,
                                const std::string& dir);

/// Re-cuts checkpoint `st`, read from `dir`, for the job `cfg` placed as
/// `layout` (reshard_checkpoint, core/checkpoint_reshard.hpp) when its shards
/// are laid out otherwise (another number of ps, or another partitioning of
/// the same variables) and everything else a restore needs is the same: the
/// model and variables; unless `variables_only`, also the optimizer, the
/// consistency mode, the data and the number of workers. Then the
/// checkpoint's "partitioning" and "cluster" fields become the job's, and
/// one line is logged: "restoring a checkpoint of 2 ps onto 3: re-sharded 5
/// dense and 3 table shards".
/// @returns whether `st` was re-cut. It is left as it is when it fits the
///          layout already or differs in another field, for
///          check_checkpoint or check_checkpoint_variables to refuse.
/// @throws input_error "DIR/manifest.json: re-sharding: WHAT" if its shards
///         cannot be re-cut (reshard_checkpoint's errors); `st` is then
///         unchanged.
bool reshard_to_fit(checkpoint_state& st, const job_config& cfg,
                    const placement& layout, const std::string& dir,
                    bool variables_only);

} // namespace actorps
