#pragma once

// Where and how `actorps launch` starts the nodes of a cluster. Each node is
// `actorps node --role R --index I [job flags]`; a launcher chooses the
// nodes' addresses and turns each command into the process that runs it.
// run_children (cluster/launch/launcher.hpp) then supervises those processes the same
// way whichever launcher made them: output prefixes, restarts within the
// budget, signals, the stop after the coordinator.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/launch/launcher.hpp"
#include "cluster/spec/cluster_spec.hpp"

namespace actorps {

/// Picks `n` distinct free TCP ports on `host` (an IPv4 literal such as
/// "127.0.0.1") by binding n sockets to port 0 and reading the ports back; all
/// n stay open until every port is picked, then all are closed. Another
/// process may take a port before the children bind it: run_launch starts
/// the job again on new ports when a node says so (abort_when).
/// @throws runtime_failure if `host` is not an IPv4 literal or a socket cannot
///         be created or bound.
std::vector<uint16_t> pick_free_ports(size_t n,
                                      const std::string& host = "127.0.0.1");

/// One way to start nodes. Implementations: local (fork/exec on this
/// machine) and slurm (a job step per node, cluster/launch/slurm_launcher.hpp).
class node_launcher {
public:
  virtual ~node_launcher();

  /// Chooses every node's address for start attempt `attempt` (0 first; a
  /// later attempt follows a node that found its port taken, and gets other
  /// ports) and makes the spec reachable for the processes wrap() makes
  /// afterwards. The spec's task is unset.
  /// @throws input_error if the nodes do not fit where they would run (a
  ///         Slurm allocation with too few tasks, ports past 65535);
  ///         runtime_failure on a system error (ports, files).
  virtual cluster_spec place(uint32_t ps, uint32_t workers,
                             uint32_t attempt) = 0;

  /// The process that runs node `node` of the last place(): `process.argv`
  /// (and `process.restart_argv`, when not empty) is `actorps node --role R
  /// --index I` followed by the job flags, without a cluster spec; the
  /// result runs it with the spec.
  virtual child_spec wrap(const task_id& node, child_spec process) const = 0;

  /// How the nodes run, for the launcher's first line, e.g. "on 127.0.0.1;
  /// cluster spec /tmp/actorps-cluster-1a2b3c.json".
  virtual std::string describe() const = 0;
};

/// Settings of the launchers, as given on the command line (unset: the
/// launcher's default). A launcher refuses a setting it does not take.
struct launcher_options {
  /// local: the address every node listens on, an IPv4 literal (default
  /// 127.0.0.1). `--host`.
  std::optional<std::string> host;
  /// slurm: a host's first port; its next nodes get the next ports (default
  /// 8888). `--port-base`.
  std::optional<uint16_t> port_base;
};

/// The launcher registered as `name`: "local" (the default) or "slurm".
/// @throws input_error for an unknown name, listing the known ones, a
///         setting the launcher does not take (`--port-base` for local,
///         `--host` for slurm), or, from the launcher, an environment it
///         cannot work in (slurm: outside an allocation, no srun on PATH).
std::unique_ptr<node_launcher> make_node_launcher(const std::string& name,
                                                  const launcher_options& opts);

/// Every registered name, in registry order ("local" first).
std::vector<std::string> node_launcher_names();

/// Starts nodes on this machine as plain child processes (fork/exec by
/// run_children), listening on free ports of opts.host; the spec goes to
/// them as a temporary file (`--cluster FILE`), removed with the launcher.
/// @throws runtime_failure if the file cannot be created.
std::unique_ptr<node_launcher> make_local_launcher(const launcher_options& opts);

} // namespace actorps
