#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cluster/services/train_report.hpp"
#include "core/metrics.hpp"

namespace actorps {

class data_provider;
class range_reader;
struct cluster_spec;
struct job_config;
struct network_options;

/// Runs a training job with every role in this process: opens the dataset
/// (data registry), builds the model (model registry), starts cfg.ps
/// parameter servers, cfg.workers workers and the coordinator as CAF actors,
/// and trains with fit (cluster/services/fit.hpp): steps_per_epoch x workers
/// "train_step" closures per epoch, evaluated on the test set after each
/// epoch, reported by its callbacks. With cfg.checkpoint_dir set,
/// writes a checkpoint after every cfg.checkpoint_every_steps steps (0: none
/// within epochs) and at each epoch end; with opts.restore_dir or
/// opts.resume, continues from one at its step and data positions (with
/// opts.restore_variables_only, starts a new run from its variables).
/// @throws input_error for unusable input (data files, shapes, metrics path,
///         a checkpoint that is corrupt, truncated or of another job or data,
///         a variables-only restore whose checkpoint_dir holds checkpoints, a
///         metrics port that cannot be bound, a plot without gnuplot), all
///         before any actor starts;
///         runtime_failure if training fails.
train_report train(const job_config& cfg, const train_options& opts);

/// Runs a training job as the coordinator ("chief") of the multi-process
/// cluster `spec`: joins every parameter server and worker node (see
/// remote_cluster), then trains and reports exactly as train(). When it
/// returns or throws, every node is told to shut down.
/// @throws input_error as train(); runtime_failure if a node cannot be
///         reached or refuses the job, or training fails (e.g. a lost ps).
train_report train_chief(const job_config& cfg, const cluster_spec& spec,
                         const train_options& opts);

/// The network settings of a multi-process job (cluster.* fields of cfg).
network_options network_of(const job_config& cfg);

/// The reader of handed-out examples (data.sharding dynamic) of `data`, the
/// job's dataset: every worker can read any range of the whole training
/// split (data_provider::train_ranges with data.shuffle_seed).
/// @throws input_error naming data.sharding if the dataset cannot.
std::shared_ptr<range_reader> dynamic_ranges(const job_config& cfg,
                                             data_provider& data);


} // namespace actorps
