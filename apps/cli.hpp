#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/launch/node_launcher.hpp"
#include "cluster/spec/cluster_spec.hpp"
#include "cluster/topology/trainer.hpp"
#include "core/job_config.hpp"
#include "core/job_options.hpp" // to_count

namespace actorps {

/// A parsed `actorps train` command line.
struct train_command {
  job_config job;
  train_options options;
  bool help = false;
  bool quiet = false;
  /// --no-progress: no progress bar even on a terminal.
  bool no_progress = false;
  /// Cluster-size flags given on the command line ("--workers", "--ps").
  std::vector<std::string> explicit_flags;
};

/// A parsed `actorps node` command line: the job flags of `train` plus
/// --role, --index and --cluster.
struct node_command {
  train_command train;
  /// With `task` set from --role/--index or the spec's own "task"; the
  /// numbers of workers and ps in train.job are the spec's.
  cluster_spec spec;
  /// --cluster-resolver NAME as given ("" when not given).
  std::string resolver;
  /// --cpu-set LIST: the CPUs this node's threads may run on (empty: as
  /// started; core/cpu_affinity.hpp).
  std::vector<int> cpus;
  /// --join HOST:PORT: a worker joining a running job through its
  /// coordinator at that address (its index past the spec's workers).
  std::optional<host_port> join;
};

/// A parsed `actorps launch` command line: the job flags of `train` plus
/// --launcher, --host and --port-base.
struct launch_command {
  train_command train;
  /// --launcher NAME: how nodes start (cluster/launch/node_launcher.hpp).
  std::string launcher = "local";
  /// --host and --port-base, for the launcher to check and use.
  launcher_options launcher_opts;
  /// The arguments as given, passed on to every node.
  std::vector<std::string> node_args;
};

/// Parses job flags (those of `actorps train`) plus the command's own
/// `extra` flags (name -> whether it takes a value), which are returned in
/// `extras` in the order given. `command` names the command in messages.
/// @throws input_error as parse_train_args.
train_command parse_job_args(
  const std::vector<std::string>& args, const std::string& command,
  const std::map<std::string, bool>& extra,
  std::vector<std::pair<std::string, std::string>>& extras);

/// Parses the arguments after `actorps train`: --config FILE first (or the
/// built-in defaults), then each flag overrides its config field.
/// @throws input_error naming the flag for an unknown flag, a missing or
///         malformed value, or an invalid config.
train_command parse_train_args(const std::vector<std::string>& args);

/// Parses the arguments after `actorps node`. The spec comes from
/// `--cluster FILE`, from `--cluster-resolver NAME` (cluster/
/// cluster_resolver.hpp: tf_config, or slurm with --ps and --port-base), or
/// else from the TF_CONFIG environment variable; --role ("chief" or
/// "coordinator", "worker", "ps") and --index set its task, except with a
/// resolver that assigns roles (slurm).
/// @throws input_error as parse_train_args, for a malformed or missing spec,
///         a missing task, --workers/--ps that contradict the spec, an
///         unknown resolver, --cluster with --cluster-resolver, --role or
///         --index with slurm, --port-base without it, or as the resolver
///         (e.g. outside Slurm).
node_command parse_node_args(const std::vector<std::string>& args);

/// Parses the arguments after `actorps launch`.
/// @throws input_error as parse_train_args.
launch_command parse_launch_args(const std::vector<std::string>& args);

/// The usage text of `actorps train`.
std::string train_usage();

/// The usage texts of `actorps node` and `actorps launch`.
std::string node_usage();
std::string launch_usage();

} // namespace actorps
