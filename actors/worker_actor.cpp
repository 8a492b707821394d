#include "actors/worker_actor.hpp"

#include <chrono>
#include <deque>
#include <random>
#include <thread>

#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "core/dataset.hpp"
#include "core/log.hpp"
#include "core/placement.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// One closure waiting to run or running.
struct job {
  closure_request req;
  caf::typed_response_promise<step_result> promise;
};

struct worker_state {
  worker_options opts;
  std::unique_ptr<model_workspace> ws;
  std::vector<float> params;
  std::vector<float> grad;
  std::vector<float> x;
  std::vector<int32_t> y;
  std::vector<uint64_t> read_clocks;
  std::deque<job> queue; // queue.front() is running when busy
  /// Set when a parameter server is lost: every closure fails with it.
  caf::error ps_lost;
  /// Injected message faults (fault injection): shares of pulls and pushes
  /// dropped or delayed.
  struct {
    double drop = 0;
    double delay = 0;
    std::chrono::milliseconds delay_by{0};
    std::chrono::milliseconds retry_after{200};
    uint64_t dropped = 0;
    uint64_t delayed = 0;
    std::mt19937_64 rng;
  } chaos;
  bool busy = false;
  // -- the running closure ----------------------------------------------------
  size_t pending = 0;
  bool failed = false;
  step_result result;
  clock_type::time_point t0;
  static constexpr const char* name = "worker";
};

using worker_ptr = worker_actor::stateful_pointer<worker_state>;

void start_next(worker_ptr self);

/// Ends the running closure with `value` or `err` and starts the next one.
void finish(worker_ptr self, const caf::error& err) {
  auto& st = self->state;
  auto j = std::move(st.queue.front());
  st.queue.pop_front();
  st.busy = false;
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

/// A pull or push to server `p` failed with `err`: a server that is gone
/// is reported as errc::ps_lost (the dispatcher may wait for its recovery).
caf::error server_error(worker_ptr self, uint32_t p, caf::error err) {
  if (err == caf::sec::request_receiver_down)
    return caf::make_error(errc::ps_lost, "ps", p, self->system().render(err));
  return err;
}

void compute(worker_ptr self);

/// Pushes the running closure's gradient to server `p`.
void push_one(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto closure = st.result.closure;
  push_request req;
  req.read_clock = st.read_clocks[p];
  req.id = update_id{st.opts.index, st.opts.incarnation, closure};
  req.gradient.values = gather_shards(*st.opts.layout, p, st.grad.data());
  self->request(st.opts.servers[p], caf::infinite, push_atom_v, std::move(req))
    .then(
      [=](uint64_t) {
        auto& st = self->state;
        if (st.failed || st.result.closure != closure)
          return;
        if (--st.pending == 0) {
          st.result.push_s = seconds_since(st.t0);
          finish(self, caf::error{});
        }
      },
      [=](caf::error& err) {
        if (self->state.result.closure == closure)
          fail(self, server_error(self, p, std::move(err)));
      });
}

/// Pulls every shard of server `p` for the running closure.
void pull_one(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto closure = st.result.closure;
  self->request(st.opts.servers[p], caf::infinite, pull_atom_v, st.opts.index)
    .then(
      [=](pull_reply& reply) {
        auto& st = self->state;
        if (st.failed || st.result.closure != closure)
          return;
        auto& pl = *st.opts.layout;
        if (reply.values.values.size() != pl.ps_sizes[p])
          return fail(self, caf::make_error(errc::shape_mismatch,
                                            "pull from ps", p, pl.ps_sizes[p],
                                            reply.values.values.size()));
        scatter_shards(pl, p, reply.values.values.data(), st.params.data());
        st.read_clocks[p] = reply.clock;
        if (--st.pending == 0) {
          st.result.pull_s = seconds_since(st.t0);
          compute(self);
        }
      },
      [=](caf::error& err) {
        if (self->state.result.closure == closure)
          fail(self, server_error(self, p, std::move(err)));
      });
}

/// Sends the running closure's pull or push to server `p`, unless injected
/// message faults drop it (it is sent again after the retry timeout, as a
/// sender that timed out would: safe, since a server applies one push per
/// closure) or delay it.
void send_to_server(worker_ptr self, uint32_t p, bool push) {
  auto& st = self->state;
  auto& chaos = st.chaos;
  std::uniform_real_distribution<double> u{0.0, 1.0};
  auto closure = st.result.closure;
  if (chaos.drop > 0 && u(chaos.rng) < chaos.drop) {
    ++chaos.dropped;
    self->delayed_send(self, chaos.retry_after, retry_atom_v, closure, p, push);
    return;
  }
  if (chaos.delay > 0 && u(chaos.rng) < chaos.delay) {
    ++chaos.delayed;
    self->delayed_send(self, chaos.delay_by, retry_atom_v, closure, p, push);
    return;
  }
  if (push)
    push_one(self, p);
  else
    pull_one(self, p);
}

void push_all(worker_ptr self) {
  auto& st = self->state;
  st.t0 = clock_type::now();
  st.pending = st.opts.servers.size();
  for (uint32_t p = 0; p < st.opts.servers.size(); ++p)
    send_to_server(self, p, true);
}

void compute(worker_ptr self) {
  auto& st = self->state;
  auto t0 = clock_type::now();
  auto rows = st.opts.data->batch_size();
  st.opts.data->next(st.x.data(), st.y.data());
  batch_view batch{st.x.data(), st.y.data(), rows};
  st.result.loss = st.opts.net->loss_and_gradient(st.params.data(), batch,
                                                  st.grad.data(), *st.ws);
  st.result.samples = rows;
  auto pos = st.opts.data->position();
  st.result.data_epoch = pos.epoch;
  st.result.data_offset = pos.offset;
  st.result.compute_s = seconds_since(t0);
  push_all(self);
}

void pull_all(worker_ptr self) {
  auto& st = self->state;
  st.t0 = clock_type::now();
  st.pending = st.opts.servers.size();
  for (uint32_t p = 0; p < st.opts.servers.size(); ++p)
    send_to_server(self, p, false);
}

void start_next(worker_ptr self) {
  auto& st = self->state;
  if (st.busy || st.queue.empty())
    return;
  auto& req = st.queue.front().req;
  if (st.ps_lost)
    return finish(self, st.ps_lost);
  if (req.function != train_step_name)
    return finish(self, caf::make_error(errc::unknown_function, req.function));
  st.busy = true;
  st.failed = false;
  st.result = step_result{};
  st.result.closure = req.id;
  st.result.worker = st.opts.index;
  pull_all(self);
}

worker_actor::behavior_type
worker_behavior(worker_actor::stateful_pointer<worker_state> self,
                worker_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  auto rows = st.opts.data->batch_size();
  st.ws = st.opts.net->make_workspace(rows);
  st.params.resize(st.opts.layout->model_size);
  st.grad.resize(st.opts.layout->model_size);
  st.x.resize(rows * st.opts.net->input_dim());
  st.y.resize(rows);
  st.read_clocks.resize(st.opts.servers.size());
  st.chaos.rng.seed(0x9e3779b97f4a7c15ULL ^ st.opts.index);
  // A remote server's death fails no pull or push: CAF only reports it here.
  for (auto& server : st.opts.servers)
    self->monitor(server);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (uint32_t p = 0; p < st.opts.servers.size(); ++p)
      if (st.opts.servers[p].address() == dm.source && !st.ps_lost) {
        if (dm.reason != caf::exit_reason::user_shutdown)
          log::error("worker", static_cast<int>(st.opts.index),
                     "lost ps{}: {}", p, self->system().render(dm.reason));
        st.ps_lost = caf::make_error(errc::ps_lost, "ps", p,
                                     self->system().render(dm.reason));
        fail(self, st.ps_lost);
      }
  });
  return {
    [=](replace_atom, uint32_t p, caf::strong_actor_ptr& ptr) {
      auto ps = caf::actor_cast<ps_actor>(std::move(ptr));
      auto& st = self->state;
      if (p >= st.opts.servers.size())
        return;
      if (st.opts.redial) {
        try {
          ps = st.opts.redial(p);
        } catch (const std::exception& e) {
          log::warn("worker", static_cast<int>(st.opts.index),
                    "cannot reach the recovered ps{} directly ({}); going "
                    "through the coordinator",
                    p, e.what());
        }
      }
      st.opts.servers[p] = std::move(ps);
      self->monitor(st.opts.servers[p]);
      st.ps_lost = caf::error{};
      log::info("worker", static_cast<int>(st.opts.index),
                "uses the recovered ps{}", p);
    },
    [=](freeze_atom, uint64_t ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    },
    [=](chaos_atom, double drop, double delay, uint64_t delay_ms) {
      auto& c = self->state.chaos;
      c.drop = drop;
      c.delay = delay;
      c.delay_by = std::chrono::milliseconds(delay_ms);
    },
    [=](retry_atom, uint64_t closure, uint32_t p, bool push) {
      auto& st = self->state;
      if (!st.busy || st.failed || st.result.closure != closure)
        return;
      if (push)
        push_one(self, p);
      else
        pull_one(self, p);
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
