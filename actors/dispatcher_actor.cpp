#include "actors/dispatcher_actor.hpp"

#include <algorithm>
#include <deque>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/blocking_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "actors/cluster_coordinator.hpp"
#include "actors/dispatcher_state.hpp"
#include "actors/telemetry.hpp" // metrics
#include "core/backoff.hpp"
#include "core/dataset.hpp"
#include "core/log.hpp"

namespace actorps {

namespace detail {


std::string name_of(const detail::closure_state& c) {
  return fmt::format("closure {} ({})", c.id, c.function);
}

// -- completing closures ------------------------------------------------------

void cancel(dispatcher_ptr self, const closure_ptr& c) {
  auto err = caf::make_error(errc::cancelled);
  auto& cause = self->state.cancel_cause;
  c->complete(nullptr, &err,
              cause.empty()
                ? fmt::format("closure {} cancelled", c->id)
                : fmt::format("closure {} cancelled after {}", c->id, cause));
}

void fail_fatal(dispatcher_ptr self, const closure_ptr& c) {
  c->complete(nullptr, &self->state.fatal,
              fmt::format("{} failed: {}", name_of(*c), self->state.fatal_text));
}

/// Queues `c`, unless it must be cancelled or failed instead.
void enqueue(dispatcher_ptr self, closure_ptr c, bool front) {
  auto& st = self->state;
  if (st.fatal)
    fail_fatal(self, c);
  else if (c->epoch < st.cancel_below)
    cancel(self, c);
  else if (front)
    st.queue.push_front(std::move(c));
  else
    st.queue.push_back(std::move(c));
}

/// Sends `cancel_atom, id` to every worker running a closure.
void cancel_running(dispatcher_ptr self) {
  auto& st = self->state;
  for (auto& slot : st.workers)
    if (slot.alive)
      for (auto& c : slot.running)
        self->send(slot.actor, cancel_atom_v, c->id);
}

/// The first error of closure `c`'s epoch: cancels the rest of the epoch.
void cancel_epoch(dispatcher_ptr self, const detail::closure_state& c,
                  const std::string& cause) {
  auto& st = self->state;
  if (c.epoch < st.cancel_below)
    return; // already cancelling
  st.cancel_below = c.epoch + 1;
  st.cancel_cause = cause;
  auto queue = std::move(st.queue);
  st.queue.clear();
  for (auto& q : queue)
    cancel(self, q);
  cancel_running(self);
}

// -- workers ------------------------------------------------------------------

void plan_restart(dispatcher_ptr self, uint32_t w) {
  auto& st = self->state;
  auto restarts = st.workers[w].restarts;
  if (!st.respawn || restarts >= st.restart_budget)
    return;
  auto delay = capped_backoff(std::chrono::milliseconds(100), restarts,
                              std::chrono::seconds(10));
  self->delayed_send(self, delay, respawn_atom_v, w);
  ++st.pending_restarts;
}

/// Takes worker `w` out of service; the closures it held go back to the
/// front of the queue, in their order.
void lose_worker(dispatcher_ptr self, uint32_t w, const std::string& why) {
  auto& st = self->state;
  auto& slot = st.workers[w];
  if (!slot.alive)
    return;
  telemetry::count(telemetry::node_event::worker_lost); // metrics
  slot.alive = false;
  --st.alive_count;
  slot.benched = false;
  slot.lost_reason = why;
  st.idle.erase(std::remove(st.idle.begin(), st.idle.end(), w),
                st.idle.end());
  if (slot.leaving)
    leave_failed(self, w); // it was going anyway: not started again
  else
    plan_restart(self, w);
  auto held = std::move(slot.running);
  slot.running.clear();
  if (!held.empty()) {
    std::string ids;
    for (auto& c : held)
      ids += (ids.empty() ? "" : ", ") + std::to_string(c->id);
    log::warn("dispatcher", -1,
              "worker {} lost ({}) while holding closure{} {}; re-queued, {} "
              "worker(s) left",
              w, why, held.size() > 1 ? "s" : "", ids, st.alive_count);
    for (auto i = held.rbegin(); i != held.rend(); ++i)
      enqueue(self, std::move(*i), true);
  } else {
    log::warn("dispatcher", -1, "worker {} lost ({}); {} worker(s) left", w,
              why, st.alive_count);
  }
}

/// Whether a closure error means "the worker is gone, run it elsewhere".
bool worker_lost(const caf::error& err) {
  return err == caf::sec::request_receiver_down;
}

/// No worker in service and none restarting: starts the grace period, or
/// fails the queue once it is over.
void no_worker_in_service(dispatcher_ptr self) {
  auto& st = self->state;
  if (!st.grace_started) {
    st.grace_started = true;
    ++st.grace_number;
    if (st.no_worker_grace.count() == 0) {
      st.grace_over = true;
    } else {
      log::warn("dispatcher", -1,
                "no worker left; waiting {} s for one to come back",
                st.no_worker_grace.count() / 1000.0);
      self->delayed_send(self, st.no_worker_grace, grace_atom_v,
                         st.grace_number);
    }
  }
  if (!st.grace_over || st.queue.empty())
    return;
  std::string why;
  for (uint32_t w = 0; w < st.workers.size(); ++w)
    why += fmt::format("{}worker {}: {}", why.empty() ? "" : "; ", w,
                       st.workers[w].lost_reason);
  if (st.workers.empty())
    why = "the cluster has none";
  auto err = caf::make_error(errc::no_workers);
  auto queue = std::move(st.queue);
  st.queue.clear();
  for (auto& c : queue)
    c->complete(nullptr, &err,
                fmt::format("{} not run: no worker in service for {} s ({})",
                            name_of(*c), st.no_worker_grace.count() / 1000.0,
                            why));
}

void dispatch(dispatcher_ptr self);

/// The parameter server an errc::ps_lost names ("ps", index, reason), or
/// -1.
int64_t lost_server(const caf::error& err) {
  auto& ctx = err.context();
  if (ctx.size() >= 2 && ctx.match_element<std::string>(0)
      && ctx.get_as<std::string>(0) == "ps" && ctx.match_element<uint32_t>(1))
    return ctx.get_as<uint32_t>(1);
  return -1;
}

/// Worker `w` cannot reach parameter server `p`, which is not being
/// recovered (its own link is down, e.g. after it was paused): it takes no
/// closure for a back-off (0.5 s doubling to 5 s with each closure it fails
/// so), instead of failing every closure handed to it in a hot loop.
void bench(dispatcher_ptr self, uint32_t w, int64_t p,
           const std::string& why) {
  auto& st = self->state;
  auto& slot = st.workers[w];
  auto delay = capped_backoff(std::chrono::milliseconds(500), slot.strikes++,
                              std::chrono::seconds(5));
  slot.benched = true;
  st.idle.erase(std::remove(st.idle.begin(), st.idle.end(), w),
                st.idle.end());
  log::warn("dispatcher", -1,
            "worker {} cannot reach ps{} ({}); it takes no closure for {:.1f} "
            "s",
            w, p, why, delay.count() / 1000.0);
  self->delayed_send(self, delay, backoff_atom_v, w, ++slot.bench_number);
}

/// Worker `w` replied to closure `c` with an error.
void on_error(dispatcher_ptr self, uint32_t w, const closure_ptr& c,
              const caf::error& err) {
  auto& st = self->state;
  if (worker_lost(err)) {
    lose_worker(self, w, self->system().render(err));
    return;
  }
  st.take_closure(w, c);
  auto g = err == errc::ps_lost ? lost_server(err) : -1;
  if (g >= 0 && g < int64_t(st.groups.size()) && !st.groups[g].lost
      && !st.groups[g].promoting && !st.fatal) {
    // The group is served: this worker's own link is down. (Its other
    // closure, queued with this one, fails alike: one back-off, not two.)
    if (!st.workers[w].benched)
      bench(self, w, g, self->system().render(err));
    enqueue(self, c, true);
    free_place(self, w); // benched: no place back (a leaving one may go)
    return;
  }
  free_place(self, w);
  if (err == errc::stale_view) {
    // The worker used an old route (a failover it has not heard of yet).
    send_routes(self, w);
    enqueue(self, c, true);
  } else if (err == errc::ps_lost && st.recovery.bring_back) {
    // The server comes back (or its group fails over): the closure runs
    // again then.
    enqueue(self, c, true);
  } else if (err == errc::cancelled) {
    if (st.fatal)
      fail_fatal(self, c);
    else
      cancel(self, c);
  } else {
    auto text = fmt::format("{} failed on worker {}: {}", name_of(*c), w,
                            self->system().render(err));
    // Said now: the caller hears of it only at its next schedule/join/done.
    log::error("dispatcher", -1, "{}", text);
    c->complete(nullptr, &err, text);
    cancel_epoch(self, *c, text);
  }
}

void dispatch(dispatcher_ptr self) {
  auto& st = self->state;
  telemetry::dispatcher_sampler sample{self, st.queue, st.workers};
  if (st.alive_count == 0 && st.pending_restarts == 0) {
    no_worker_in_service(self);
    return;
  }
  if (dispatch_paused(st))
    return;
  while (!st.idle.empty() && !st.queue.empty()) {
    auto w = st.idle.front();
    st.idle.pop_front();
    auto c = std::move(st.queue.front());
    st.queue.pop_front();
    auto attempt = ++c->attempts;
    st.workers[w].running.push_back(c);
    // Fencing: a reply counts only for the attempt it answers. A worker that
    // was lost and taken back (or the same closure run again on it) may
    // still answer an earlier attempt; that late reply is dropped.
    auto current = [=] {
      auto& st = self->state;
      return st.has_closure(w, c) && c->attempts == attempt;
    };
    // No timeout (caf::infinite): a closure may run as long as its step
    // takes (a sync round, an ssp wait); a worker that dies or falls silent
    // is noticed by the monitor and the watcher, which re-queue the closure.
    self->request(st.workers[w].actor, caf::infinite, run_atom_v,
                  closure_request{c->id, c->function, c->range})
      .then(
        [=](step_result& r) {
          if (!current())
            return; // a late reply of an earlier attempt
          auto& st = self->state;
          st.take_closure(w, c);
          auto& slot = st.workers[w];
          slot.strikes = 0;
          slot.position = data_position{r.data_epoch, r.data_offset};
          slot.has_position = true;
          if (slot.leaving)
            ++slot.finished_leaving;
          c->complete(&r, nullptr);
          maybe_prune(self, *c);
          free_place(self, w);
          dispatch(self);
        },
        [=](caf::error& err) {
          if (!current())
            return;
          on_error(self, w, c, err);
          dispatch(self);
        });
  }
}

/// Worker `w` is back as `worker`.
void admit(dispatcher_ptr self, uint32_t w, worker_actor worker) {
  auto& st = self->state;
  if (w >= st.workers.size() || st.workers[w].alive)
    return;
  telemetry::count(telemetry::node_event::worker_back); // metrics
  auto& slot = st.workers[w];
  slot.strikes = 0;
  slot.benched = false;
  slot.leaving = false;
  slot.actor = std::move(worker);
  self->monitor(slot.actor);
  slot.alive = true;
  ++st.alive_count;
  st.grace_started = false;
  st.grace_over = false;
  for (uint32_t i = 0; i < st.per_worker; ++i)
    st.idle.push_back(w);
  send_routes(self, w);
  dispatch(self);
}

// -- parameter servers --------------------------------------------------------

void fail_job(dispatcher_ptr self, const caf::error& reason) {
  auto& st = self->state;
  if (st.fatal)
    return; // the first reason stands
  st.fatal = reason;
  st.fatal_text = self->system().render(reason);
  log::error("dispatcher", -1, "failing every closure: {}", st.fatal_text);
  auto queue = std::move(st.queue);
  st.queue.clear();
  for (auto& c : queue)
    fail_fatal(self, c);
  // Running ones fail when their workers answer the cancel.
  cancel_running(self);
}

// -- behaviour ----------------------------------------------------------------

dispatcher_actor::behavior_type
dispatcher_behavior(dispatcher_ptr self, std::vector<worker_actor> workers,
                     worker_respawn respawn, uint32_t restart_budget,
                     std::chrono::milliseconds no_worker_grace,
                     std::vector<ps_actor> servers, ps_recovery recovery,
                     uint32_t closures_per_worker) {
  auto& st = self->state;
  st.no_worker_grace = no_worker_grace;
  auto n = workers.size();
  st.workers.resize(n);
  for (size_t i = 0; i < n; ++i)
    st.workers[i].actor = std::move(workers[i]);
  st.respawn = std::move(respawn);
  st.restart_budget = restart_budget;
  st.alive_count = n;
  st.per_worker = std::max<uint32_t>(closures_per_worker, 1);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t k = 0; k < st.per_worker; ++k)
      st.idle.push_back(i);
    // A remote worker's death fails no request: CAF only reports it here.
    self->monitor(st.workers[i].actor);
  }
  init_servers(self, std::move(servers), std::move(recovery));
  // The workers learn the groups' routes (and views) before any closure.
  send_routes(self);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (uint32_t p = 0; p < st.servers.size(); ++p)
      if (st.servers[p].actor
          && st.servers[p].actor.address() == dm.source) {
        server_lost(self, p, self->system().render(dm.reason));
        return;
      }
    for (uint32_t w = 0; w < st.workers.size(); ++w)
      if (st.workers[w].actor.address() == dm.source) {
        lose_worker(self, w, self->system().render(dm.reason));
        dispatch(self);
        return;
      }
  });
  return {
    [=](schedule_atom, closure_ptr& c) {
      enqueue(self, std::move(c), false);
      dispatch(self);
    },
    [=](cancel_atom) {
      auto queue = std::move(self->state.queue);
      self->state.queue.clear();
      for (auto& c : queue)
        cancel(self, c);
      cancel_running(self);
    },
    [=](lost_atom, uint32_t w) {
      if (w < self->state.workers.size()) {
        lose_worker(self, w, "unresponsive");
        dispatch(self);
      }
    },
    [=](abort_atom, caf::error& reason) { fail_job(self, reason); },
    [=](replace_atom, uint32_t w, worker_actor& worker, bool restarted) {
      auto& st = self->state;
      if (w >= st.workers.size() || st.workers[w].alive)
        return;
      if (!restarted || !st.workers[w].has_position) {
        log::info("dispatcher", -1, "worker {} is back", w);
        admit(self, w, std::move(worker));
        return;
      }
      // A restarted worker process starts its data slice at 0: it goes on
      // where its last finished closure left it, so that each example is
      // used once per epoch across the restart.
      auto pos = st.workers[w].position;
      self->request(worker, std::chrono::seconds(10), seek_atom_v, pos.epoch,
                    pos.offset)
        .then(
          [=](bool) {
            log::info("dispatcher", -1,
                      "worker {} is back (restarted) and goes on at epoch {}, "
                      "offset {} of its data",
                      w, pos.epoch, pos.offset);
            admit(self, w, worker);
          },
          [=](caf::error& err) {
            log::warn("dispatcher", -1,
                      "worker {} is back (restarted) but could not be moved "
                      "to its data position: {}; it starts its slice anew",
                      w, self->system().render(err));
            admit(self, w, worker);
          });
    },
    [=](backoff_atom, uint32_t w, uint64_t number) {
      auto& st = self->state;
      if (w >= st.workers.size() || !st.workers[w].benched
          || number != st.workers[w].bench_number)
        return;
      auto& slot = st.workers[w];
      slot.benched = false;
      if (slot.alive && !slot.leaving) {
        auto places = slot.running.size()
                      + std::count(st.idle.begin(), st.idle.end(), w);
        for (auto i = places; i < st.per_worker; ++i)
          st.idle.push_back(w);
      }
      dispatch(self);
    },
    [=](respawn_atom, uint32_t w) {
      auto& st = self->state;
      if (st.pending_restarts > 0)
        --st.pending_restarts;
      if (w >= st.workers.size() || st.workers[w].alive || !st.respawn) {
        dispatch(self);
        return;
      }
      auto& slot = st.workers[w];
      ++slot.restarts;
      ++slot.incarnation;
      worker_actor worker;
      try {
        worker = st.respawn(w, slot.incarnation);
      } catch (const std::exception& e) {
        log::error("dispatcher", -1, "worker {} not restarted: {}", w,
                   e.what());
        slot.lost_reason += fmt::format(", restart failed: {}", e.what());
        plan_restart(self, w);
        dispatch(self);
        return;
      }
      log::info("dispatcher", -1,
                "worker {} restarted (incarnation {}, restart {} of {})", w,
                slot.incarnation, slot.restarts, st.restart_budget);
      admit(self, w, std::move(worker));
    },
    [=](grace_atom, uint64_t number) {
      auto& st = self->state;
      if (number != st.grace_number || !st.grace_started)
        return; // a worker came back meanwhile
      st.grace_over = true;
      dispatch(self);
    },
    [=](ps_back_atom, uint32_t p, ps_actor& ps,
        std::vector<uint32_t>& held) {
      server_back(self, p, std::move(ps), std::move(held));
    },
    [=](ps_gone_atom, uint32_t p, std::string& why) {
      server_not_back(self, p, why);
    },
    [=](replica_atom, uint32_t g, uint32_t p, bool restored,
        caf::error& err) { group_created(self, g, p, restored, err); },
    [=](install_atom) { reinstall_backups(self); },
    [=](route_atom) -> std::vector<group_route> {
      auto& st = self->state;
      std::vector<group_route> out;
      for (uint32_t g = 0; g < st.groups.size(); ++g) {
        auto& gs = st.groups[g];
        if (!gs.lost && !gs.promoting)
          out.push_back(group_route{g, gs.primary, gs.view,
                                    caf::actor_cast<caf::strong_actor_ptr>(
                                      st.servers[gs.primary].actor)});
      }
      return out;
    },
    [=](ps_lost_atom, uint32_t p) {
      server_lost(self, p, "reported by the watcher");
    },
    [=](enlist_atom, uint32_t w, worker_actor& worker) {
      return enlist_worker(self, w, std::move(worker));
    },
    [=](leave_atom, uint32_t w) { return begin_leave(self, w); },
    [=](move_atom, uint32_t from, uint32_t to) -> caf::result<uint32_t> {
      if (auto err = check_move(self->state, from, to)) {
        log::error("dispatcher", -1, "{}", self->system().render(err));
        return err;
      }
      auto req = std::make_shared<move_request>();
      req->promise = self->make_response_promise<uint32_t>();
      plan_moves(self, from, to, req);
      return req->promise;
    },
    [=](ps_join_atom, uint32_t index, ps_actor& ps) -> caf::result<uint32_t> {
      if (auto err = join_server(self, index, std::move(ps)))
        return err;
      return index;
    },
    [=](ps_drain_atom, uint32_t p) -> caf::result<uint32_t> {
      if (auto err = check_drain(self->state, p)) {
        log::error("dispatcher", -1, "{}", self->system().render(err));
        return err;
      }
      auto req = std::make_shared<move_request>();
      req->promise = self->make_response_promise<uint32_t>();
      plan_drain(self, p, req);
      return req->promise;
    },
    [=](move_atom, uint64_t number) { retry_move(self, number); },
    [=](move_atom) {
      auto& st = self->state;
      return caf::make_result(
        st.moves_done, st.moved_floats, st.moved_table_rows,
        static_cast<uint64_t>(st.longest_move_stall_s * 1e6));
    },
  };
}

} // namespace detail

dispatcher_actor spawn_dispatcher(caf::actor_system& sys,
                                    std::vector<worker_actor> workers,
                                    worker_respawn respawn,
                                    uint32_t restart_budget,
                                    std::chrono::milliseconds no_worker_grace,
                                    std::vector<ps_actor> servers,
                                    ps_recovery recovery,
                                    uint32_t closures_per_worker) {
  return sys.spawn(detail::dispatcher_behavior, std::move(workers),
                   std::move(respawn), restart_budget, no_worker_grace,
                   std::move(servers), std::move(recovery),
                   closures_per_worker);
}

} // namespace actorps
