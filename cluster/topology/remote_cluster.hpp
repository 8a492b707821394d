#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "caf/actor.hpp"
#include "caf/fwd.hpp"

#include "cluster/spec/cluster_spec.hpp"
#include "cluster/topology/local_cluster.hpp"

namespace actorps {

class gate;

/// One node to reach: its role, index and address.
struct cluster_member {
  std::string role; ///< "ps" or "worker"
  uint32_t index = 0;
  host_port address;

  /// "ps0", "worker1": how logs and errors name it.
  std::string name() const;
};

/// A member reached by join_members.
struct joined_member {
  /// The actor at the member's gate (shutdown goes there).
  caf::actor node;
  /// Its handshake and the actor of its role.
  node_welcome welcome;
};

/// Reaches every member through its gate and says hello with `mine`,
/// retrying unreachable ones with back-off (50 ms doubling to 1 s) until
/// `timeout` has passed. `chief` is the chief's watcher actor (null when a
/// worker joins its parameter servers). Both sides compare handshakes.
/// Returns each member's node actor and welcome, in the order of `members`.
/// @throws runtime_failure naming every member not reached in time (with its
///         last error), or at once a member that refuses the handshake or is
///         refused (what differs), or answers as another role or index.
std::vector<joined_member> join_members(caf::actor_system& sys,
                                        const std::vector<cluster_member>& members,
                                        const handshake& mine,
                                        const caf::actor& chief,
                                        std::chrono::milliseconds timeout);

/// join_members one member at a time, each for at most `timeout`, for
/// members that may have left a running job (a server drained by a move):
/// one not reached has an empty entry (no node) and why in `missed` (in the
/// order of `members`, "" for one reached). One of the first `must_accept`
/// members that refuses the handshake throws as in join_members; a later
/// one that does is counted as missed (e.g. a server not in the job yet).
std::vector<joined_member> join_each(caf::actor_system& sys,
                                     const std::vector<cluster_member>& members,
                                     const handshake& mine,
                                     const caf::actor& chief,
                                     std::chrono::milliseconds timeout,
                                     size_t must_accept,
                                     std::vector<std::string>& missed);

/// The current node actor of every member (a restarted worker joins again
/// under a new one); shared by remote_cluster and its watcher.
struct node_table {
  std::mutex mtx;
  std::vector<caf::actor> nodes; ///< in the order of the members
  std::vector<ps_actor> servers; ///< the current actor of each ps
  /// The incarnation each member joined with last (see handshake).
  std::vector<uint64_t> incarnations;
};

/// The coordinator's side of a multi-process cluster: the parameter servers
/// and workers of `spec` run in other processes (`actorps node`), reached
/// over CAF's network layer. The constructor joins every node (see
/// join_members), creates the variables on the parameter servers that hold
/// none yet (a server that already holds them, from a coordinator that died,
/// keeps them where it holds them: cluster/job/group_survey.hpp) and starts
/// the dispatcher over the remote workers. With `resume`, a server may have
/// left already (drained): one that does not answer within 3 s while the
/// others hold every group is not expected. Every node is watched: a lost one
/// is logged at once (CAF heartbeats: within about heartbeat_timeout); a lost
/// worker's closure is re-queued and the worker taken back when it joins
/// again; a lost ps is recovered when its node comes back (restarted by
/// `launch` or by hand): dispatch pauses, its shards are restored from the
/// newest checkpoint, the workers switch to it.
class remote_cluster : public cluster {
public:
  /// @throws runtime_failure as join_members, or if a server refuses a shard.
  remote_cluster(caf::actor_system& sys, const job_config& cfg,
                 const cluster_spec& spec, std::shared_ptr<const model> net,
                 std::chrono::milliseconds connect_timeout,
                 bool resume = false);

  /// Stops the dispatcher and tells every node to shut down: with status 0,
  /// or 1 when the destructor runs because of an exception (a failed job).
  ~remote_cluster() override;

  remote_cluster(const remote_cluster&) = delete;
  remote_cluster& operator=(const remote_cluster&) = delete;

  cluster_coordinator& coordinator() override {
    return *coordinator_;
  }

  const placement& layout() const override {
    return *layout_;
  }

  std::vector<ps_stats> stats() override;

  std::vector<server_route> routes() const override;

  void resync_replicas() override;

  const std::vector<worker_actor>& workers() const override {
    return workers_;
  }

  caf::actor_system& system() override {
    return sys_;
  }

  void inject(const fault_spec& f) override;

private:
  caf::actor_system& sys_;
  /// How long the destructor waits for the nodes to confirm the shutdown.
  std::chrono::milliseconds shutdown_timeout_;
  std::shared_ptr<const placement> layout_;
  std::vector<cluster_member> members_;
  std::shared_ptr<node_table> table_ = std::make_shared<node_table>();
  std::vector<worker_actor> workers_;
  caf::actor watcher_;
  /// With dynamic data shards: the join desk (spawn_join_desk) behind a
  /// gate at the spec's chief address, where workers join the running job.
  caf::actor desk_;
  std::unique_ptr<gate> door_;
  dispatcher_actor dispatcher_;
  /// The job's replica groups (cluster.groups), its own servers
  /// (cluster.ps), and the servers that joined since (join:ps: the next of
  /// the spec, running idle until then).
  uint32_t groups_ = 0;
  uint32_t first_ps_ = 0;
  uint32_t joins_ = 0;
  std::unique_ptr<cluster_coordinator> coordinator_;
  /// The view this coordinator's groups start at.
  uint64_t view0_ = 0;
};

} // namespace actorps
