#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "caf/actor_system_config.hpp"
#include "caf/fwd.hpp"

#include "actors/cluster_coordinator.hpp"
#include "actors/dispatcher_actor.hpp"
#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "actors/worker_actor.hpp"
#include "cluster/job/cluster.hpp"
#include "cluster/job/job_setup.hpp"
#include "cluster/job/system_config.hpp"
#include "cluster/services/fit.hpp"
#include "core/dataset.hpp"
#include "core/job_config.hpp"
#include "core/metrics.hpp"
#include "core/placement.hpp"

namespace actorps {

class local_faults;
class model;
struct fault_spec;
struct job_config;

/// All roles of a cluster in one actor system: cfg.ps parameter servers,
/// cfg.workers workers and the coordinator, talking only by messages.
/// The constructor creates every variable on the parameter servers (split by
/// cfg.partitioner, placed round-robin, initialised by the model from
/// cfg.init_seed) and builds each worker's dataset with `fn`.
class local_cluster : public cluster {
public:
  /// @throws input_error from fn (e.g. a batch larger than a shard);
  ///         runtime_failure if a parameter server refuses a shard.
  /// `ranges`: the reader of the examples closures carry (dynamic data
  /// shards, dataset_ranges), shared by every worker; null: none (a
  /// stream's comes from cfg).
  local_cluster(caf::actor_system& sys, const job_config& cfg,
                std::shared_ptr<const model> net, const dataset_fn& fn,
                std::shared_ptr<range_reader> ranges = nullptr);

  /// Stops every actor of the cluster.
  ~local_cluster() override;

  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  cluster_coordinator& coordinator() override {
    return *coordinator_;
  }

  const placement& layout() const override {
    return *layout_;
  }

  std::vector<server_route> routes() const override;

  void resync_replicas() override;

  const std::vector<worker_actor>& workers() const override {
    return workers_;
  }

  caf::actor_system& system() override {
    return sys_;
  }

  void inject(const fault_spec& f) override;

  std::vector<ps_stats> stats() override;

private:
  /// What supervision changes while the job runs (guarded by mtx).
  struct shared_state {
    std::mutex mtx;
    /// The current incarnation of each worker and server.
    std::vector<worker_actor> workers;
    /// The current actor of each parameter server, by index.
    std::vector<ps_actor> servers;
    /// Every actor started after the constructor (stopped at the end).
    std::vector<caf::actor> spawned;
    /// The batch sources of the workers that joined (index cfg.workers
    /// on), which a restart of one of them goes on with.
    std::vector<std::shared_ptr<batch_source>> joined_data;
  };

  /// A worker joins (the next index): spawned and enlisted with the
  /// dispatcher.
  void join_worker();

  /// Worker `w` leaves gracefully: once the dispatcher let it go, its
  /// actor stops.
  void leave_worker(uint32_t w);

  /// A move, join or leave of a parameter server in the plan (inject):
  /// sent to the dispatcher; a joining server is spawned here.
  void change_servers(const fault_spec& f);

  caf::actor_system& sys_;
  /// What a joining worker is made of (see the constructor).
  dataset_fn fn_;
  std::shared_ptr<const model> net_;
  worker_options wire_;
  uint32_t first_workers_ = 0;
  /// The job's config (for the options of servers that join later).
  job_config cfg_;
  std::shared_ptr<const placement> layout_;
  std::vector<ps_actor> servers_;
  std::vector<worker_actor> workers_;
  std::shared_ptr<shared_state> shared_ = std::make_shared<shared_state>();
  /// The job's faults, around the actors they target.
  std::shared_ptr<local_faults> faults_;
  dispatcher_actor dispatcher_;
  std::unique_ptr<cluster_coordinator> coordinator_;
  /// Reports roles that stop answering (cluster/topology/local_watcher.hpp).
  caf::actor watcher_;
};

/// Trains `net` in this process, as Keras' `model.fit(dataset, epochs,
/// steps_per_epoch, callbacks)`: starts cfg.ps parameter servers (cfg's
/// update rules, consistency mode and placement), cfg.workers workers, each
/// reading the batches `fn` makes for its input_context, and the
/// coordinator (a local_cluster in its own actor system with cfg.threads
/// scheduler threads), then runs fit (cluster/services/fit.hpp). cfg.epochs and
/// cfg.steps_per_epoch are not used: opts says how long.
/// @throws input_error for an invalid cfg or opts, or from fn;
///         runtime_failure as fit.
fit_history fit(const job_config& cfg, std::shared_ptr<const model> net,
                const dataset_fn& fn, const fit_options& opts);

} // namespace actorps
