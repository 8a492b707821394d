#include "cluster/topology/local_faults.hpp"

#include <utility>

#include "caf/actor_system.hpp"
#include "caf/send.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

local_faults::local_faults(const std::vector<fault_spec>& faults, uint32_t ps,
                           uint32_t workers)
  : ps_proxy_(ps, false),
    worker_proxy_(workers, false),
    step_errors_(workers),
    proxies_(ps) {
  for (auto& f : faults) {
    bool is_ps = f.role == "ps";
    switch (f.action) {
      case fault_spec::kind::stop:
        if (is_ps && f.index < ps)
          ps_proxy_[f.index] = true;
        else if (!is_ps && f.index < workers)
          worker_proxy_[f.index] = true;
        break;
      case fault_spec::kind::drop:
      case fault_spec::kind::delay:
        ps_proxy_.assign(ps, true);
        break;
      case fault_spec::kind::error:
        if (!is_ps && f.index < workers)
          step_errors_[f.index] = std::make_shared<step_error_switch>();
        break;
      case fault_spec::kind::kill:
      case fault_spec::kind::move:
      case fault_spec::kind::join:
      case fault_spec::kind::leave:
        break;
    }
  }
}

ps_actor local_faults::wrap_ps(caf::actor_system& sys, uint32_t p,
                               ps_actor server) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (p >= ps_proxy_.size() || !ps_proxy_[p])
    return server;
  auto proxy = spawn_ps_proxy(sys, std::move(server), p);
  if (drop_ > 0 || delay_ > 0)
    caf::anon_send(proxy, chaos_atom_v, drop_, delay_, delay_ms_);
  proxies_[p] = proxy;
  return proxy;
}

worker_actor local_faults::wrap_worker(caf::actor_system& sys, uint32_t w,
                                       worker_actor worker) {
  if (w >= worker_proxy_.size() || !worker_proxy_[w])
    return worker;
  return spawn_worker_proxy(sys, std::move(worker));
}

std::shared_ptr<const model>
local_faults::model_for(uint32_t w, std::shared_ptr<const model> net) {
  if (w >= step_errors_.size() || !step_errors_[w])
    return net;
  return failing_model(std::move(net), step_errors_[w], w);
}

void local_faults::inject(const fault_spec& f, const caf::actor& target) {
  auto missing = [&] {
    return runtime_failure("fault " + to_string(f)
                           + ": not among the job's faults, so nothing was "
                             "put in place to inject it");
  };
  std::lock_guard<std::mutex> guard{mtx_};
  switch (f.action) {
    case fault_spec::kind::kill:
      caf::anon_send_exit(target, caf::exit_reason::kill);
      return;
    case fault_spec::kind::stop: {
      auto& planned = f.role == "ps" ? ps_proxy_ : worker_proxy_;
      if (f.index >= planned.size() || !planned[f.index])
        throw missing();
      caf::anon_send(target, freeze_atom_v,
                     static_cast<uint64_t>(f.seconds * 1000));
      return;
    }
    case fault_spec::kind::error:
      if (f.index >= step_errors_.size() || !step_errors_[f.index])
        throw missing();
      step_errors_[f.index]->armed = true;
      return;
    case fault_spec::kind::move:
    case fault_spec::kind::join:
    case fault_spec::kind::leave:
      // Membership, not a fault: local_cluster::inject handles these (a
      // server's change goes to the dispatcher, a worker's joins or leaves).
      throw runtime_failure("fault " + to_string(f)
                            + ": a change of membership, not a fault "
                              "(local_cluster::inject handles it)");
    case fault_spec::kind::drop:
    case fault_spec::kind::delay:
      if (f.action == fault_spec::kind::drop) {
        drop_ = f.share;
      } else {
        delay_ = f.share;
        delay_ms_ = static_cast<uint64_t>(f.seconds * 1000);
      }
      for (auto& proxy : proxies_)
        if (proxy)
          caf::anon_send(proxy, chaos_atom_v, drop_, delay_, delay_ms_);
      return;
  }
}

} // namespace actorps
