#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace actorps {

/// One planned failure, for rehearsing recovery: at global step `step`
/// (closures finished in the job), the coordinator kills node `role` `index`
/// (in one process: its actor dies; as processes: SIGKILL), or stops it for
/// `seconds` (in one process: the actor freezes; as processes: SIGSTOP, then
/// SIGCONT).
///
/// `drop` and `delay` act on messages to the parameter servers (role "ps",
/// no index): from step `step` on, the share `share` of the workers' pulls
/// and pushes is dropped (each sent again after a 200 ms timeout) or
/// delayed by `seconds`.
///
/// `error` (role "worker") makes the next step of worker `index` throw, as a
/// model or dataset would: the step's own error, which fails its closure
/// (errc::step_failed, not retried) and then the job, while the worker stays.
///
/// Membership, not failures. Workers (role "worker", data.sharding
/// dynamic): `join` adds a new worker to the running job (the next index;
/// `index` is not used), `leave` lets worker `index` go gracefully (it
/// finishes the closures it holds; nothing is re-executed). Parameter
/// servers (role "ps"): `move` moves every replica ps `index` holds to ps
/// `to` while training goes on (a view change per group: nothing lost or
/// applied twice); `join` starts a new, empty ps, whose index is the next
/// one (the job's ps count, plus the joins before it); `leave` drains ps
/// `index` (its replicas move to the other servers) and then stops it.
struct fault_spec {
  enum class kind { kill, stop, drop, delay, error, move, join, leave };
  kind action = kind::kill;
  std::string role = "worker"; ///< "worker" or "ps"
  uint32_t index = 0;
  uint64_t step = 0;
  double seconds = 0; ///< stop: how long; delay: by how much
  double share = 0;   ///< drop, delay: in (0, 1]
  uint32_t to = 0;    ///< move: the server the replicas go to
};

/// Whether `f` changes the set of parameter servers or what they hold
/// (move, join and leave of role ps) rather than injecting a failure.
bool changes_servers(const fault_spec& f);

/// Parses "kill:worker:1@40", "stop:ps:0@100:2.5" (stop for 2.5 s),
/// "drop:ps:10%@50" (drop 10% of the messages to the servers from step 50),
/// "delay:ps:20%@50:0.05" (delay 20% of them by 50 ms), "join:worker@80" (a
/// worker joins at step 80), "leave:worker:1@120", "move:ps:0>2@300" (ps
/// 0's replicas move to ps 2 at step 300), "join:ps@200" (a new ps joins
/// at step 200) or "leave:ps:0@400" (ps 0 is drained and stops).
/// @throws input_error quoting `text` and what is wrong.
fault_spec parse_fault(const std::string& text);

/// Renders a fault as parse_fault reads it.
std::string to_string(const fault_spec& f);

/// Checks the parameter-server indices of `faults` for a job that starts
/// with `ps` servers, taking the events in the order they fire (by step;
/// equal steps in the order given): each ps index names a server that
/// exists then (a joined one counts from its join on) and did not leave,
/// a move goes to another server, and no leave takes the last server.
/// @returns an empty string, or the position in `faults` of the first
///          event that fails and why (`position` set).
std::string check_server_plan(const std::vector<fault_spec>& faults,
                              uint32_t ps, size_t* position);

/// The number of parameter servers a job that starts with `ps` ever has:
/// `ps` plus the joins of role ps among `faults`, or `max_ps` if more
/// (job_config::max_ps: servers started idle for actorps scale).
uint32_t servers_ever(const std::vector<fault_spec>& faults, uint32_t ps,
                      uint32_t max_ps = 0);

} // namespace actorps
