#include "actors/coordinator_actor.hpp"

#include <algorithm>
#include <deque>

#include "caf/actor_system.hpp"
#include "caf/blocking_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "actors/cluster_coordinator.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

struct coordinator_state {
  std::vector<worker_actor> workers;
  /// The closure each worker runs (null: none).
  std::vector<closure_ptr> running;
  std::vector<bool> alive;
  size_t alive_count = 0;
  worker_respawn respawn;
  uint32_t restart_budget = 0;
  std::vector<uint32_t> restarts;   ///< per worker index
  std::vector<uint32_t> incarnation; ///< per worker index
  uint32_t pending_restarts = 0;
  std::chrono::milliseconds no_worker_grace{0};
  /// Whether a no-worker check is scheduled.
  bool grace_pending = false;
  // -- parameter server recovery ------------------------------------------------
  std::vector<ps_actor> servers;
  ps_respawn recover_ps;
  std::vector<bool> recovering_ps;
  // -- injected message faults --------------------------------------------------
  double chaos_drop = 0;
  double chaos_delay = 0;
  uint64_t chaos_ms = 0;
  /// Servers being recovered; dispatch pauses while there are any.
  uint32_t recovering = 0;
  std::chrono::steady_clock::time_point pause_start;
  std::deque<uint32_t> idle;
  std::deque<closure_ptr> queue;
  static constexpr const char* name = "coordinator";
};

using coordinator_ptr = coordinator_actor::stateful_pointer<coordinator_state>;

void cancel_queue(coordinator_ptr self, errc code = errc::cancelled) {
  auto err = caf::make_error(code);
  auto queue = std::move(self->state.queue);
  self->state.queue.clear();
  for (auto& c : queue)
    c->complete(nullptr, &err,
                "closure " + std::to_string(c->id)
                  + (code == errc::cancelled ? " cancelled"
                                             : " not run: no worker left"));
}

/// Takes worker `w` out of service; its running closure, if any, goes back
/// to the front of the queue.
void lose_worker(coordinator_ptr self, uint32_t w, const std::string& why) {
  auto& st = self->state;
  if (!st.alive[w])
    return;
  st.alive[w] = false;
  --st.alive_count;
  st.idle.erase(std::remove(st.idle.begin(), st.idle.end(), w),
                st.idle.end());
  if (st.respawn && st.restarts[w] < st.restart_budget) {
    auto delay = std::chrono::milliseconds(100) * (1 << st.restarts[w]);
    self->delayed_send(self, delay, replace_atom_v, w);
    ++st.pending_restarts;
  }
  if (auto c = std::move(st.running[w])) {
    st.running[w] = nullptr;
    log::warn("coordinator", -1,
              "worker {} lost ({}) while running closure {}; re-queued, {} "
              "worker(s) left",
              w, why, c->id, st.alive_count);
    st.queue.push_front(std::move(c));
  } else {
    log::warn("coordinator", -1, "worker {} lost ({}); {} worker(s) left", w,
              why, st.alive_count);
  }
}

/// Whether a closure error means "the worker is gone, run it elsewhere".
bool worker_lost(const caf::error& err) {
  return err == caf::sec::request_receiver_down;
}

void dispatch(coordinator_ptr self) {
  auto& st = self->state;
  if (st.alive_count == 0 && st.pending_restarts == 0 && !st.queue.empty()) {
    if (st.no_worker_grace.count() == 0) {
      cancel_queue(self, errc::no_workers);
    } else if (!st.grace_pending) {
      st.grace_pending = true;
      log::warn("coordinator", -1,
                "no worker left; waiting {} s for one to come back",
                st.no_worker_grace.count() / 1000.0);
      self->delayed_send(self, st.no_worker_grace, lost_atom_v);
    }
    return;
  }
  if (st.recovering > 0)
    return;
  while (!st.idle.empty() && !st.queue.empty()) {
    auto w = st.idle.front();
    st.idle.pop_front();
    auto c = std::move(st.queue.front());
    st.queue.pop_front();
    ++c->attempts;
    st.running[w] = c;
    self->request(st.workers[w], caf::infinite, run_atom_v,
                  closure_request{c->id, c->function})
      .then(
        [=](step_result& r) {
          auto& st = self->state;
          if (st.running[w] != c)
            return; // the worker was lost and the closure re-queued
          st.running[w] = nullptr;
          c->complete(&r, nullptr);
          st.idle.push_back(w);
          dispatch(self);
        },
        [=](caf::error& err) {
          auto& st = self->state;
          if (st.running[w] != c)
            return;
          if (worker_lost(err)) {
            lose_worker(self, w, self->system().render(err));
            dispatch(self);
            return;
          }
          if (err == errc::ps_lost && st.recover_ps) {
            // The server comes back: the closure runs again then.
            st.running[w] = nullptr;
            st.queue.push_front(c);
            st.idle.push_back(w);
            dispatch(self);
            return;
          }
          st.running[w] = nullptr;
          auto text = "closure " + std::to_string(c->id) + " ("
                      + c->function + ") failed on worker "
                      + std::to_string(w) + ": "
                      + self->system().render(err);
          // Said now: the caller hears of it only at its next schedule/join.
          log::error("coordinator", -1, "{}", text);
          c->complete(nullptr, &err, text);
          cancel_queue(self);
          self->state.idle.push_back(w);
        });
  }
}

/// Parameter server `p` is lost: pauses dispatch and recovers it in a helper
/// thread (once, however many report the loss).
void start_recovery(coordinator_ptr self, uint32_t p, const std::string& why) {
  auto& st = self->state;
  if (!st.recover_ps || p >= st.servers.size() || st.recovering_ps[p])
    return;
  st.recovering_ps[p] = true;
  if (st.recovering++ == 0)
    st.pause_start = std::chrono::steady_clock::now();
  log::warn("coordinator", -1,
            "ps {} lost ({}); dispatch paused while it is recovered", p, why);
  auto fn = st.recover_ps;
  coordinator_actor me = self;
  self->spawn<caf::detached>([fn, p, me](caf::blocking_actor* helper) {
    try {
      helper->send(me, restore_atom_v, p, fn(p));
    } catch (const std::exception& e) {
      helper->send(me, cancel_atom_v,
                   caf::make_error(errc::ps_lost, "ps", p,
                                   std::string{"recovery failed: "}
                                     + e.what()));
    }
  });
}

/// Worker `w` is back as `worker`.
void admit(coordinator_ptr self, uint32_t w, worker_actor worker) {
  auto& st = self->state;
  if (w >= st.workers.size() || st.alive[w])
    return;
  st.workers[w] = std::move(worker);
  self->monitor(st.workers[w]);
  if (st.chaos_drop > 0 || st.chaos_delay > 0)
    self->send(st.workers[w], chaos_atom_v, st.chaos_drop, st.chaos_delay,
               st.chaos_ms);
  st.alive[w] = true;
  ++st.alive_count;
  st.idle.push_back(w);
  dispatch(self);
}

coordinator_actor::behavior_type
coordinator_behavior(coordinator_ptr self, std::vector<worker_actor> workers,
                     worker_respawn respawn, uint32_t restart_budget,
                     std::chrono::milliseconds no_worker_grace,
                     std::vector<ps_actor> servers, ps_respawn recover_ps) {
  auto& st = self->state;
  st.no_worker_grace = no_worker_grace;
  st.workers = std::move(workers);
  st.respawn = std::move(respawn);
  st.restart_budget = restart_budget;
  st.restarts.assign(st.workers.size(), 0);
  st.incarnation.assign(st.workers.size(), 0);
  st.running.resize(st.workers.size());
  st.alive.assign(st.workers.size(), true);
  st.alive_count = st.workers.size();
  for (uint32_t i = 0; i < st.workers.size(); ++i) {
    st.idle.push_back(i);
    // A remote worker's death fails no request: CAF only reports it here.
    self->monitor(st.workers[i]);
  }
  st.servers = std::move(servers);
  st.recover_ps = std::move(recover_ps);
  st.recovering_ps.assign(st.servers.size(), false);
  if (st.recover_ps)
    for (auto& s : st.servers)
      self->monitor(s);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (uint32_t p = 0; p < st.servers.size(); ++p)
      if (st.recover_ps && st.servers[p].address() == dm.source) {
        start_recovery(self, p, self->system().render(dm.reason));
        return;
      }
    for (uint32_t w = 0; w < st.workers.size(); ++w)
      if (st.workers[w].address() == dm.source) {
        lose_worker(self, w, self->system().render(dm.reason));
        dispatch(self);
        return;
      }
  });
  return {
    [=](schedule_atom, closure_ptr& c) {
      self->state.queue.push_back(std::move(c));
      dispatch(self);
    },
    [=](cancel_atom) { cancel_queue(self); },
    [=](lost_atom, uint32_t w) {
      if (w < self->state.workers.size()) {
        lose_worker(self, w, "unresponsive");
        dispatch(self);
      }
    },
    [=](restore_atom, uint32_t p, ps_actor& ps) {
      auto& st = self->state;
      if (p >= st.servers.size())
        return;
      st.servers[p] = ps;
      st.recovering_ps[p] = false;
      self->monitor(ps);
      for (uint32_t w = 0; w < st.workers.size(); ++w)
        if (st.alive[w])
          self->send(st.workers[w], replace_atom_v, p,
                     caf::actor_cast<caf::strong_actor_ptr>(ps));
      if (st.recovering > 0 && --st.recovering == 0) {
        auto pause = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - st.pause_start)
                       .count();
        log::info("coordinator", -1,
                  "ps {} recovered; dispatch resumed after a pause of {:.2f} s",
                  p, pause);
      }
      dispatch(self);
    },
    [=](chaos_atom, double drop, double delay, uint64_t ms) {
      auto& st = self->state;
      if (drop >= 0)
        st.chaos_drop = drop;
      if (delay >= 0) {
        st.chaos_delay = delay;
        st.chaos_ms = ms;
      }
      for (uint32_t w = 0; w < st.workers.size(); ++w)
        if (st.alive[w])
          self->send(st.workers[w], chaos_atom_v, st.chaos_drop,
                     st.chaos_delay, st.chaos_ms);
    },
    [=](restore_atom, uint32_t p) {
      start_recovery(self, p, "reported by the watcher");
    },
    [=](lost_atom) {
      auto& st = self->state;
      st.grace_pending = false;
      if (st.alive_count == 0 && !st.queue.empty())
        cancel_queue(self, errc::no_workers);
    },
    [=](replace_atom, uint32_t w, worker_actor& worker) {
      log::info("coordinator", -1, "worker {} is back", w);
      admit(self, w, std::move(worker));
    },
    [=](replace_atom, uint32_t w) {
      auto& st = self->state;
      if (st.pending_restarts > 0)
        --st.pending_restarts;
      if (w >= st.workers.size() || st.alive[w] || !st.respawn)
        return;
      ++st.restarts[w];
      auto worker = st.respawn(w, ++st.incarnation[w]);
      log::info("coordinator", -1,
                "worker {} restarted (incarnation {}, restart {} of {})", w,
                st.incarnation[w], st.restarts[w], st.restart_budget);
      admit(self, w, std::move(worker));
    },
    [=](cancel_atom, caf::error& reason) {
      auto& st = self->state;
      auto text = self->system().render(reason);
      log::error("coordinator", -1, "failing every closure: {}", text);
      for (auto& c : st.running)
        if (c) {
          auto running = std::move(c);
          c = nullptr;
          running->complete(nullptr, &reason,
                            "closure " + std::to_string(running->id)
                              + " failed: " + text);
        }
      auto queue = std::move(st.queue);
      st.queue.clear();
      for (auto& c : queue)
        c->complete(nullptr, &reason,
                    "closure " + std::to_string(c->id) + " failed: " + text);
    },
  };
}

} // namespace

coordinator_actor spawn_coordinator(caf::actor_system& sys,
                                    std::vector<worker_actor> workers,
                                    worker_respawn respawn,
                                    uint32_t restart_budget,
                                    std::chrono::milliseconds no_worker_grace,
                                    std::vector<ps_actor> servers,
                                    ps_respawn recover_ps) {
  return sys.spawn(coordinator_behavior, std::move(workers),
                   std::move(respawn), restart_budget, no_worker_grace,
                   std::move(servers), std::move(recover_ps));
}

} // namespace actorps
