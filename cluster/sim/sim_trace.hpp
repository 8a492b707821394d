#pragma once

// The event order of a simulation: every message the simulated
// network delivers, in the order it is delivered, as one line of text. Its
// SHA-256 digest identifies a run (two runs with the same seed give the
// same digest); --record writes the lines to a file, --replay checks a run
// against such a file line by line.

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "cluster/sim/sim_model.hpp"

namespace actorps {

class sim_trace {
public:
  /// With `record`: writes every event to that file. With `replay`: checks
  /// every event against the next line of that file.
  /// @throws input_error if either file cannot be opened.
  sim_trace(const std::string& record, const std::string& replay);
  ~sim_trace();

  sim_trace(const sim_trace&) = delete;
  sim_trace& operator=(const sim_trace&) = delete;

  /// One delivered message: at virtual time `t`, `what` ("pull>" a pull
  /// reaching its server, "<pull" its reply reaching the worker, "push>",
  /// "<push") between worker `worker` and server `ps`, of closure `closure`
  /// (0 for a pull, which names none), `bytes` long.
  /// Under replay, the first event that differs from the file (or comes
  /// after its end) is kept as mismatch(): this runs inside an actor, which
  /// must not throw.
  void event(sim_time t, const char* what, uint32_t worker, uint32_t ps,
             uint64_t closure, uint64_t bytes);

  /// Adds bytes that are not events (e.g. the final parameters) to the
  /// digest.
  void add(const void* data, size_t size);

  /// Ends the trace: under replay, checks that the file has no more events.
  /// Returns the SHA-256 digest in hex (64 characters).
  /// @throws runtime_failure under replay if the file has more events.
  std::string finish();

  uint64_t events() const {
    return events_;
  }

  /// Under replay: what differed first (naming the event, what was recorded
  /// and what happened); empty while the run matches the file.
  const std::string& mismatch() const {
    return mismatch_;
  }

private:
  struct hasher;
  std::unique_ptr<hasher> hash_;
  std::ofstream record_;
  std::ifstream replay_;
  std::string replay_name_;
  uint64_t events_ = 0;
  std::string mismatch_;
};

} // namespace actorps
