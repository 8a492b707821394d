#pragma once

#include <cstdint>
#include <string>

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
/// `join` and `leave` (role "worker", data.sharding dynamic) are membership
/// events rather than failures: a new worker joins the running job (the next
/// index; `index` is not used), or worker `index` leaves it gracefully (it
/// finishes the closures it holds; nothing is re-executed).
struct fault_spec {
  enum class kind { kill, stop, drop, delay, error, join, leave };
  kind action = kind::kill;
  std::string role = "worker"; ///< "worker" or "ps"
  uint32_t index = 0;
  uint64_t step = 0;
  double seconds = 0; ///< stop: how long; delay: by how much
  double share = 0;   ///< drop, delay: in (0, 1]
};

/// Parses "kill:worker:1@40", "stop:ps:0@100:2.5" (stop for 2.5 s),
/// "drop:ps:10%@50" (drop 10% of the messages to the servers from step 50),
/// "delay:ps:20%@50:0.05" (delay 20% of them by 50 ms), "join:worker@80" (a
/// worker joins at step 80) or "leave:worker:1@120".
/// @throws input_error quoting `text` and what is wrong.
fault_spec parse_fault(const std::string& text);

/// Renders a fault as parse_fault reads it.
std::string to_string(const fault_spec& f);

} // namespace actorps
