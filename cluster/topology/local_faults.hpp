#pragma once

// The faults of a job in one process (job_config::faults, --fault), put
// around the actors they target and nowhere else (actors/fault_injection):
// a ps or worker that a `stop` fault names gets a proxy that can freeze it;
// with any `drop` or `delay` fault every ps gets a proxy that holds
// messages back; a worker that an `error` fault names gets a failing model.
// `kill` needs nothing: its actor (or its proxy, linked to it) is killed.

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "caf/fwd.hpp"

#include "actors/fault_injection.hpp"
#include "core/job_config.hpp"

namespace actorps {

class model;

/// Thread-safe: servers and workers are replaced from helper threads.
class local_faults {
public:
  /// The faults `faults` of a job of `ps` servers and `workers` workers.
  local_faults(const std::vector<fault_spec>& faults, uint32_t ps,
               uint32_t workers);

  /// `server` (parameter server `p`, new or replacing a lost one) as the
  /// others see it: behind a proxy if a fault may need one (then with the
  /// message faults injected so far).
  ps_actor wrap_ps(caf::actor_system& sys, uint32_t p, ps_actor server);

  /// `worker` (worker `w`) as the dispatcher sees it: behind a proxy if a
  /// stop fault names it.
  worker_actor wrap_worker(caf::actor_system& sys, uint32_t w,
                           worker_actor worker);

  /// The model worker `w` computes with: `net`, failing once armed if an
  /// error fault names the worker.
  std::shared_ptr<const model> model_for(uint32_t w,
                                         std::shared_ptr<const model> net);

  /// Injects `f` (not kill: the caller kills `target`, the actor of the
  /// role it names as wrap_* returned it).
  /// @throws runtime_failure if `f` was not among the faults given to the
  ///         constructor (nothing was put in place for it).
  void inject(const fault_spec& f, const caf::actor& target);

private:
  std::mutex mtx_;
  std::vector<bool> ps_proxy_;
  std::vector<bool> worker_proxy_;
  std::vector<std::shared_ptr<step_error_switch>> step_errors_;
  /// The proxies made, to tell of message faults (also later ones).
  std::vector<faulty_ps_actor> proxies_;
  double drop_ = 0;
  double delay_ = 0;
  uint64_t delay_ms_ = 0;
};

} // namespace actorps
