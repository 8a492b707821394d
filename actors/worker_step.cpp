// One step of a worker's closure: the pulls (or the values pulled ahead),
// the compute, and the start of the pushes (which are in worker_push.cpp).
// The closure's life around it (queue, failure, routes) is in
// worker_actor.cpp.

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "caf/actor_system.hpp"

#include "actors/telemetry.hpp" // metrics
#include "actors/worker_state.hpp"
#include "core/dataset.hpp"
#include "core/log.hpp"
#include "core/placement.hpp"
#include "core/process.hpp"

namespace actorps::detail {

namespace {

void compute(worker_ptr self);


/// Sends pull `req` to group `p`'s server: as an urgent message under
/// layer pushes (pull_request::urgent), so that it passes the pushes
/// queued there. Only to an actor of this process (a server in one
/// process, or the data link to one in another): CAF 0.17's BASP loses
/// the answer to an urgent request sent to a remote actor (tried: a job
/// with --data-channel off stalled at its first step).
auto request_pull(worker_ptr self, uint32_t p, pull_request req) {
  auto& st = self->state;
  auto& server = st.slots[p].server;
  req.urgent = st.opts.layer_pushes && server.node() == self->node();
  if (req.urgent)
    return self->request<caf::message_priority::high>(
      server, caf::infinite, pull_atom_v, std::move(req));
  return self->request(server, caf::infinite, pull_atom_v, std::move(req));
}

} // namespace

void take_pull(worker_ptr self, uint32_t p, pull_reply& reply, bool with_dense,
               bool rows, uint32_t slice) {
  auto& st = self->state;
  auto& pl = *st.opts.layout;
  auto part = slice == whole_region ? pull_slice{0, pl.ps_sizes[p], 0}
                                    : st.slots[p].slices[slice];
  auto dense = part.to - part.from;
  if (with_dense) {
    const float* values = reply.values.values.data();
    auto got = reply.values.values.size();
    if (!reply.format.empty()) {
      auto* f = st.opts.pull_format.get();
      std::shared_ptr<const wire_format> chosen_before;
      if (f == nullptr || reply.format != f->name()) {
        // Only a format chosen by measurement changes while pulls are out.
        if (!st.opts.choose_pull_format)
          return fail(self, caf::make_error(errc::bad_message, "pull from ps",
                                            p, "unexpected format",
                                            reply.format));
        try {
          chosen_before = make_wire_format(reply.format);
        } catch (const std::exception& e) {
          return fail(self, caf::make_error(errc::bad_message, "pull from ps",
                                            p, std::string{e.what()}));
        }
        f = chosen_before.get();
      }
      st.decoded.resize(dense);
      try {
        f->decode(reply.encoded, st.decoded.data(), dense);
      } catch (const std::exception& e) {
        return fail(self, caf::make_error(errc::bad_message, "pull from ps", p,
                                          std::string{e.what()}));
      }
      values = st.decoded.data();
      got = dense;
    }
    if (got != dense)
      return fail(self, caf::make_error(errc::shape_mismatch, "pull from ps",
                                        p, dense, got));
    if (dense > 0 && slice == whole_region)
      scatter_shards(pl, p, values, st.params.data());
    else if (dense > 0)
      scatter_shards(pl, p, part.from, part.to, values, st.params.data());
  }
  if (rows)
    if (auto err = st.routes.scatter_pull(p, reply.tables, st.tables))
      return fail(self, std::move(err));
  st.result.bytes_pulled += payload_bytes(reply);
  // A push's staleness is counted from its oldest values: with values pulled
  // ahead and rows pulled now, from the values pulled ahead.
  auto& read_clock = st.slots[p].read_clock;
  read_clock = std::min(read_clock, reply.clock);
  note_part(self, p, with_dense, slice, rows);
  if (--st.pending == 0) {
    // Forward stages run on the way count as compute, not as waiting.
    st.result.pull_s = seconds_since(st.t0) - st.result.compute_s;
    compute(self);
  } else if (st.staged && !st.hold_stages) {
    run_ready_stages(self);
  }
}

namespace {

/// A pull of group `p` as the running step sends it (no dense values, no
/// rows yet).
pull_request pull_of(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  pull_request req;
  req.group = p;
  req.view = st.slots[p].view;
  req.worker = st.opts.index;
  req.dense = false;
  return req;
}

/// A pull of group `p`'s dense values in the pull format: slice `slice`
/// of them, or all (whole_region).
pull_request values_pull(worker_ptr self, uint32_t p, uint32_t slice) {
  auto& st = self->state;
  auto req = pull_of(self, p);
  req.dense = true;
  if (st.opts.pull_format)
    req.format = st.opts.pull_format->name();
  if (slice != whole_region) {
    auto& part = st.slots[p].slices[slice];
    req.slice = true;
    req.offset = part.from;
    req.count = part.to - part.from;
  }
  return req;
}

/// Adds the rows of the running step's keys on group `p` to `req`.
void add_rows(worker_ptr self, uint32_t p, pull_request& req) {
  auto& st = self->state;
  st.routes.fill_pull(p, req.tables);
  for (auto& t : req.tables)
    st.result.bytes_pulled += t.keys.keys.size() * sizeof(uint64_t);
}

/// Priority pulls: sends the slices of group `p`'s dense values that are
/// not in yet, first layers first, under a new token of the group (counted
/// in its slot's outstanding); its rows go with the first if they are not
/// in.
void pull_slices(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto& slot = st.slots[p];
  auto seq = st.seq;
  auto token = slot.in_flight = ++st.next_token;
  slot.outstanding = 0;
  auto rows = !slot.rows_in;
  for (uint32_t i = 0; i < slot.slices.size(); ++i) {
    if (slot.slice_in[i])
      continue;
    auto req = values_pull(self, p, i);
    auto with_rows = rows;
    if (rows)
      add_rows(self, p, req);
    rows = false;
    ++slot.outstanding;
    auto sent = steady_clock::now(); // metrics
    request_pull(self, p, std::move(req))
      .then(
        [=](pull_reply& reply) {
          telemetry::request_latency(telemetry::request_kind::pull, p,
                                     steady_clock::now() - sent);
          auto& st = self->state;
          auto& slot = st.slots[p];
          if (st.failed || st.seq != seq || slot.in_flight != token)
            return;
          if (--slot.outstanding == 0)
            slot.in_flight = 0;
          take_pull(self, p, reply, true, with_rows, i);
        },
        [=](caf::error& err) {
          auto& st = self->state;
          if (st.seq == seq && st.slots[p].in_flight == token
              && !awaits_route(self, p, err))
            fail(self, server_error(self, p, std::move(err)));
        });
  }
}

/// Pulls the batch's rows of server `p`, and its dense region unless the
/// step takes it from what was pulled ahead (`dense` false); in slices
/// under priority pulls unless `whole`.
void pull_one(worker_ptr self, uint32_t p, bool dense = true,
              bool whole = false) {
  if (dense && !whole && sliced(self, p))
    return pull_slices(self, p);
  auto& st = self->state;
  auto seq = st.seq;
  auto req = pull_of(self, p);
  req.dense = dense && st.opts.layout->ps_sizes[p] > 0;
  if (st.opts.pull_format && req.dense)
    req.format = st.opts.pull_format->name();
  add_rows(self, p, req);
  // No timeout (caf::infinite): under ssp a pull is held while this worker
  // is ahead; a server that dies or is cut off is noticed by the monitor
  // (down_msg), which fails the step.
  auto sent = steady_clock::now(); // metrics
  auto token = st.slots[p].in_flight = ++st.next_token;
  request_pull(self, p, std::move(req))
    .then(
      [=](pull_reply& reply) {
        telemetry::request_latency(telemetry::request_kind::pull, p,
                                   steady_clock::now() - sent);
        auto& st = self->state;
        if (st.failed || st.seq != seq || st.slots[p].in_flight != token)
          return;
        st.slots[p].in_flight = 0;
        take_pull(self, p, reply, dense, true);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.seq == seq && st.slots[p].in_flight == token
            && !awaits_route(self, p, err))
          fail(self, server_error(self, p, std::move(err)));
      });
}

/// Sends the pull of group `p`'s dense values for the next closure: whole,
/// or in slices under priority pulls (whatever the next closure's step
/// function: one without stages only puts them in place).
void send_ahead(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto& slot = st.slots[p];
  auto& a = slot.ahead;
  a = pull_ahead{};
  a.at = pull_ahead::state::in_flight;
  a.token = ++st.next_token;
  a.sent = self->system().clock().now();
  a.sliced = !slot.slices.empty();
  auto parts = a.sliced ? static_cast<uint32_t>(slot.slices.size()) : 1u;
  a.replies.resize(parts);
  a.stored.assign(parts, false);
  a.left = parts;
  auto token = a.token;
  for (uint32_t i = 0; i < parts; ++i) {
    request_pull(self, p, values_pull(self, p, a.sliced ? i : whole_region))
      .then(
        [=](pull_reply& reply) { ahead_arrived(self, p, token, i, reply); },
        [=](caf::error& err) { ahead_failed(self, p, token, err); });
  }
}

/// Sends the next step's pulls of dense values ahead. Under overlap they
/// go out just before the pushes: the values come in on the worker's
/// downlink while the push goes out on its uplink, and lack this push (the
/// next push is one step staler; the servers count it). Under prefetch they
/// go right after the pushes: they wait behind them on the connection and
/// in the server, so they see them, and the next closure finds its values
/// on the way instead of asking after its start.
void pull_ahead_all(worker_ptr self) {
  auto& st = self->state;
  for (uint32_t p = 0; p < st.slots.size(); ++p)
    if (st.opts.layout->ps_sizes[p] > 0 && !st.slots[p].lost)
      send_ahead(self, p);
}

void push_all(worker_ptr self) {
  auto& st = self->state;
  st.at = phase::pushing;
  st.t0 = steady_clock::now();
  if (st.opts.overlap)
    pull_ahead_all(self);
  // (pending counts the pieces pushed during the compute already: their
  // answers cannot arrive before this handler returns.)
  for (uint32_t p = 0; p < st.slots.size() && !st.failed; ++p)
    push_one(self, p);
  if (st.opts.prefetch && !st.failed)
    pull_ahead_all(self);
}

void compute(worker_ptr self) {
  auto& st = self->state;
  auto t0 = steady_clock::now();
  for (auto& t : st.tables)
    std::fill(t.grad.begin(), t.grad.end(), 0.0f);
  if (st.opts.lean)
    st.grad.resize(st.opts.layout->model_size);
  model_inputs in{st.params.data(), &st.tables,
                  st.staged ? st.stages_run : 0};
  auto layers = st.opts.layer_pushes && st.step->pushes;
  if (layers)
    start_pieces(self);
  // Progressive evaluation of a closure with a data range: the model adds
  // each example's score, from the values pulled before this update.
  eval_accumulator predictions;
  auto& range = st.queue.front().req.range;
  auto progressive = !range.empty() && range.progressive;
  st.ws->predictions = progressive ? &predictions : nullptr;
  try {
    st.result.loss = st.step->compute(*st.opts.net, in, st.batch,
                                      st.grad.data(), *st.ws);
  } catch (const std::exception& e) {
    st.ws->predictions = nullptr;
    end_pieces(self);
    return step_error(self, "the model", e);
  }
  st.ws->predictions = nullptr;
  if (progressive) {
    st.result.scores = std::move(predictions.scores);
    st.result.labels = std::move(predictions.labels);
  }
  end_pieces(self);
  if (!st.piece_error.empty())
    return step_error(self, "the push format",
                      std::runtime_error{st.piece_error});
  if (st.opts.lean)
    release(st.params);
  st.result.compute_s += seconds_since(t0);
  if (!st.step->pushes)
    return finish(self, caf::error{});
  push_all(self);
}

} // namespace

double clock_seconds_since(worker_ptr self, steady_clock::time_point t) {
  return std::chrono::duration<double>(self->system().clock().now() - t)
    .count();
}

void release(std::vector<float>& xs) {
  std::vector<float>{}.swap(xs);
}

void begin_step(worker_ptr self) {
  auto& st = self->state;
  st.step_started = self->system().clock().now();
  if (st.opts.lean)
    st.params.resize(st.opts.layout->model_size);
  telemetry::sample_mailbox(self, "worker", st.opts.index);
  auto& range = st.queue.front().req.range;
  try {
    if (range.empty()) {
      st.opts.data->next(st.batch);
    } else {
      if (!st.opts.ranges)
        throw std::logic_error("this worker reads no data ranges");
      st.opts.ranges->read(range, st.batch);
    }
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
  auto pos = range.empty() ? st.opts.data->position()
                           : data_position{range.part, range.end};
  st.result.data_epoch = pos.epoch;
  st.result.data_offset = pos.offset;
  st.at = phase::pulling;
  st.t0 = steady_clock::now();
  auto n = static_cast<uint32_t>(st.slots.size());
  // Counted first, taken after: a part that is already here must not start
  // the compute before every request is out.
  std::vector<uint32_t> ready;
  st.pending = 0;
  for (auto& slot : st.slots)
    slot.read_clock = std::numeric_limits<uint64_t>::max();
  begin_slices(self);
  for (uint32_t p = 0; p < n; ++p) {
    auto ahead = use_ahead(self, p);
    if (ahead) {
      auto& a = st.slots[p].ahead;
      st.pending += a.replies.size();
      a.taken_by = st.seq;
      if (std::find(a.stored.begin(), a.stored.end(), true) != a.stored.end())
        ready.push_back(p);
    }
    if (ahead && st.routes.has_keys(p))
      ++st.pending;
    else if (!ahead)
      st.pending += pull_parts(self, p);
  }
  for (uint32_t p = 0; p < n; ++p) {
    auto own = st.slots[p].ahead.taken_by != st.seq;
    if (own || st.routes.has_keys(p))
      pull_one(self, p, own);
  }
  auto seq = st.seq;
  for (auto p : ready) {
    if (st.failed || st.seq != seq)
      return;
    take_ahead(self, p);
  }
}

void resend(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  if (!st.busy || st.failed || st.ps_lost)
    return;
  auto& slot = st.slots[p];
  if (st.at == phase::pulling && awaits_ahead(self, p)) {
    // The values pulled ahead from the old server: the pull of the group
    // goes to the new server whole (dense values and rows), one part in
    // place of the ahead parts still out and of the rows.
    st.pending -= slot.ahead.left;
    slot.ahead = pull_ahead{};
    if (slot.in_flight != 0)
      --st.pending;
    ++st.pending;
    log::info("worker", static_cast<int>(st.opts.index),
              "closure {}: its pull of group {} is sent again to the new "
              "server",
              st.result.closure, p);
    slot.in_flight = 0;
    return pull_one(self, p, true, true);
  }
  if (slot.in_flight == 0)
    return;
  auto pushing = st.at == phase::pushing;
  if (pushing)
    log::info("worker", static_cast<int>(st.opts.index),
              "closure {}: its push of group {} is sent again to the new "
              "server after {:.1f} ms",
              st.result.closure, p,
              std::chrono::duration<double, std::milli>(
                steady_clock::now() - slot.in_flight_since)
                .count());
  else
    log::info("worker", static_cast<int>(st.opts.index),
              "closure {}: its pull of group {} is sent again to the new "
              "server",
              st.result.closure, p);
  slot.in_flight = 0;
  if (st.at == phase::pushing)
    resend_pushes(self, p);
  else
    pull_one(self, p);
}


} // namespace actorps::detail
