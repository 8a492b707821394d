#include "cluster/sim/sim_link.hpp"

#include <algorithm>
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

/// How long a worker waits for a dropped pull or push before it sends it
/// again (as actors/fault_injection.cpp holds a dropped one in one process).
constexpr sim_time retry_ns = 200'000'000;

uint64_t wire_bytes(const pull_request& x) {
  uint64_t keys = 0;
  for (auto& t : x.tables)
    keys += t.keys.keys.size();
  return header_bytes + keys * sizeof(uint64_t);
}

/// The bytes a pull reply or push of replica group `p` takes on the wire
/// (the group, not the server: after a failover a server serves two).
uint64_t wire_bytes(const sim_world& w, uint32_t p, const pull_reply& x) {
  auto n = header_bytes + payload_bytes(x);
  if (w.dense_pull_bytes.empty())
    return n;
  auto dense = x.values.values.size() * sizeof(float) + x.encoded.bytes.size();
  return n - dense + (dense > 0 ? w.dense_pull_bytes.at(p) : 0);
}

uint64_t wire_bytes(const sim_world& w, uint32_t p, const push_request& x) {
  auto n = header_bytes + payload_bytes(x);
  if (w.dense_push_bytes.empty())
    return n;
  auto dense = x.gradient.values.size() * sizeof(float);
  for (auto& part : x.parts)
    dense += part.tensor.bytes.size();
  return n - dense + (dense > 0 ? w.dense_push_bytes.at(p) : 0);
}

/// The bytes of the reply to `x` (of group `p`), before the server answers
/// (lazy replies): the dense values in the pull format, and per table
/// shard the rows of its keys (a reply does not repeat the keys).
uint64_t reply_estimate(const sim_world& w, uint32_t p, const pull_request& x) {
  uint64_t n = header_bytes + (x.dense ? w.reply_dense_bytes.at(p) : 0);
  for (auto& t : x.tables) {
    auto dim = w.layout->variables.at(w.layout->shards.at(t.shard).variable)
                 .cols;
    n += t.keys.keys.size() * dim * sizeof(float); // rows, not the keys
  }
  return n;
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
                     release_atom_v, n);
}

/// Runs `go` now if node `n` is not stopped, else when its stop ends.
void when_awake(link_ptr self, uint32_t n, std::function<void()> go) {
  auto& w = *self->state.world;
  auto now = w.now(self->system());
  auto t = w.awake(n, now);
  if (t <= now)
    go();
  else
    hold_until(self, t, std::move(go));
}

/// Sends `bytes` from node `from` to node `to` now; `next` runs when they
/// have arrived. With a host model (cluster/sim/sim_host.hpp) the sender first
/// spends CPU on them, and the receiver after they arrived.
void transfer(link_ptr self, uint32_t from, uint32_t to, uint64_t bytes,
              std::function<void()> next) {
  auto& w = *self->state.world;
  auto now = w.now(self->system());
  if (!w.host.enabled()) {
    hold_until(self, w.net.send(from, to, bytes, now), std::move(next));
    return;
  }
  auto sent = w.host.run(from, w.host.message_cost(bytes), now);
  hold_until(self, sent, [self, from, to, bytes,
                          next = std::move(next)]() mutable {
    auto& w = *self->state.world;
    auto at = w.net.send(from, to, bytes, w.now(self->system()));
    hold_until(self, at, [self, to, bytes, next = std::move(next)]() mutable {
      auto& w = *self->state.world;
      hold_until(self,
                 w.host.run(to, w.host.message_cost(bytes),
                            w.now(self->system())),
                 std::move(next));
    });
  });
}

/// A pull or push that reached the server's side of the network at `sent`
/// (when it left the worker): dropped ones leave again after the retry
/// timeout (`again`), delayed ones arrive later; then `arrive` runs.
void through_chaos(link_ptr self, sim_time sent, std::function<void()> again,
                   std::function<void()> arrive) {
  auto& w = *self->state.world;
  auto now = w.now(self->system());
  switch (w.chaos()) {
    case 1:
      hold_until(self, std::max(now, sent + retry_ns), std::move(again));
      return;
    case 2:
      hold_until(self, now + w.delay_ns, std::move(arrive));
      return;
    default:
      arrive();
  }
}

void arrives(link_ptr self, caf::typed_response_promise<pull_reply> rp,
             pull_request req, uint64_t bytes);
void arrives(link_ptr self, caf::typed_response_promise<uint64_t> rp,
             push_request req, uint64_t bytes);

uint32_t sender_of(const pull_request& x) {
  return x.worker;
}

uint32_t sender_of(const push_request& x) {
  return x.id.worker;
}

uint64_t request_bytes(const sim_world&, const pull_request& x) {
  return wire_bytes(x);
}

uint64_t request_bytes(const sim_world& w, const push_request& x) {
  return wire_bytes(w, x.group, x);
}

/// A worker's pull or push leaves it now (or when its stop ends) and
/// reaches the server when the network model says (dropped: sent again).
template <class Reply, class Request>
void leaves(link_ptr self, caf::typed_response_promise<Reply> rp,
            Request req) {
  auto worker = sender_of(req);
  when_awake(self, worker, [self, rp, req = std::move(req)]() mutable {
    auto& w = *self->state.world;
    auto worker = sender_of(req);
    auto server_node = w.workers + self->state.index;
    auto bytes = request_bytes(w, req);
    auto sent = w.now(self->system());
    transfer(self, w.link_of(worker), server_node, bytes,
             [self, rp, req = std::move(req), sent, bytes]() mutable {
      auto copy = req;
      through_chaos(
        self, sent,
        [self, rp, req = std::move(copy)]() mutable {
          leaves(self, std::move(rp), std::move(req));
        },
        [self, rp, req = std::move(req), bytes]() mutable {
          arrives(self, std::move(rp), std::move(req), bytes);
        });
    });
  });
}

/// A pull reply of `bytes` reached worker `worker`: delivered once the
/// worker is awake.
void deliver_pull(link_ptr self, caf::typed_response_promise<pull_reply> rp,
                  pull_reply r, uint32_t worker, uint64_t bytes) {
  when_awake(self, worker, [self, rp, r = std::move(r), worker,
                            bytes]() mutable {
    auto& w = *self->state.world;
    w.trace.event(w.now(self->system()), "<pull", worker, self->state.index,
                  0, bytes);
    rp.deliver(std::move(r));
  });
}

/// The pull reached the server: its reply queues on the links now, and
/// the server reads the values when the reply's transmission starts.
void lazy_reply(link_ptr self, caf::typed_response_promise<pull_reply> rp,
                pull_request req) {
  auto& st = self->state;
  auto& w = *st.world;
  auto worker = req.worker;
  auto server_node = w.workers + st.index;
  auto group = req.group;
  auto estimate = reply_estimate(w, group, req);
  auto at = w.net.send(server_node, w.link_of(worker), estimate,
                       w.now(self->system()));
  auto start = at - w.net.spec().latency_ns - w.net.transmission(estimate);
  hold_until(self, start, [self, rp, req = std::move(req), worker, at,
                           estimate, group]() mutable {
    self->request(self->state.server, caf::infinite, pull_atom_v,
                  std::move(req))
      .then(
        [self, rp, worker, at, estimate, group](pull_reply& r) mutable {
          auto& w = *self->state.world;
          if (wire_bytes(w, group, r) != estimate)
            ++w.estimate_misses;
          hold_until(self, at, [self, rp, r = std::move(r), worker,
                                estimate]() mutable {
            deliver_pull(self, std::move(rp), std::move(r), worker, estimate);
          });
        },
        [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  });
}

/// The pull is at the server's link: the server answers once awake, and
/// the reply travels back.
void arrives(link_ptr self, caf::typed_response_promise<pull_reply> rp,
             pull_request req, uint64_t bytes) {
  auto server_node = self->state.world->workers + self->state.index;
  when_awake(self, server_node, [self, rp, req = std::move(req),
                                 bytes]() mutable {
    auto& st = self->state;
    auto& w = *st.world;
    auto worker = req.worker;
    auto group = req.group;
    auto server_node = w.workers + st.index;
    w.trace.event(w.now(self->system()), "pull>", worker, st.index, 0, bytes);
    ++w.pulls[st.index];
    if (w.lazy_replies)
      return lazy_reply(self, std::move(rp), std::move(req));
    self->request(st.server, caf::infinite, pull_atom_v, std::move(req))
      .then(
        [self, rp, worker, server_node, group](pull_reply& r) mutable {
          auto& w = *self->state.world;
          auto back_bytes = wire_bytes(w, group, r);
          transfer(self, server_node, w.link_of(worker), back_bytes,
                   [self, rp, r = std::move(r), worker,
                    back_bytes]() mutable {
                     deliver_pull(self, std::move(rp), std::move(r), worker,
                                  back_bytes);
                   });
        },
        [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  });
}

caf::result<pull_reply> pull(link_ptr self, pull_request& req) {
  auto& st = self->state;
  auto& w = *st.world;
  if (req.worker == no_worker || req.worker >= w.workers)
    return self->delegate(st.server, pull_atom_v, std::move(req));
  auto rp = self->make_response_promise<pull_reply>();
  leaves(self, rp, std::move(req));
  return rp;
}


/// The step of worker `worker` that started at `start` and takes `compute`
/// ns ends: its push leaves, unless a stop lengthened the step or the
/// worker was killed meanwhile (then the push dies with it).
void step_done(link_ptr self, caf::typed_response_promise<uint64_t> rp,
               push_request req, sim_time start, sim_time compute,
               uint64_t life) {
  auto& w = *self->state.world;
  auto worker = req.id.worker;
  if (w.lives[worker] != life)
    return;
  auto end = w.step_end(worker, start, compute);
  if (end > w.now(self->system())) {
    hold_until(self, end, [=, req = std::move(req)]() mutable {
      step_done(self, std::move(rp), std::move(req), start, compute, life);
    });
    return;
  }
  leaves(self, std::move(rp), std::move(req));
}

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
  auto now = w.now(self->system());
  if (w.charged[worker] != closure) {
    w.charged[worker] = closure;
    w.compute_ns[worker] += compute;
    // The step waits for its machine's compute unit (never, with one
    // worker per machine: its last step ended before it pulled).
    auto& free = w.machine_free[worker / w.per_machine];
    w.step_start[worker] = std::max(now, free);
    free = w.step_start[worker] + compute;
  }
  auto rp = self->make_response_promise<uint64_t>();
  // The links are taken when the push leaves, not now: a link serves
  // messages in the order they are sent in virtual time (a reservation now
  // would hold back messages sent before the push leaves).
  auto life = w.lives[worker];
  // With a host model the step also waits for a core. A push of a closure
  // already charged (to another group, or sent again) starts with it.
  auto start = w.host.enabled()
                 ? w.host.run(worker, compute, now) - compute
                 : std::max(now, w.step_start[worker]);
  hold_until(self, w.step_end(worker, start, compute),
             [=, req = std::move(req)]() mutable {
               step_done(self, std::move(rp), std::move(req), start, compute,
                         life);
             });
  return rp;
}

/// The push is at the server's link: applied once the server is awake; the
/// acknowledgement travels back.
void arrives(link_ptr self, caf::typed_response_promise<uint64_t> rp,
             push_request req, uint64_t bytes) {
  auto server_node = self->state.world->workers + self->state.index;
  when_awake(self, server_node, [self, rp, req = std::move(req),
                                 bytes]() mutable {
    auto& st = self->state;
    auto& w = *st.world;
    auto worker = req.id.worker;
    auto closure = req.id.closure;
    auto server_node = w.workers + st.index;
    w.trace.event(w.now(self->system()), "push>", worker, st.index, closure,
                  bytes);
    ++w.pushes[st.index];
    // With a host model, the server's update takes CPU time before the ack.
    uint64_t floats = 0;
    if (w.host.enabled()) {
      if (!req.gradient.values.empty() || !req.parts.empty())
        floats = w.layout->ps_sizes.at(req.group);
      for (auto& t : req.tables)
        floats += t.values.values.size();
    }
    self->request(st.server, caf::infinite, push_atom_v, std::move(req))
      .then(
        [self, rp, worker, server_node, closure,
         floats](uint64_t clock) mutable {
          auto& w = *self->state.world;
          auto ack = [self, rp, worker, server_node, closure,
                      clock]() mutable {
            transfer(self, server_node,
                     self->state.world->link_of(worker), header_bytes,
                     [self, rp, worker, closure, clock]() mutable {
              when_awake(self, worker, [self, rp, worker, closure,
                                        clock]() mutable {
                auto& w = *self->state.world;
                w.trace.event(w.now(self->system()), "<push", worker,
                              self->state.index, closure, header_bytes);
                rp.deliver(clock);
              });
            });
          };
          if (!w.host.enabled())
            return ack();
          hold_until(self,
                     w.host.run(server_node, w.host.apply_cost(floats),
                                w.now(self->system())),
                     std::move(ack));
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
    [=](release_atom, uint64_t n) {
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
                     sim_trace& trace, uint32_t workers, uint32_t servers,
                     uint32_t per_machine)
  : net(std::move(net)),
    compute(std::move(compute)),
    trace(trace),
    workers(workers),
    per_machine(std::max<uint32_t>(per_machine, 1)),
    machine_free(workers, 0),
    compute_ns(workers, 0),
    charged(workers, 0),
    step_start(workers, 0),
    pulls(servers, 0),
    pushes(servers, 0),
    stopped(workers + servers, std::make_pair(sim_time{0}, sim_time{0})),
    lives(workers, 0) {
  // nop
}

sim_time sim_world::awake(uint32_t n, sim_time t) const {
  auto [from, until] = stopped.at(n);
  return t >= from && t < until ? until : t;
}

sim_time sim_world::step_end(uint32_t w, sim_time t, sim_time duration) const {
  auto end = t + duration;
  auto [from, until] = stopped.at(w);
  auto a = std::max(from, t);
  auto b = std::min(until, end);
  return b > a ? end + (until - a) : end;
}

int sim_world::chaos() {
  if (drop <= 0 && delay <= 0)
    return 0;
  auto draw = [this] {
    // splitmix64 (Steele, Lea and Flood, OOPSLA 2014): a fixed sequence.
    uint64_t z = (chaos_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  };
  if (drop > 0 && draw() < drop) {
    ++dropped;
    return 1;
  }
  if (delay > 0 && draw() < delay) {
    ++delayed;
    return 2;
  }
  return 0;
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
