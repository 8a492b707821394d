// A worker's pushes: the gradient of the running step, whole or (layer
// pushes) in pieces as backpropagation produces it, encoded in its wire
// formats; and the pushes sent again when a group moves to a new server.
// The pulls and the compute are in worker_step.cpp.

#include <algorithm>
#include <utility>

#include "caf/actor_system.hpp"

#include "actors/telemetry.hpp" // metrics
#include "actors/worker_state.hpp"
#include "core/placement.hpp"
#include "core/process.hpp"

namespace actorps::detail {

namespace {

/// Encodes the run [from, to) of group `p`'s dense gradient (`grad`: its
/// to - from floats) into `parts`: each run of the plan (its variables' push
/// formats, worker_state::plan) cut to it, with the group's error-feedback
/// residual where the format keeps one.
void encode_runs(worker_state& st, uint32_t p, const float* grad,
                 uint64_t from, uint64_t to, std::vector<encoded_part>& parts) {
  parts.clear();
  for (auto& run : st.plan[p]) {
    auto lo = std::max(run.offset, from);
    auto hi = std::min(run.offset + run.size, to);
    if (lo >= hi)
      continue;
    float* residual = nullptr;
    if (run.format->uses_residual()) {
      auto& kept = st.slots[p].residual;
      kept.resize(st.opts.layout->ps_sizes[p], 0.0f);
      residual = kept.data() + lo;
    }
    encoded_part part;
    part.offset = lo;
    part.format = run.format->name();
    run.format->encode(grad + (lo - from), hi - lo, part.tensor, residual);
    parts.push_back(std::move(part));
  }
}

/// Puts group `p`'s whole dense gradient into `req`, encoded once per
/// closure (a push sent again carries the same bytes: encoding again would
/// count a top-k residual twice).
void encode_gradient(worker_ptr self, uint32_t p, push_request& req) {
  auto& st = self->state;
  auto& slot = st.slots[p];
  if (!slot.encoded_for_seq) {
    auto grad = gather_shards(*st.opts.layout, p, st.grad.data());
    encode_runs(st, p, grad.data(), 0, grad.size(), slot.encoded);
    slot.encoded_for_seq = true;
  }
  req.parts = slot.encoded;
}

/// Puts the run [from, to) of group `p`'s dense gradient into `req` (a
/// piece of a layer push), as floats or encoded (a piece sent again is
/// encoded again: no format with error feedback is allowed with layer
/// pushes, job_config::layer_pushes).
void encode_piece(worker_ptr self, uint32_t p, uint64_t from, uint64_t to,
                  push_request& req) {
  auto& st = self->state;
  auto grad = gather_shards(*st.opts.layout, p, st.grad.data(), from, to);
  if (plain_floats(st.plan, p))
    req.gradient.values = std::move(grad);
  else
    encode_runs(st, p, grad.data(), from, to, req.parts);
}

} // namespace

void push_run(worker_ptr self, uint32_t p, uint64_t from, uint64_t to) {
  auto& st = self->state;
  auto& slot = st.slots[p];
  auto seq = st.seq;
  auto region = st.opts.layout->ps_sizes[p];
  push_request req;
  req.group = p;
  req.view = slot.view;
  req.read_clock = slot.read_clock;
  req.id = update_id{st.opts.index, st.opts.incarnation, st.result.closure};
  req.piece = from > 0 || to < region;
  req.offset = from;
  try {
    if (req.piece)
      encode_piece(self, p, from, to, req);
    else if (region > 0 && !plain_floats(st.plan, p))
      encode_gradient(self, p, req);
    else if (region > 0)
      req.gradient.values = gather_shards(*st.opts.layout, p,
                                          st.grad.data());
  } catch (const std::exception& e) {
    // During the compute (a piece), failing the closure would start the
    // next one under the model's feet: the compute ends first.
    if (st.in_compute) {
      st.piece_error = e.what();
      return;
    }
    return step_error(self, "the push format", e);
  }
  if (from == 0)
    st.routes.fill_push(p, st.tables, req.tables);
  st.result.bytes_pushed += payload_bytes(req);
  if (slot.in_flight == 0) {
    slot.in_flight = ++st.next_token;
    slot.outstanding = 0;
    slot.in_flight_since = steady_clock::now();
  }
  auto token = slot.in_flight;
  slot.runs_sent.emplace_back(from, to);
  if (st.in_compute)
    ++st.result.early_pieces;
  ++slot.outstanding;
  ++st.pending;
  // No timeout (caf::infinite): under sync the ack waits for the round;
  // a server that dies or is cut off is noticed by the monitor (down_msg),
  // which fails the step.
  auto sent = steady_clock::now(); // metrics
  self->request(slot.server, caf::infinite, push_atom_v, std::move(req))
    .then(
      [=](uint64_t) {
        telemetry::request_latency(telemetry::request_kind::push, p,
                                   steady_clock::now() - sent);
        auto& st = self->state;
        auto& slot = st.slots[p];
        if (st.failed || st.seq != seq || slot.in_flight != token)
          return;
        if (--slot.outstanding == 0)
          slot.in_flight = 0;
        if (--st.pending == 0) {
          st.result.push_s = seconds_since(st.t0);
          st.result.peak_rss_bytes = peak_rss_bytes();
          if (st.opts.link_transports)
            std::tie(st.result.links_shm, st.result.links_tcp)
              = st.opts.link_transports();
          st.last_step_s = clock_seconds_since(self, st.step_started);
          finish(self, caf::error{});
        }
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.seq == seq && st.slots[p].in_flight == token
            && !awaits_route(self, p, err))
          fail(self, server_error(self, p, std::move(err)));
      });
}

void push_one(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto region = st.opts.layout->ps_sizes[p];
  push_run(self, p, 0, st.opts.layer_pushes ? st.slots[p].sent_from : region);
}

/// Layer pushes: backpropagation made the flat gradient [first, last)
/// final. Where that extends the final part (a suffix of the model, as
/// backpropagation runs from the last layer), each group whose shards in it
/// are new pushes them as a piece; the run at the start of a region waits
/// for the push after the compute, which carries the table rows.
void layer_ready(worker_ptr self, const float* first, const float* last) {
  auto& st = self->state;
  auto& pl = *st.opts.layout;
  const float* base = st.grad.data();
  if (first < base || last > base + pl.model_size || first >= last
      || static_cast<uint64_t>(last - base) != st.ready_from)
    return; // not next to what is final: pushed after the compute
  st.ready_from = static_cast<uint64_t>(first - base);
  for (uint32_t p = 0; p < st.slots.size(); ++p) {
    auto& sent_from = st.slots[p].sent_from;
    auto from = sent_from;
    for (auto& s : pl.shards)
      if (s.ps == p && s.kind == variable_kind::dense
          && s.model_offset >= st.ready_from && s.ps_offset < from)
        from = s.ps_offset;
    if (from == 0 || from == sent_from)
      continue;
    auto to = sent_from;
    sent_from = from;
    push_run(self, p, from, to);
    if (!st.piece_error.empty())
      return;
  }
}

void start_pieces(worker_ptr self) {
  auto& st = self->state;
  st.ready_from = st.opts.layout->model_size;
  for (uint32_t p = 0; p < st.slots.size(); ++p)
    st.slots[p].sent_from = st.opts.layout->ps_sizes[p];
  st.piece_error.clear();
  st.in_compute = true;
  st.ws->gradient_ready = [self](const float* first, const float* last) {
    if (self->state.piece_error.empty())
      layer_ready(self, first, last);
  };
}

void end_pieces(worker_ptr self) {
  auto& st = self->state;
  st.ws->gradient_ready = nullptr;
  st.in_compute = false;
}

void resend_pushes(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto& slot = st.slots[p];
  // Every run pushed to the old server goes again, as it was cut: the new
  // one drops those it applied already (a piece is named by its closure
  // and run).
  st.pending -= slot.outstanding;
  slot.outstanding = 0;
  auto runs = std::move(slot.runs_sent);
  slot.runs_sent.clear();
  for (auto [from, to] : runs)
    if (!st.failed)
      push_run(self, p, from, to);
}

} // namespace actorps::detail
