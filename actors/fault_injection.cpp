#include "actors/fault_injection.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "actors/ps_forwarding.hpp"
#include "core/log.hpp"
#include "models/forwarding_model.hpp"

namespace actorps {

namespace {

/// How long a dropped request is held: the sender's retry timeout.
constexpr auto retry_after = std::chrono::milliseconds(200);

struct ps_proxy_state {
  ps_actor server;
  uint32_t index = 0;
  double drop = 0;
  double delay = 0;
  std::chrono::milliseconds delay_by{0};
  std::mt19937_64 rng{0x9e3779b97f4a7c15ULL};
  /// Held pulls and pushes, by hold number: each forwards itself.
  std::map<uint64_t, std::function<void()>> held;
  uint64_t next_hold = 0;
  /// Pulls and pushes dropped and delayed so far (told at the end).
  std::shared_ptr<std::pair<uint64_t, uint64_t>> counts
    = std::make_shared<std::pair<uint64_t, uint64_t>>();
  static constexpr const char* name = "ps-proxy";
};

using ps_proxy_ptr = faulty_ps_actor::stateful_pointer<ps_proxy_state>;

/// How long to hold a pull or push back under chaos (zero: forward now).
std::chrono::milliseconds hold_for(ps_proxy_ptr self) {
  auto& st = self->state;
  std::uniform_real_distribution<double> u{0.0, 1.0};
  if (st.drop > 0 && u(st.rng) < st.drop) {
    ++st.counts->first;
    return retry_after;
  }
  if (st.delay > 0 && u(st.rng) < st.delay) {
    ++st.counts->second;
    return st.delay_by;
  }
  return std::chrono::milliseconds{0};
}

/// Forwards a pull or push to the server, now or after hold_for: the server
/// answers the requester directly either way.
template <class Reply, class Atom, class Request>
caf::result<Reply> pass(ps_proxy_ptr self, Atom atom, Request& req) {
  auto hold = hold_for(self);
  if (hold.count() == 0)
    return self->delegate(self->state.server, atom, std::move(req));
  auto rp = self->template make_response_promise<Reply>();
  auto n = self->state.next_hold++;
  self->state.held.emplace(n, [self, rp, atom, req]() mutable {
    rp.delegate(self->state.server, atom, std::move(req));
  });
  self->delayed_send(self, hold, release_atom_v, n);
  return rp;
}

faulty_ps_actor::behavior_type ps_proxy(ps_proxy_ptr self, ps_actor server,
                                        uint32_t index) {
  self->state.server = server;
  self->state.index = index;
  self->state.rng.seed(0x9e3779b97f4a7c15ULL ^ index);
  self->link_to(server);
  auto counts = self->state.counts;
  self->attach_functor([counts, index] {
    if (counts->first + counts->second > 0)
      log::info("ps", static_cast<int>(index),
                "fault injection: {} pulls and pushes dropped (held for the "
                "retry timeout), {} delayed",
                counts->first, counts->second);
  });
  auto to = [self] { return self->state.server; };
  return ps_forwarding_behavior<faulty_ps_actor>(
    self, to,
    [=](pull_atom a, pull_request& x) { return pass<pull_reply>(self, a, x); },
    [=](push_atom a, push_request& x) { return pass<uint64_t>(self, a, x); },
    [=](freeze_atom, uint64_t ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    },
    [=](chaos_atom, double drop, double delay, uint64_t delay_ms) {
      auto& st = self->state;
      if (drop >= 0)
        st.drop = drop;
      if (delay >= 0) {
        st.delay = delay;
        st.delay_by = std::chrono::milliseconds(delay_ms);
      }
    },
    [=](release_atom, uint64_t n) {
      auto i = self->state.held.find(n);
      if (i == self->state.held.end())
        return;
      auto forward = std::move(i->second);
      self->state.held.erase(i);
      forward();
    });
}

faulty_worker_actor::behavior_type
worker_proxy(faulty_worker_actor::pointer self, worker_actor worker) {
  self->link_to(worker);
  return {
    [=](run_atom a, closure_request& x) {
      return self->delegate(worker, a, std::move(x));
    },
    [=](cancel_atom a, uint64_t id) { return self->delegate(worker, a, id); },
    [=](seek_atom a, uint64_t epoch, uint64_t offset) {
      return self->delegate(worker, a, epoch, offset);
    },
    [=](redial_atom a, uint32_t p) { return self->delegate(worker, a, p); },
    [=](dialed_atom a, uint32_t p, caf::strong_actor_ptr& ps,
        uint64_t incarnation) {
      return self->delegate(worker, a, p, std::move(ps), incarnation);
    },
    [=](ping_atom a) { return self->delegate(worker, a); },
    [=](route_atom a, std::vector<group_route>& routes) {
      return self->delegate(worker, a, std::move(routes));
    },
    [=](formats_atom a, std::string& name) {
      return self->delegate(worker, a, std::move(name));
    },
    [=](freeze_atom, uint64_t ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    },
  };
}

/// A model whose loss_and_gradient throws once each time its switch is
/// armed.
class failing final : public forwarding_model {
public:
  failing(std::shared_ptr<const model> net,
          std::shared_ptr<step_error_switch> sw, uint32_t worker)
    : forwarding_model(std::move(net)), sw_(std::move(sw)), worker_(worker) {
    // nop
  }

  double loss_and_gradient(const model_inputs& in, const example_batch& batch,
                           float* dense_grad,
                           model_workspace& ws) const override {
    if (sw_->armed.exchange(false))
      throw std::runtime_error("injected step error (fault error:worker:"
                               + std::to_string(worker_) + ")");
    return inner().loss_and_gradient(in, batch, dense_grad, ws);
  }

private:
  std::shared_ptr<step_error_switch> sw_;
  uint32_t worker_;
};

} // namespace

faulty_ps_actor spawn_ps_proxy(caf::actor_system& sys, ps_actor ps,
                               uint32_t index) {
  return sys.spawn(ps_proxy, std::move(ps), index);
}

faulty_worker_actor spawn_worker_proxy(caf::actor_system& sys,
                                       worker_actor worker) {
  return sys.spawn(worker_proxy, std::move(worker));
}

std::shared_ptr<const model> failing_model(std::shared_ptr<const model> net,
                                           std::shared_ptr<step_error_switch> sw,
                                           uint32_t worker) {
  return std::make_shared<const failing>(std::move(net), std::move(sw),
                                         worker);
}

} // namespace actorps
