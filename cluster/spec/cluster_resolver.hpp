#pragma once

// How a node learns its cluster: a registry of resolvers, after TensorFlow's
// tf.distribute.cluster_resolver (TFConfigClusterResolver,
// SlurmClusterResolver), and Kubernetes' JobSet. `actorps node --cluster-resolver NAME` picks one;
// a program on the library can call them the same way.

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/spec/cluster_spec.hpp"

namespace actorps {

/// What a resolver may need besides the environment.
struct resolver_options {
  /// Number of parameter servers, for resolvers that assign roles to tasks
  /// (slurm); >= 1.
  uint32_t ps = 1;
  /// Number of workers, for resolvers that count roles from flags (jobset).
  uint32_t workers = 1;
  /// A host's first port, for resolvers that assign ports (slurm; jobset:
  /// every pod's port).
  uint16_t port_base = 8888;
  /// The node is a worker joining a running job (`--join`): a resolver
  /// that assigns roles gives it a worker index past the job's workers
  /// (jobset: `workers` + JOB_COMPLETION_INDEX) or refuses (slurm).
  bool joining = false;
};

/// One way to learn the cluster. Adding one: an entry in
/// cluster/spec/cluster_resolver.cpp.
struct cluster_resolver {
  /// The name `--cluster-resolver` takes ("tf_config", "slurm", "jobset").
  const char* name;
  /// One line for --help.
  const char* description;
  /// Whether the resolver decides each task's role itself (slurm: from the
  /// task id and `ps`); if not, the spec's own numbers of ps and workers
  /// count and --role/--index may set the task (tf_config).
  bool assigns_roles;
  /// Returns the cluster; with assigns_roles its task is set.
  /// @throws input_error naming the variable or flag at fault.
  cluster_spec (*resolve)(const resolver_options& opts);
};

/// The resolver registered as `name`, or nullptr.
const cluster_resolver* find_cluster_resolver(const std::string& name);

/// Every registered name, in registry order ("tf_config" first: the default).
std::vector<std::string> cluster_resolver_names();

/// The cluster in one line for people, e.g. "coordinator n1:8888; ps n1:8889,
/// n2:8888; workers n2:8889, n2:8890; this node: worker 1 at n2:8890".
std::string describe_cluster(const cluster_spec& spec);

} // namespace actorps
