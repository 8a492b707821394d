#pragma once

// The cluster of a simulation: the job's parameter servers, each
// behind its simulated link (cluster/sim/sim_link.hpp), its workers and the
// dispatcher, supervised as in one process (a lost worker is restarted, a
// lost ps is brought back and its groups failed over or restored), and the
// job's fault plan with the meaning it has in real runs:
// - kill: the worker or ps actor is killed (a push the worker had not sent
//   yet dies with it);
// - stop: the node neither computes, sends nor takes in messages for the
//   given virtual seconds (SIGSTOP); there is no heartbeat under
//   simulation, so a stop is never taken for a loss;
// - drop / delay: a share of the workers' pulls and pushes is sent again
//   after the 200 ms retry timeout, or arrives later by the delay;
// - error: the worker's next step throws.
// Checkpoints are kept in memory (the newest per group), never written.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "actors/dispatcher_actor.hpp"
#include "actors/fault_injection.hpp"
#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "actors/worker_actor.hpp"
#include "cluster/sim/sim_link.hpp"

namespace actorps {

struct job_config;
struct fault_spec;
struct placement;
struct sim_env;
class model;
class batch_source;

class sim_cluster {
public:
  /// Spawns the cluster of job `cfg` in `env` (every actor kept there) and
  /// creates its variables, with replica groups if the job has replicas.
  /// @throws runtime_failure if a server refuses its shards.
  sim_cluster(sim_env& env, const job_config& cfg,
              std::shared_ptr<const model> net,
              std::shared_ptr<const placement> layout,
              std::vector<std::shared_ptr<batch_source>> data,
              std::shared_ptr<sim_world> world);

  dispatcher_actor dispatcher() const {
    return dispatcher_;
  }

  /// Injects `f` now (virtual time).
  void inject(const fault_spec& f);

  /// The server serving each group now (its link), with the group's view.
  /// @throws runtime_failure if a group has no live copy.
  std::vector<group_route> routes();

  /// The counters of the server serving each group.
  std::vector<ps_stats> stats();

  /// Keeps the state of every group as the newest checkpoint (call while no
  /// closure runs).
  void checkpoint();

private:
  sim_env& env_;
  const job_config& cfg_;
  std::shared_ptr<const model> net_;
  std::shared_ptr<const placement> layout_;
  std::vector<std::shared_ptr<batch_source>> data_;
  std::shared_ptr<sim_world> world_;
  /// The workers' wire settings (formats, overlap).
  worker_options wire_;
  /// The real servers, their links and the workers now (index = ps or
  /// worker index).
  std::vector<ps_actor> servers_;
  std::vector<ps_actor> links_;
  std::vector<worker_actor> workers_;
  std::vector<std::shared_ptr<step_error_switch>> step_errors_;
  /// The newest checkpoint per group (empty: none yet).
  std::vector<std::optional<ps_snapshot>> snapshots_;
  dispatcher_actor dispatcher_;

  /// A new, empty server `p` behind a new link; returns the link.
  ps_actor spawn_server(uint32_t p);
  worker_actor spawn_worker_at(uint32_t w, uint32_t incarnation);
  void setup_replicas();
  ps_recovery recovery();
};

} // namespace actorps
