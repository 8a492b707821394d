#include "actors/worker_actor.hpp"

#include <algorithm>
#include <chrono>

#include "caf/actor_system.hpp"
#include "caf/blocking_actor.hpp"

#include "actors/format_probe.hpp"
#include "actors/worker_state.hpp"
#include "core/backoff.hpp"
#include "core/dataset.hpp"
#include "core/log.hpp"

namespace actorps {

namespace detail {

namespace {

void start_next(worker_ptr self);

/// Schedules an attempt to reconnect to lost server `p` (across processes
/// only), after 0.25 s doubling to 5 s with each failed attempt.
void plan_reconnect(worker_ptr self, uint32_t p) {
  auto& slot = self->state.slots[p];
  if (!self->state.opts.redial || slot.reconnecting)
    return;
  slot.reconnecting = true;
  auto delay = capped_backoff(std::chrono::milliseconds(250),
                              slot.reconnect_tries++,
                              std::chrono::seconds(5));
  self->delayed_send(self, delay, redial_atom_v, p);
}

/// Server `p` is reachable again as `ps`: closures run once no server is
/// lost.
void use_server(worker_ptr self, uint32_t p, ps_actor ps) {
  auto& st = self->state;
  auto& slot = st.slots[p];
  slot.server = std::move(ps);
  self->monitor(slot.server);
  drop_ahead(self, p);
  slot.lost = false;
  slot.reconnect_tries = 0;
  if (std::none_of(st.slots.begin(), st.slots.end(),
                   [](const server_slot& x) { return x.lost; }))
    st.ps_lost = caf::error{};
}

} // namespace

void finish(worker_ptr self, const caf::error& err) {
  auto& st = self->state;
  if (st.opts.lean) {
    release(st.params);
    release(st.grad);
  }
  auto j = std::move(st.queue.front());
  st.queue.pop_front();
  st.busy = false;
  st.at = phase::idle;
  if (err)
    j.promise.deliver(err);
  else
    j.promise.deliver(st.result);
  start_next(self);
}

void fail(worker_ptr self, caf::error err) {
  auto& st = self->state;
  if (!st.busy || st.failed)
    return;
  st.failed = true;
  // Replies still in flight are ignored: their handlers see `failed`.
  finish(self, err);
}

void step_error(worker_ptr self, const char* where, const std::exception& e) {
  auto& st = self->state;
  log::error("worker", static_cast<int>(st.opts.index),
             "closure {} failed in {}: {}", st.result.closure, where,
             e.what());
  fail(self, caf::make_error(errc::step_failed,
                             "worker " + std::to_string(st.opts.index), where,
                             std::string{e.what()}));
}

caf::error server_error(worker_ptr self, uint32_t p, caf::error err) {
  if (err == caf::sec::request_receiver_down)
    return caf::make_error(errc::ps_lost, "ps", p, self->system().render(err));
  return err;
}

bool awaits_route(worker_ptr self, uint32_t p, const caf::error& err) {
  // The server's refusal of a group that moved away: ("ps", index,
  // "group", g, "moved at view", view); see ps_state.hpp's find_group.
  if (err != errc::stale_view)
    return false;
  auto& ctx = err.context();
  if (ctx.size() != 6 || !ctx.match_element<std::string>(4)
      || ctx.get_as<std::string>(4) != "moved at view"
      || !ctx.match_element<uint64_t>(5))
    return false;
  auto& slot = self->state.slots[p];
  if (ctx.get_as<uint64_t>(5) <= slot.view)
    return false;
  log::debug("worker", static_cast<int>(self->state.opts.index),
             "group {} moved away from ps{}: its request goes to the new "
             "server with the new route",
             p, slot.server_index);
  return true;
}

namespace {

/// Uses the wire format chosen by measurement (between steps: a push sent
/// again must carry the bytes it carried first).
void use_chosen_format(worker_ptr self) {
  auto& st = self->state;
  if (st.next_format.empty())
    return;
  std::shared_ptr<const wire_format> f;
  if (st.next_format != "fp32")
    f = make_wire_format(st.next_format);
  if (st.opts.choose_push_format) {
    st.opts.push_format = f;
    st.plan = make_push_plan(*st.opts.layout, f, st.opts.variable_formats);
  }
  if (st.opts.choose_pull_format)
    st.opts.pull_format = f;
  st.next_format.clear();
}

/// Times pulls in fp32 and bf16 from a helper thread (it blocks) and sends
/// the faster format back.
void choose_formats(worker_ptr self) {
  auto& st = self->state;
  worker_actor me = self;
  std::vector<ps_actor> servers;
  for (auto& slot : st.slots)
    servers.push_back(slot.server);
  auto layout = st.opts.layout;
  auto index = static_cast<int>(st.opts.index);
  self->spawn<caf::detached>([me, servers, layout,
                              index](caf::blocking_actor* helper) {
    try {
      auto candidate = make_wire_format("bf16");
      auto c = probe_formats(helper, servers, *layout, *candidate, 7,
                             std::chrono::seconds(30));
      log::info("worker", index, "wire format by measurement: {}",
                c.describe());
      helper->send(me, formats_atom_v, c.format);
    } catch (const std::exception& e) {
      log::warn("worker", index,
                "wire format by measurement failed ({}); keeping fp32",
                e.what());
      helper->send(me, formats_atom_v, std::string{"fp32"});
    }
  });
  st.probing = true;
}

void start_next(worker_ptr self) {
  auto& st = self->state;
  if (st.busy || st.probing || st.queue.empty())
    return;
  use_chosen_format(self);
  auto& req = st.queue.front().req;
  if (st.ps_lost)
    return finish(self, st.ps_lost);
  st.step = find_step_function(req.function);
  if (st.step == nullptr)
    return finish(self, caf::make_error(errc::unknown_function, req.function));
  st.busy = true;
  st.failed = false;
  ++st.seq;
  for (auto& slot : st.slots) {
    slot.in_flight = 0;
    slot.outstanding = 0;
    slot.runs_sent.clear();
    slot.encoded_for_seq = false;
  }
  st.result = step_result{};
  st.result.closure = req.id;
  st.result.worker = st.opts.index;
  begin_step(self);
}


worker_actor::behavior_type
worker_behavior(worker_actor::stateful_pointer<worker_state> self,
                worker_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  auto rows = st.opts.data->batch_size();
  auto& layout = *st.opts.layout;
  st.ws = st.opts.net->make_workspace(rows);
  if (!st.opts.lean) {
    st.params.resize(layout.model_size);
    st.grad.resize(layout.model_size);
  }
  for (auto v : layout.tables) {
    table_lookup t;
    t.variable = v;
    t.dim = layout.variables[v].cols;
    st.tables.push_back(std::move(t));
  }
  auto n = static_cast<uint32_t>(st.opts.servers.size());
  st.routes = key_routes{layout, n};
  st.plan = make_push_plan(layout, st.opts.push_format,
                           st.opts.variable_formats);
  st.slots.resize(n);
  for (uint32_t g = 0; g < n; ++g) {
    auto& slot = st.slots[g];
    slot.server = std::move(st.opts.servers[g]);
    if (g < st.opts.views.size())
      slot.view = st.opts.views[g];
    slot.server_index = st.opts.server_index.empty() ? g
                                                     : st.opts.server_index[g];
  }
  st.opts.servers.clear();
  st.opts.views.clear();
  st.opts.server_index.clear();
  plan_slices(self);
  // A remote server's death fails no pull or push: CAF only reports it here.
  // A slot without a server (a worker that joined a running job could not
  // reach a server that had left) waits for its group's route.
  for (auto& slot : st.slots) {
    if (slot.server)
      self->monitor(slot.server);
    else
      slot.lost = true;
  }
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (uint32_t p = 0; p < st.slots.size(); ++p)
      if (st.slots[p].server.address() == dm.source && !st.slots[p].lost) {
        if (dm.reason != caf::exit_reason::user_shutdown)
          log::error("worker", static_cast<int>(st.opts.index),
                     "lost ps{}: {}", p, self->system().render(dm.reason));
        st.slots[p].lost = true;
        drop_ahead(self, p);
        st.ps_lost = caf::make_error(errc::ps_lost, "ps", p,
                                     self->system().render(dm.reason));
        fail(self, st.ps_lost);
        plan_reconnect(self, p);
      }
  });
  if (st.opts.choose_push_format || st.opts.choose_pull_format)
    choose_formats(self);
  return {
    [=](redial_atom, uint32_t p) {
      auto& st = self->state;
      if (p >= st.slots.size())
        return;
      if (!st.slots[p].lost) {
        st.slots[p].reconnecting = false;
        return;
      }
      // Dialling blocks for up to a few seconds: a helper thread does it, so
      // that this worker keeps answering its node and the coordinator.
      auto redial = st.opts.redial;
      auto server = st.slots[p].server_index;
      worker_actor me = self;
      self->spawn<caf::detached>([redial, me, p,
                                  server](caf::blocking_actor* helper) {
        try {
          auto [ps, incarnation] = redial(server);
          helper->send(me, dialed_atom_v, p,
                       caf::actor_cast<caf::strong_actor_ptr>(ps),
                       incarnation);
        } catch (const std::exception& e) {
          log::debug("worker", -1, "reconnect to ps{} failed: {}", server,
                     e.what());
          helper->send(me, dialed_atom_v, p, caf::strong_actor_ptr{},
                       uint64_t{0});
        }
      });
    },
    [=](dialed_atom, uint32_t p, caf::strong_actor_ptr& ptr,
        uint64_t incarnation) {
      auto& st = self->state;
      if (p >= st.slots.size())
        return;
      auto& slot = st.slots[p];
      slot.reconnecting = false;
      if (!slot.lost)
        return; // replaced by the dispatcher's route meanwhile
      if (!ptr)
        return plan_reconnect(self, p);
      auto index = static_cast<int>(st.opts.index);
      auto server = slot.server_index;
      if (server < st.opts.server_incarnations.size()
          && incarnation != st.opts.server_incarnations[server]) {
        // Its state is gone: it may serve only after the coordinator has
        // restored it (a route then).
        log::warn("worker", index,
                  "ps{} was restarted (a new incarnation); waiting for the "
                  "coordinator to restore it",
                  server);
        return;
      }
      use_server(self, p, caf::actor_cast<ps_actor>(std::move(ptr)));
      log::info("worker", index,
                "reconnected to ps{} (the same incarnation) for group {}",
                server, p);
    },
    [=](ping_atom) -> uint32_t { return self->state.opts.index; },
    [=](route_atom, std::vector<group_route>& routes) {
      auto& st = self->state;
      for (auto& r : routes) {
        if (r.group >= st.slots.size())
          continue;
        auto& slot = st.slots[r.group];
        if (r.view < slot.view
            || (r.view == slot.view && r.ps == slot.server_index
                && !slot.lost))
          continue;
        auto ps = caf::actor_cast<ps_actor>(r.actor);
        if (st.opts.redial) {
          try {
            auto [direct, incarnation] = st.opts.redial(r.ps);
            ps = std::move(direct);
            if (r.ps < st.opts.server_incarnations.size())
              st.opts.server_incarnations[r.ps] = incarnation;
          } catch (const std::exception& e) {
            log::warn("worker", static_cast<int>(st.opts.index),
                      "cannot reach ps{} directly ({}); going through the "
                      "chief",
                      r.ps, e.what());
          }
        }
        slot.view = r.view;
        slot.server_index = r.ps;
        use_server(self, r.group, std::move(ps));
        log::info("worker", static_cast<int>(st.opts.index),
                  "group {} is served by ps{} (view {})", r.group, r.ps,
                  r.view);
        resend(self, r.group);
      }
    },
    [=](cancel_atom, uint64_t id) {
      auto& st = self->state;
      auto cancelled = caf::make_error(errc::cancelled, "closure", id);
      if (st.busy && st.queue.front().req.id == id) {
        // Pulls in flight: nothing was pushed yet, so it ends now. Pushes in
        // flight: they complete (a push sent cannot be taken back).
        if (st.at == phase::pulling)
          fail(self, cancelled);
        return;
      }
      for (auto i = st.queue.begin(); i != st.queue.end(); ++i)
        if (i->req.id == id && !(st.busy && i == st.queue.begin())) {
          i->promise.deliver(cancelled);
          st.queue.erase(i);
          return;
        }
    },
    [=](seek_atom, uint64_t epoch, uint64_t offset) -> caf::result<bool> {
      auto& data = *self->state.opts.data;
      if (offset > data.shard_rows())
        return caf::make_error(errc::shape_mismatch, "data offset", offset,
                               data.shard_rows());
      data.seek(data_position{epoch, offset});
      return true;
    },
    [=](formats_atom, std::string& name) {
      auto& st = self->state;
      st.next_format = std::move(name);
      st.probing = false;
      if (!st.busy)
        use_chosen_format(self);
      start_next(self);
    },
    [=](run_atom, closure_request& req) -> caf::result<step_result> {
      auto rp = self->make_response_promise<step_result>();
      self->state.queue.push_back(job{std::move(req), rp});
      start_next(self);
      return rp;
    },
  };
}


} // namespace

} // namespace detail

worker_actor spawn_worker(caf::actor_system& sys, worker_options opts) {
  return sys.spawn(detail::worker_behavior, std::move(opts));
}

} // namespace actorps
