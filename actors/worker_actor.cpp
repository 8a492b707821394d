#include "actors/worker_actor.hpp"

#include <chrono>
#include <algorithm>
#include <deque>

#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/key_routes.hpp"
#include "actors/telemetry.hpp" // metrics (issue 14)
#include "caf/blocking_actor.hpp"

#include "core/backoff.hpp"
#include "core/dataset.hpp"
#include "core/log.hpp"
#include "core/placement.hpp"
#include "core/process.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

double seconds_since(steady_clock::time_point t0) {
  return std::chrono::duration<double>(steady_clock::now() - t0).count();
}

/// One closure waiting to run or running.
struct job {
  closure_request req;
  caf::typed_response_promise<step_result> promise;
};

/// Where the running closure is.
enum class phase { idle, pulling, pushing };

struct worker_state {
  worker_options opts;
  std::unique_ptr<model_workspace> ws;
  std::vector<float> params;
  std::vector<float> grad;
  example_batch batch;
  std::vector<table_lookup> tables;
  key_routes routes;
  std::vector<uint64_t> read_clocks;
  std::deque<job> queue; // queue.front() is running when busy
  /// Set when a parameter server is lost: every closure fails with it.
  caf::error ps_lost;
  /// Per server: lost (down or unreachable) and not yet reconnected or
  /// replaced; a reconnect attempt is scheduled or running; attempts made.
  std::vector<bool> lost;
  std::vector<bool> reconnecting;
  std::vector<uint32_t> reconnect_tries;
  bool busy = false;
  // -- the running closure ----------------------------------------------------
  /// Counts started steps: a reply is for the running step only if it was
  /// sent by it (a late reply of an earlier step, e.g. of the same closure
  /// run again here, is dropped).
  uint64_t seq = 0;
  /// Per group: the token of the pull or push awaiting its answer (0: none).
  /// Only that request's answer counts: when a route moves the group to
  /// another server, what was in flight is sent there again, and a late
  /// answer of the old server (or none: a server that died with the request)
  /// must neither count twice nor be waited for.
  std::vector<uint64_t> in_flight;
  uint64_t next_token = 0;
  /// With a push format: per group, the running closure's encoded gradient
  /// (sent again as it is: encoding again would count a topk residual
  /// twice) and the error-feedback residual (topk).
  std::vector<encoded_tensor> encoded;
  std::vector<bool> encoded_for_seq;
  std::vector<std::vector<float>> residual;
  /// Decoded values of an encoded pull reply.
  std::vector<float> decoded;
  const step_function* step = nullptr;
  phase at = phase::idle;
  size_t pending = 0;
  bool failed = false;
  step_result result;
  steady_clock::time_point t0;
  static constexpr const char* name = "worker";
};

using worker_ptr = worker_actor::stateful_pointer<worker_state>;

void start_next(worker_ptr self);

/// Schedules an attempt to reconnect to lost server `p` (across processes
/// only), after 0.25 s doubling to 5 s with each failed attempt.
void plan_reconnect(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  if (!st.opts.redial || st.reconnecting[p])
    return;
  st.reconnecting[p] = true;
  auto delay = capped_backoff(std::chrono::milliseconds(250),
                              st.reconnect_tries[p]++,
                              std::chrono::seconds(5));
  self->delayed_send(self, delay, redial_atom_v, p);
}

/// Server `p` is reachable again as `ps`: closures run once no server is
/// lost.
void use_server(worker_ptr self, uint32_t p, ps_actor ps) {
  auto& st = self->state;
  st.opts.servers[p] = std::move(ps);
  self->monitor(st.opts.servers[p]);
  st.lost[p] = false;
  st.reconnect_tries[p] = 0;
  if (std::none_of(st.lost.begin(), st.lost.end(), [](bool x) { return x; }))
    st.ps_lost = caf::error{};
}

/// Ends the running closure with its result or `err` and starts the next one.
/// Frees `xs` (worker_options::lean).
void release(std::vector<float>& xs) {
  std::vector<float>{}.swap(xs);
}

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

/// The running closure's own code failed (the dataset or the model threw):
/// the closure's error, not the worker's. Nothing was pushed.
void step_error(worker_ptr self, const char* where, const std::exception& e) {
  auto& st = self->state;
  log::error("worker", static_cast<int>(st.opts.index),
             "closure {} failed in {}: {}", st.result.closure, where,
             e.what());
  fail(self, caf::make_error(errc::step_failed,
                             "worker " + std::to_string(st.opts.index), where,
                             std::string{e.what()}));
}

/// A pull or push to server `p` failed with `err`: a server that is gone
/// is reported as errc::ps_lost (the dispatcher may wait for its recovery).
caf::error server_error(worker_ptr self, uint32_t p, caf::error err) {
  if (err == caf::sec::request_receiver_down)
    return caf::make_error(errc::ps_lost, "ps", p, self->system().render(err));
  return err;
}

void compute(worker_ptr self);

/// Puts group `p`'s dense gradient into `req` in the push format, encoded
/// once per closure (a push sent again carries the same bytes).
void encode_gradient(worker_ptr self, uint32_t p, push_request& req) {
  auto& st = self->state;
  auto& f = *st.opts.push_format;
  if (!st.encoded_for_seq[p]) {
    auto grad = gather_shards(*st.opts.layout, p, st.grad.data());
    float* residual = nullptr;
    if (f.uses_residual()) {
      st.residual[p].resize(grad.size(), 0.0f);
      residual = st.residual[p].data();
    }
    f.encode(grad.data(), grad.size(), st.encoded[p], residual);
    st.encoded_for_seq[p] = true;
  }
  req.format = f.name();
  req.encoded = st.encoded[p];
}

/// Pushes the running closure's gradients to server `p`.
void push_one(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto seq = st.seq;
  push_request req;
  req.group = p;
  req.view = st.opts.views[p];
  req.read_clock = st.read_clocks[p];
  req.id = update_id{st.opts.index, st.opts.incarnation, st.result.closure};
  if (st.opts.layout->ps_sizes[p] > 0) {
    if (st.opts.push_format) {
      try {
        encode_gradient(self, p, req);
      } catch (const std::exception& e) {
        return step_error(self, "the push format", e);
      }
    } else
      req.gradient.values = gather_shards(*st.opts.layout, p,
                                          st.grad.data());
  }
  st.routes.fill_push(p, st.tables, req.tables);
  st.result.bytes_pushed += payload_bytes(req);
  // No timeout (caf::infinite): under sync the ack waits for the round;
  // a server that dies or is cut off is noticed by the monitor (down_msg),
  // which fails the step.
  auto sent = steady_clock::now(); // metrics (issue 14)
  auto token = st.in_flight[p] = ++st.next_token;
  self->request(st.opts.servers[p], caf::infinite, push_atom_v, std::move(req))
    .then(
      [=](uint64_t) {
        telemetry::request_latency(telemetry::request_kind::push, p,
                                   steady_clock::now() - sent); // issue 14
        auto& st = self->state;
        if (st.failed || st.seq != seq || st.in_flight[p] != token)
          return;
        st.in_flight[p] = 0;
        if (--st.pending == 0) {
          st.result.push_s = seconds_since(st.t0);
          st.result.peak_rss_bytes = peak_rss_bytes();
          finish(self, caf::error{});
        }
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.seq == seq && st.in_flight[p] == token)
          fail(self, server_error(self, p, std::move(err)));
      });
}

/// Pulls the dense region and the batch's rows of server `p`.
void pull_one(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto seq = st.seq;
  pull_request req;
  req.group = p;
  req.view = st.opts.views[p];
  req.worker = st.opts.index;
  req.dense = st.opts.layout->ps_sizes[p] > 0;
  if (st.opts.pull_format && req.dense)
    req.format = st.opts.pull_format->name();
  st.routes.fill_pull(p, req.tables);
  for (auto& t : req.tables)
    st.result.bytes_pulled += t.keys.keys.size() * sizeof(uint64_t);
  // No timeout (caf::infinite): under ssp a pull is held while this worker
  // is ahead; a server that dies or is cut off is noticed by the monitor
  // (down_msg), which fails the step.
  auto sent = steady_clock::now(); // metrics (issue 14)
  auto token = st.in_flight[p] = ++st.next_token;
  self->request(st.opts.servers[p], caf::infinite, pull_atom_v, std::move(req))
    .then(
      [=](pull_reply& reply) {
        telemetry::request_latency(telemetry::request_kind::pull, p,
                                   steady_clock::now() - sent); // issue 14
        auto& st = self->state;
        if (st.failed || st.seq != seq || st.in_flight[p] != token)
          return;
        st.in_flight[p] = 0;
        auto& pl = *st.opts.layout;
        auto dense = pl.ps_sizes[p];
        const float* values = reply.values.values.data();
        auto got = reply.values.values.size();
        if (!reply.format.empty()) {
          if (!st.opts.pull_format || reply.format != st.opts.pull_format->name())
            return fail(self, caf::make_error(errc::bad_message,
                                              "pull from ps", p,
                                              "unexpected format",
                                              reply.format));
          st.decoded.resize(dense);
          try {
            st.opts.pull_format->decode(reply.encoded, st.decoded.data(),
                                        dense);
          } catch (const std::exception& e) {
            return fail(self, caf::make_error(errc::bad_message,
                                              "pull from ps", p,
                                              std::string{e.what()}));
          }
          values = st.decoded.data();
          got = dense;
        }
        if (got != dense)
          return fail(self, caf::make_error(errc::shape_mismatch,
                                            "pull from ps", p, dense, got));
        if (dense > 0)
          scatter_shards(pl, p, values, st.params.data());
        if (auto err = st.routes.scatter_pull(p, reply.tables, st.tables))
          return fail(self, std::move(err));
        st.result.bytes_pulled += payload_bytes(reply);
        st.read_clocks[p] = reply.clock;
        if (--st.pending == 0) {
          st.result.pull_s = seconds_since(st.t0);
          compute(self);
        }
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.seq == seq && st.in_flight[p] == token)
          fail(self, server_error(self, p, std::move(err)));
      });
}

/// Group `p` moved to another server while the running closure awaited its
/// answer: the request goes to the new server (a push the old primary
/// applied and forwarded is a duplicate there, acknowledged, not applied
/// again). Without this, a request held by a server that died before its
/// down message arrived here (the route came first) would never be
/// answered, and the closure would wait forever.
void resend(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  if (!st.busy || st.failed || st.in_flight[p] == 0 || st.ps_lost)
    return;
  log::info("worker", static_cast<int>(st.opts.index),
            "closure {}: its {} of group {} is sent again to the new server",
             st.result.closure, st.at == phase::pushing ? "push" : "pull", p);
  st.in_flight[p] = 0;
  if (st.at == phase::pushing)
    push_one(self, p);
  else
    pull_one(self, p);
}

void push_all(worker_ptr self) {
  auto& st = self->state;
  st.at = phase::pushing;
  st.t0 = steady_clock::now();
  st.pending = st.opts.servers.size();
  for (uint32_t p = 0; p < st.opts.servers.size(); ++p)
    push_one(self, p);
}

void compute(worker_ptr self) {
  auto& st = self->state;
  auto t0 = steady_clock::now();
  for (auto& t : st.tables)
    std::fill(t.grad.begin(), t.grad.end(), 0.0f);
  if (st.opts.lean)
    st.grad.resize(st.opts.layout->model_size);
  model_inputs in{st.params.data(), &st.tables};
  try {
    st.result.loss = st.step->compute(*st.opts.net, in, st.batch,
                                      st.grad.data(), *st.ws);
  } catch (const std::exception& e) {
    return step_error(self, "the model", e);
  }
  if (st.opts.lean)
    release(st.params);
  st.result.compute_s = seconds_since(t0);
  if (!st.step->pushes)
    return finish(self, caf::error{});
  push_all(self);
}

/// Takes the next batch, lets the model name its keys, and pulls.
void begin_step(worker_ptr self) {
  auto& st = self->state;
  if (st.opts.lean)
    st.params.resize(st.opts.layout->model_size);
  telemetry::sample_mailbox(self, "worker", st.opts.index); // issue 14
  try {
    st.opts.data->next(st.batch);
    for (auto& t : st.tables)
      t.occurrences.clear();
    st.opts.net->collect_keys(st.batch, st.tables);
  } catch (const std::exception& e) {
    return step_error(self, "the dataset", e);
  }
  uint64_t keys = 0;
  for (auto& t : st.tables) {
    t.deduplicate();
    keys += t.keys.size();
  }
  st.routes.route(*st.opts.layout, st.tables);
  st.result.samples = st.batch.rows;
  st.result.keys = keys;
  auto pos = st.opts.data->position();
  st.result.data_epoch = pos.epoch;
  st.result.data_offset = pos.offset;
  st.at = phase::pulling;
  st.t0 = steady_clock::now();
  st.pending = st.opts.servers.size();
  for (uint32_t p = 0; p < st.opts.servers.size(); ++p)
    pull_one(self, p);
}

void start_next(worker_ptr self) {
  auto& st = self->state;
  if (st.busy || st.queue.empty())
    return;
  auto& req = st.queue.front().req;
  if (st.ps_lost)
    return finish(self, st.ps_lost);
  st.step = find_step_function(req.function);
  if (st.step == nullptr)
    return finish(self, caf::make_error(errc::unknown_function, req.function));
  st.busy = true;
  st.failed = false;
  ++st.seq;
  std::fill(st.in_flight.begin(), st.in_flight.end(), 0);
  std::fill(st.encoded_for_seq.begin(), st.encoded_for_seq.end(), false);
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
  st.routes = key_routes{layout, static_cast<uint32_t>(st.opts.servers.size())};
  st.read_clocks.resize(st.opts.servers.size());
  st.in_flight.assign(st.opts.servers.size(), 0);
  st.encoded.resize(st.opts.servers.size());
  st.encoded_for_seq.assign(st.opts.servers.size(), false);
  st.residual.resize(st.opts.servers.size());
  st.opts.views.resize(st.opts.servers.size(), 0);
  if (st.opts.server_index.empty())
    for (uint32_t g = 0; g < st.opts.servers.size(); ++g)
      st.opts.server_index.push_back(g);
  st.lost.assign(st.opts.servers.size(), false);
  st.reconnecting.assign(st.opts.servers.size(), false);
  st.reconnect_tries.assign(st.opts.servers.size(), 0);
  // A remote server's death fails no pull or push: CAF only reports it here.
  for (auto& server : st.opts.servers)
    self->monitor(server);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (uint32_t p = 0; p < st.opts.servers.size(); ++p)
      if (st.opts.servers[p].address() == dm.source && !st.lost[p]) {
        if (dm.reason != caf::exit_reason::user_shutdown)
          log::error("worker", static_cast<int>(st.opts.index),
                     "lost ps{}: {}", p, self->system().render(dm.reason));
        st.lost[p] = true;
        st.ps_lost = caf::make_error(errc::ps_lost, "ps", p,
                                     self->system().render(dm.reason));
        fail(self, st.ps_lost);
        plan_reconnect(self, p);
      }
  });
  return {
    [=](redial_atom, uint32_t p) {
      auto& st = self->state;
      if (p >= st.lost.size() || !st.lost[p]) {
        st.reconnecting[p] = false;
        return;
      }
      // Dialling blocks for up to a few seconds: a helper thread does it, so
      // that this worker keeps answering its node and the coordinator.
      auto redial = st.opts.redial;
      auto server = st.opts.server_index[p];
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
      if (p >= st.lost.size())
        return;
      st.reconnecting[p] = false;
      if (!st.lost[p])
        return; // replaced by the coordinator meanwhile
      if (!ptr)
        return plan_reconnect(self, p);
      auto index = static_cast<int>(st.opts.index);
      auto server = st.opts.server_index[p];
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
        if (r.group >= st.opts.servers.size() || r.view < st.opts.views[r.group]
            || (r.view == st.opts.views[r.group]
                && r.ps == st.opts.server_index[r.group] && !st.lost[r.group]))
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
                      "coordinator",
                      r.ps, e.what());
          }
        }
        st.opts.views[r.group] = r.view;
        st.opts.server_index[r.group] = r.ps;
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
    [=](run_atom, closure_request& req) -> caf::result<step_result> {
      auto rp = self->make_response_promise<step_result>();
      self->state.queue.push_back(job{std::move(req), rp});
      start_next(self);
      return rp;
    },
  };
}

} // namespace

worker_actor spawn_worker(caf::actor_system& sys, worker_options opts) {
  return sys.spawn(worker_behavior, std::move(opts));
}

} // namespace actorps
