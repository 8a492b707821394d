#pragma once

// What train() needs of a cluster, whether its roles run in this process
// (cluster/topology/local_cluster.hpp) or in others
// (cluster/topology/remote_cluster.hpp): the job's coordinator, placement,
// servers and workers. Checkpoints, evaluation and the services of a job
// (cluster/services/) see a cluster only through it.

#include <vector>

#include "caf/fwd.hpp"

#include "actors/cluster_coordinator.hpp"
#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "actors/worker_actor.hpp"
#include "core/metrics.hpp"
#include "core/placement.hpp"

namespace actorps {

class dataset;
class model;
struct fault_spec;

/// What train() needs of a cluster, whether its roles run in this process
/// (local_cluster) or in others (remote_cluster).
class cluster {
public:
  virtual ~cluster();

  /// Schedules closures on the workers.
  virtual cluster_coordinator& coordinator() = 0;

  /// Where every variable's shards live.
  virtual const placement& layout() const = 0;

  /// Reads the dense variables from the parameter servers into one flat
  /// model buffer (blocking; for evaluation and tests). A group that moves
  /// meanwhile is read again at its new server (as by evaluate).
  /// @throws runtime_failure if a server fails, is lost or does not answer.
  std::vector<float> pull_dense();

  /// Test metrics of `net` on `data` with the values the servers hold now
  /// (see evaluate_on_servers).
  /// @throws runtime_failure if a server fails, is lost or does not answer.
  metric_list evaluate(const model& net, const dataset& data);

  /// Counters of every parameter server (blocking; zeros for a server that
  /// does not answer).
  virtual std::vector<ps_stats> stats() = 0;

  /// The server of each replica group (its primary), by group (a copy: a
  /// recovered or promoted server replaces a lost one while the job runs).
  std::vector<ps_actor> servers() const;

  /// Where each replica group is served now, by group: the server, its
  /// index and the group's view (requests must name it).
  virtual std::vector<server_route> routes() const = 0;

  /// The workers, by index.
  virtual const std::vector<worker_actor>& workers() const = 0;

  /// The actor system the cluster's actors (or proxies) live in.
  virtual caf::actor_system& system() = 0;

  /// Injects a planned failure now (see fault_spec): kills or stops the
  /// current incarnation of the node.
  virtual void inject(const fault_spec& f) = 0;

  /// Copies every replica group's state from its primary to its backup
  /// again (after the primaries were restored from a checkpoint). Does
  /// nothing without replication.
  virtual void resync_replicas() = 0;
};

} // namespace actorps
