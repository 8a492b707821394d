#include "cluster/sim_link.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <utility>

#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/key_routes.hpp"
#include "actors/ps_forwarding.hpp"

namespace actorps {

namespace {

/// Bytes of a message beyond its payload (CAF's BASP header, the message's
/// type ids and fixed fields), about what a small message costs on the wire.
constexpr uint64_t header_bytes = 128;

uint64_t wire_bytes(const pull_request& x) {
  uint64_t keys = 0;
  for (auto& t : x.tables)
    keys += t.keys.keys.size();
  return header_bytes + keys * sizeof(uint64_t);
}

struct link_state {
  ps_actor server;
  uint32_t index = 0;
  std::shared_ptr<sim_world> world;
  /// Held messages by number: each goes on by itself.
  std::map<uint64_t, std::function<void()>> held;
  uint64_t next = 0;
  static constexpr const char* name = "sim-link";
};

using link_ptr = sim_link_actor::stateful_pointer<link_state>;

/// Runs `go` at virtual time `at` (now if it has passed).
void hold_until(link_ptr self, sim_time at, std::function<void()> go) {
  auto& st = self->state;
  auto now = st.world->now(self->system());
  auto n = st.next++;
  st.held.emplace(n, std::move(go));
  self->delayed_send(self,
                     std::chrono::nanoseconds(at > now ? at - now : 0),
                     retry_atom_v, n);
}

caf::result<pull_reply> pull(link_ptr self, pull_request& req) {
  auto& st = self->state;
  auto& w = *st.world;
  if (req.worker == no_worker || req.worker >= w.workers)
    return self->delegate(st.server, pull_atom_v, std::move(req));
  auto rp = self->make_response_promise<pull_reply>();
  auto worker = req.worker;
  auto server_node = w.workers + st.index;
  auto bytes = wire_bytes(req);
  auto at = w.net.send(worker, server_node, bytes, w.now(self->system()));
  hold_until(self, at, [self, rp, req, worker, server_node, bytes]() mutable {
    auto& st = self->state;
    auto& w = *st.world;
    w.trace.event(w.now(self->system()), "pull>", worker, st.index, 0, bytes);
    ++w.pulls[st.index];
    self->request(st.server, caf::infinite, pull_atom_v, std::move(req))
      .then(
        [self, rp, worker, server_node](pull_reply& r) mutable {
          auto& w = *self->state.world;
          auto back_bytes = header_bytes + payload_bytes(r);
          auto back = w.net.send(server_node, worker, back_bytes,
                                 w.now(self->system()));
          hold_until(self, back,
                     [self, rp, r = std::move(r), worker,
                      back_bytes]() mutable {
                       auto& w = *self->state.world;
                       w.trace.event(w.now(self->system()), "<pull", worker,
                                     self->state.index, 0, back_bytes);
                       rp.deliver(std::move(r));
                     });
        },
        [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  });
  return rp;
}

void send_push(link_ptr self, caf::typed_response_promise<uint64_t> rp,
               push_request req, uint32_t worker, uint64_t closure);

caf::result<uint64_t> push(link_ptr self, push_request& req) {
  auto& st = self->state;
  auto& w = *st.world;
  auto worker = req.id.worker;
  if (worker >= w.workers)
    return self->delegate(st.server, push_atom_v, std::move(req));
  auto closure = req.id.closure;
  // The worker computed in zero virtual time: its push leaves once the
  // step's compute time has passed.
  auto compute = w.compute.step_time(worker, closure);
  if (w.charged[worker] != closure) {
    w.charged[worker] = closure;
    w.compute_ns[worker] += compute;
  }
  auto rp = self->make_response_promise<uint64_t>();
  // The links are taken when the push leaves, not now: a link serves
  // messages in the order they are sent in virtual time (a reservation now
  // would hold back messages sent before the push leaves).
  hold_until(self, w.now(self->system()) + compute,
             [self, rp, req = std::move(req), worker, closure]() mutable {
               send_push(self, std::move(rp), std::move(req), worker,
                         closure);
             });
  return rp;
}

/// Worker `worker`'s push of `closure` leaves now: it reaches the server
/// when the network model says, and its ack comes back the same way.
void send_push(link_ptr self, caf::typed_response_promise<uint64_t> rp,
               push_request req, uint32_t worker, uint64_t closure) {
  auto& st = self->state;
  auto& w = *st.world;
  auto server_node = w.workers + st.index;
  auto bytes = header_bytes + payload_bytes(req);
  auto at = w.net.send(worker, server_node, bytes, w.now(self->system()));
  hold_until(self, at, [self, rp, req, worker, server_node, closure,
                        bytes]() mutable {
    auto& st = self->state;
    auto& w = *st.world;
    w.trace.event(w.now(self->system()), "push>", worker, st.index, closure,
                  bytes);
    ++w.pushes[st.index];
    self->request(st.server, caf::infinite, push_atom_v, std::move(req))
      .then(
        [self, rp, worker, server_node, closure](uint64_t clock) mutable {
          auto& w = *self->state.world;
          auto back = w.net.send(server_node, worker, header_bytes,
                                 w.now(self->system()));
          hold_until(self, back, [self, rp, worker, closure, clock]() mutable {
            auto& w = *self->state.world;
            w.trace.event(w.now(self->system()), "<push", worker,
                          self->state.index, closure, header_bytes);
            rp.deliver(clock);
          });
        },
        [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  });
}

sim_link_actor::behavior_type link(link_ptr self, ps_actor server,
                                   uint32_t index,
                                   std::shared_ptr<sim_world> world) {
  self->state.server = server;
  self->state.index = index;
  self->state.world = std::move(world);
  self->link_to(server);
  auto to = [self] { return self->state.server; };
  return ps_forwarding_behavior<sim_link_actor>(
    self, to, [=](pull_atom, pull_request& x) { return pull(self, x); },
    [=](push_atom, push_request& x) { return push(self, x); },
    [=](retry_atom, uint64_t n) {
      auto i = self->state.held.find(n);
      if (i == self->state.held.end())
        return;
      auto go = std::move(i->second);
      self->state.held.erase(i);
      go();
    });
}

} // namespace

sim_world::sim_world(network_model net, compute_model compute,
                     sim_trace& trace, uint32_t workers, uint32_t servers)
  : net(std::move(net)),
    compute(std::move(compute)),
    trace(trace),
    workers(workers),
    compute_ns(workers, 0),
    charged(workers, 0),
    pulls(servers, 0),
    pushes(servers, 0) {
  // nop
}

sim_time sim_world::now(caf::actor_system& sys) const {
  return static_cast<sim_time>(
    std::chrono::duration_cast<std::chrono::nanoseconds>(sys.clock().now()
                                                         - origin)
      .count());
}

sim_link_actor spawn_sim_link(caf::actor_system& sys, ps_actor server,
                              uint32_t index,
                              std::shared_ptr<sim_world> world) {
  return sys.spawn(link, std::move(server), index, std::move(world));
}

} // namespace actorps
