#include "actors/ps_actor.hpp"
#include "actors/ps_pieces.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/ps_chain.hpp"
#include "actors/ps_move.hpp"
#include "actors/ps_replica.hpp"
#include "actors/ps_state.hpp"
#include "actors/telemetry.hpp"
#include "core/staleness_histogram.hpp" // metrics
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/process.hpp"

namespace actorps {

namespace {

/// Whether worker `w` may read now under ssp.
bool may_read(const ps_state& st, const ps_replica& r, uint32_t w) {
  if (st.opts.mode != consistency::ssp || w == no_worker)
    return true;
  auto slowest = *std::min_element(r.worker_clock.begin(),
                                   r.worker_clock.end());
  return r.worker_clock[w] <= slowest + st.opts.staleness;
}

/// The wire format `name` (cached), or null if it cannot carry pulled
/// values (unknown, or sparse: top-k).
const wire_format* value_format(ps_state& st, const std::string& name) {
  auto i = st.formats.find(name);
  if (i == st.formats.end()) {
    if (st.formats.size() >= 8)
      return nullptr;
    try {
      i = st.formats.emplace(name, make_wire_format(name)).first;
    } catch (const input_error&) {
      return nullptr;
    }
  }
  return i->second->is_sparse() ? nullptr : i->second.get();
}

/// The reply to `req`: read_replica, its dense values encoded in the
/// format the request names (checked when it arrived). `remote`: the reply
/// goes to another process and is only serialised, so the dense values go
/// out as the region's snapshot instead of a copy.
pull_reply answer(ps_state& st, ps_replica& r, const pull_request& req,
                  bool remote = false) {
  auto reply = read_replica(r, req, remote && req.format.empty());
  if (!req.format.empty()) {
    if (auto* f = value_format(st, req.format)) {
      auto& v = reply.values.values;
      f->encode(v.data(), v.size(), reply.encoded, nullptr);
      reply.format = req.format;
      v.clear();
      v.shrink_to_fit();
    }
  }
  return reply;
}

/// Whether the reply to the current request leaves this process at once:
/// its sender is on another node and no stage forwards it first.
bool replies_to_remote(ps_ptr self) {
  auto* e = self->current_mailbox_element();
  auto& sender = self->current_sender();
  return e != nullptr && e->stages.empty() && sender != nullptr
         && sender->node() != self->node();
}

void release_pulls(ps_ptr self, ps_replica& r) {
  auto held = std::move(r.held_pulls);
  r.held_pulls.clear();
  for (auto& h : held) {
    if (may_read(self->state, r, h.req.worker))
      h.promise.deliver(answer(self->state, r, h.req));
    else
      r.held_pulls.push_back(std::move(h));
  }
}


/// An encoded push (req.parts set) becomes a plain one: each part decoded
/// into its run of req.gradient (the region's size; a piece: the floats of
/// its run). The formats come with the push, so that a server needs no
/// setting of its own.
caf::error decode_gradient(ps_state& st, const ps_replica& r,
                           push_request& req) {
  if (req.parts.empty())
    return {};
  auto bad = [&](const std::string& why) {
    return caf::make_error(errc::bad_message, "push to ps", st.opts.index,
                           "group", r.group, why);
  };
  if (!req.gradient.values.empty())
    return bad("a gradient both as floats and encoded");
  auto region = r.dense.size();
  uint64_t first = req.piece ? req.offset : 0;
  if (first > region)
    return bad(fmt::format("a piece at offset {} of a region of {} floats",
                           first, region));
  uint64_t next = first;
  for (auto& part : req.parts) {
    if (part.offset != next || part.tensor.n == 0
        || part.tensor.n > region - next)
      return bad(fmt::format("encoded part at offset {} of {} floats does "
                             "not continue the parts before it (next "
                             "offset {}, region of {} floats)",
                             part.offset, part.tensor.n, next, region));
    next += part.tensor.n;
  }
  if (!req.piece && next != region)
    return bad(fmt::format("encoded parts cover {} of the region's {} floats",
                           next, region));
  req.gradient.values.resize(next - first);
  try {
    for (auto& part : req.parts) {
      auto i = st.formats.find(part.format);
      if (i == st.formats.end()) {
        if (st.formats.size() >= 8)
          return bad("more than 8 wire formats");
        i = st.formats.emplace(part.format, make_wire_format(part.format))
              .first;
      }
      i->second->decode(part.tensor,
                        req.gradient.values.data() + (part.offset - first),
                        part.tensor.n);
    }
  } catch (const input_error& e) {
    return bad(e.what());
  }
  req.parts.clear();
  return {};
}

/// Answers a push whose update was applied before: at once, or with a
/// backup once the newest forward is applied there (the first copy may
/// still be on its way, and no acknowledged update may be missing from the
/// backup).
caf::result<uint64_t> ack_duplicate(ps_ptr self, ps_replica& r) {
  ++r.stats.duplicates;
  if (!r.backup || r.forwards.empty())
    return r.stats.clock;
  auto rp = self->make_response_promise<uint64_t>();
  r.forwards.back().acks.push_back(rp);
  return rp;
}

/// Acknowledges an update applied under async or ssp: at once, or with a
/// backup after forwarding it (chain: once the backup applied it; async
/// replication: once the backlog allows).
caf::result<uint64_t> forward_and_ack(ps_ptr self, ps_replica& r,
                                      push_request&& req) {
  auto& st = self->state;
  if (!r.backup)
    return r.stats.clock;
  std::vector<update_id> ids{req.id};
  auto lag = st.opts.replication_lag;
  if (lag > 0) {
    auto clock = r.stats.clock;
    forward(self, r, std::move(ids), 1.0f, std::move(req), {});
    auto* wait = backlog_wait(r, lag);
    if (!wait)
      return clock;
    auto rp = self->make_response_promise<uint64_t>();
    wait->push_back(rp);
    return rp;
  }
  auto rp = self->make_response_promise<uint64_t>();
  forward(self, r, std::move(ids), 1.0f, std::move(req), {rp});
  return rp;
}

/// A push in pieces (async only): each piece applied as it comes, the
/// update counted with its last (actors/ps_pieces.hpp).
caf::result<uint64_t> push_piece(ps_ptr self, ps_replica& r,
                                 push_request& req) {
  auto& st = self->state;
  if (st.opts.mode != consistency::async)
    return caf::make_error(errc::bad_message, "push to ps", st.opts.index,
                           "group", r.group,
                           "a push in pieces needs training.mode \"async\"");
  auto staleness = r.stats.clock >= req.read_clock
                     ? r.stats.clock - req.read_clock
                     : 0;
  auto done = apply_piece(r, req, st.opts, staleness, st.opts.index);
  if (!done)
    return done.error();
  if (done->outcome == piece_outcome::duplicate)
    return ack_duplicate(self, r);
  if (done->outcome == piece_outcome::whole) {
    ++r.stats.pushes;
    r.stats.staleness_sum += done->staleness;
    r.stats.staleness_max = std::max(r.stats.staleness_max, done->staleness);
    telemetry::record_staleness(r.stats, done->staleness);
    ++r.stats.clock;
  }
  return forward_and_ack(self, r, std::move(req));
}

caf::result<uint64_t> push(ps_ptr self, push_request& req) {
  auto& st = self->state;
  telemetry::sample_mailbox(self, "ps", st.opts.index); // metrics
  auto found = serving(st, req.group, req.view);
  if (!found)
    return found.error();
  auto& r = **found;
  if (r.handing_off)
    return hold_push(self, r, req);
  auto w = req.id.worker;
  if (auto err = decode_gradient(st, r, req))
    return err;
  if (req.piece) {
    if (auto err = check_tables(r, req.tables, true, st.opts.index))
      return err;
    return push_piece(self, r, req);
  }
  if (req.gradient.values.size() != r.dense.size())
    return caf::make_error(errc::shape_mismatch, "push to ps", st.opts.index,
                           "group", r.group, r.dense.size(),
                           req.gradient.values.size());
  if (auto err = check_tables(r, req.tables, true, st.opts.index))
    return err;
  if (st.opts.mode != consistency::async && w >= r.worker_clock.size())
    return caf::make_error(errc::unknown_worker, w, r.worker_clock.size());
  // Under sync, a worker whose push is still in the round pushes again
  // when its last closure failed elsewhere (a push to a lost server) and it
  // went on: the round closes now with the pushes it has, as on a timeout,
  // and this push opens the next. (The same update re-sent is a duplicate,
  // below.)
  if (st.opts.mode == consistency::sync && r.pushed_this_round[w]
      && !r.was_applied(req.id.closure))
    close_round(self, r);
  if (r.was_applied(req.id.closure))
    return ack_duplicate(self, r);
  r.applied.insert(req.id.closure);
  ++r.stats.pushes;
  auto staleness = r.stats.clock >= req.read_clock
                     ? r.stats.clock - req.read_clock
                     : 0;
  r.stats.staleness_sum += staleness;
  r.stats.staleness_max = std::max(r.stats.staleness_max, staleness);
  telemetry::record_staleness(r.stats, staleness); // metrics
  if (st.opts.mode != consistency::sync) {
    auto [dense_step, table_step] = step_scales(st.opts, staleness);
    apply_update(r, req, 1.0f, dense_step, table_step);
    ++r.stats.clock;
    if (st.opts.mode == consistency::ssp) {
      ++r.worker_clock[w];
      release_pulls(self, r);
    }
    return forward_and_ack(self, r, std::move(req));
  }
  // sync: sum this round's gradients; the last push applies their mean.
  add_to_round(r, req);
  r.pushed_this_round[w] = true;
  auto rp = self->make_response_promise<uint64_t>();
  r.round_acks.push_back(rp);
  if (r.round_ids.size() == r.pushed_this_round.size()) {
    close_round(self, r);
  } else if (r.round_ids.size() == 1 && st.opts.round_timeout.count() > 0) {
    // Rounds are named by the clock they close at.
    self->delayed_send(self, st.opts.round_timeout, caf::flush_atom_v,
                       r.group, r.stats.clock + 1);
  }
  return rp;
}

/// The refusal of the current request if its sender may not send `kind`
/// (claiming worker `worker`), logged with the sender; none if it may.
caf::error refusal(ps_ptr self, ps_request kind,
                   uint32_t worker = no_worker) {
  auto& st = self->state;
  if (!st.opts.authorize)
    return {};
  auto why = st.opts.authorize(self->current_sender(), kind, worker);
  if (why.empty())
    return {};
  ++st.refused;
  log::warn("ps", static_cast<int>(st.opts.index),
            "refused a {} request ({} refused so far): {}", to_string(kind),
            st.refused, why);
  return caf::make_error(errc::not_authorized, to_string(kind), why);
}

ps_actor::behavior_type ps_behavior(ps_ptr self, ps_options opts,
                                    std::shared_ptr<const update_rule> dense,
                                    std::shared_ptr<const update_rule> table) {
  auto& st = self->state;
  st.opts = opts;
  st.dense_rule = std::move(dense);
  st.table_rule = std::move(table);
  self->set_down_handler([=](caf::down_msg& dm) {
    for (auto& [g, r] : self->state.groups)
      if (r.backup && r.backup.address() == dm.source)
        backup_lost(self, r, self->system().render(dm.reason));
  });
  return {
    [=](create_atom, create_shard& req) -> caf::result<uint64_t> {
      auto& st = self->state;
      if (auto err = refusal(self, ps_request::create))
        return err;
      auto i = st.groups.find(req.group);
      st.moved.erase(req.group); // moved here again
      if (i == st.groups.end())
        i = st.groups.emplace(req.group,
                              ps_replica{req.group, st.opts, st.dense_rule})
              .first;
      return create_in_replica(i->second, req, st.table_rule);
    },
    [=](pull_atom, pull_request& req) -> caf::result<pull_reply> {
      auto& st = self->state;
      if (auto err = refusal(self, ps_request::pull, req.worker))
        return err;
      auto found = serving(st, req.group, req.view);
      if (!found)
        return found.error();
      auto& r = **found;
      if (r.dense_shards == 0 && r.tables.empty())
        return caf::make_error(errc::no_shards, st.opts.index);
      // Under sync and ssp the servers count each worker's pushes; async
      // serves any worker, also one that joined the running job.
      if (st.opts.mode != consistency::async && req.worker != no_worker
          && req.worker >= r.worker_clock.size())
        return caf::make_error(errc::unknown_worker, req.worker,
                               r.worker_clock.size());
      if (auto err = check_tables(r, req.tables, false, st.opts.index))
        return err;
      if (req.dense && req.slice
          && (req.count == 0 || req.offset > r.dense.size()
              || req.count > r.dense.size() - req.offset))
        return caf::make_error(errc::bad_message, "pull from ps",
                               st.opts.index, "slice", req.offset, req.count,
                               "outside the dense region of",
                               r.dense.size());
      if (!req.format.empty() && value_format(st, req.format) == nullptr)
        return caf::make_error(errc::bad_message, "pull from ps",
                               st.opts.index, "wire format", req.format,
                               "cannot carry values");
      if (may_read(st, r, req.worker))
        return answer(st, r, req, replies_to_remote(self));
      auto rp = self->make_response_promise<pull_reply>();
      auto seq = r.next_hold++;
      r.held_pulls.push_back(ps_replica::held_pull{std::move(req), rp, seq});
      // As a sync round: a worker that stays behind (idle, lost, waiting
      // for closures the others hold) must not stall the others forever.
      if (st.opts.round_timeout.count() > 0)
        self->delayed_send(self, st.opts.round_timeout, caf::flush_atom_v,
                           r.group, seq);
      return rp;
    },
    [=](push_atom, push_request& req) -> caf::result<uint64_t> {
      if (auto err = refusal(self, ps_request::push, req.id.worker))
        return err;
      return push(self, req);
    },
    [=](replicate_atom, replicate_request& req) -> caf::result<uint64_t> {
      if (auto err = refusal(self, ps_request::replicate))
        return err;
      return replicate(self, req);
    },
    [=](configure_atom, replica_config& cfg) -> caf::result<bool> {
      if (auto err = refusal(self, ps_request::configure))
        return err;
      return configure(self, cfg);
    },
    [=](handoff_atom, uint32_t g, uint64_t view) -> caf::result<uint64_t> {
      if (auto err = refusal(self, ps_request::handoff))
        return err;
      return handoff(self, g, view);
    },
    [=](drop_atom, uint32_t g, uint64_t view) -> caf::result<bool> {
      if (auto err = refusal(self, ps_request::drop))
        return err;
      return drop_group(self, g, view);
    },
    [=](caf::timeout_atom, uint32_t g, uint64_t number) {
      // A timer of this server's own: from anyone else it is dropped.
      if (!self->state.opts.authorize || self->current_sender() == self->ctrl())
        handoff_expired(self, g, number);
    },
    [=](install_atom, uint32_t g, uint64_t view,
        ps_snapshot& snap) -> caf::result<uint64_t> {
      auto& st = self->state;
      if (auto err = refusal(self, ps_request::install))
        return err;
      auto found = find_group(st, g);
      if (!found)
        return found.error();
      auto& r = **found;
      if (r.primary || view != r.view)
        return caf::make_error(errc::stale_view, "ps", st.opts.index, "group",
                               g, "install", r.view, view);
      if (auto err = restore_replica(r, snap, true, st.table_rule,
                                     st.opts.mode, st.opts.index))
        return err;
      return r.stats.clock;
    },
    [=](stats_atom, uint32_t g) -> caf::result<ps_stats> {
      auto& st = self->state;
      if (auto err = refusal(self, ps_request::stats))
        return err;
      auto found = find_group(st, g);
      if (!found)
        return found.error();
      auto s = replica_stats(**found);
      s.peak_rss_bytes = peak_rss_bytes();
      s.view = (*found)->view;
      s.primary = (*found)->primary;
      return s;
    },
    [=](save_atom, uint32_t g) -> caf::result<ps_snapshot> {
      if (auto err = refusal(self, ps_request::save))
        return err;
      auto found = find_group(self->state, g);
      if (!found)
        return found.error();
      return save_replica(**found, false);
    },
    [=](save_atom, uint32_t g, uint64_t base,
        uint64_t mark) -> caf::result<ps_snapshot> {
      if (auto err = refusal(self, ps_request::save))
        return err;
      auto found = find_group(self->state, g);
      if (!found)
        return found.error();
      return save_and_mark(**found, base, mark);
    },
    [=](restore_atom, uint32_t g, ps_snapshot& snap) -> caf::result<uint64_t> {
      auto& st = self->state;
      if (auto err = refusal(self, ps_request::restore))
        return err;
      auto found = find_group(st, g);
      if (!found)
        return found.error();
      if (auto err = restore_replica(**found, snap, false, st.table_rule,
                                     st.opts.mode, st.opts.index))
        return err;
      return (*found)->stats.clock;
    },
    [=](prune_atom, uint64_t first, uint64_t watermark) {
      if (refusal(self, ps_request::prune))
        return;
      for (auto& [g, r] : self->state.groups)
        prune_replica(r, first, watermark);
    },
    [=](ping_atom) -> caf::result<uint32_t> {
      if (auto err = refusal(self, ps_request::ping))
        return err;
      return self->state.opts.index;
    },
    [=](caf::flush_atom, uint32_t g, uint64_t round) {
      auto& st = self->state;
      // A timer of this server's own: from anyone else it is dropped.
      if (st.opts.authorize && self->current_sender() != self->ctrl())
        return;
      auto i = st.groups.find(g);
      if (i == st.groups.end())
        return;
      auto& r = i->second;
      if (st.opts.mode == consistency::ssp) {
        // ssp: `round` names a held pull; still held after round_timeout,
        // it is answered (the bound is exceeded, and said so).
        auto h = std::find_if(r.held_pulls.begin(), r.held_pulls.end(),
                              [&](const ps_replica::held_pull& x) {
                                return x.seq == round;
                              });
        if (h == r.held_pulls.end())
          return;
        auto held = std::move(*h);
        r.held_pulls.erase(h);
        log::warn("ps", static_cast<int>(st.opts.index),
                  "ssp: a pull of worker {} waited {} ms for the slowest "
                  "worker of group {}; answered past the staleness bound",
                  held.req.worker, st.opts.round_timeout.count(), g);
        if (r.primary)
          held.promise.deliver(answer(st, r, held.req));
        else
          held.promise.deliver(caf::make_error(
            errc::stale_view, "ps", st.opts.index, "group", g, "pull", r.view,
            held.req.view));
        return;
      }
      if (!r.primary || r.round_ids.empty() || r.stats.clock + 1 != round)
        return; // closed already
      log::warn("ps", static_cast<int>(st.opts.index),
                "sync round {} of group {} closed after {} ms with {} of {} "
                "workers' pushes",
                round, g, st.opts.round_timeout.count(), r.round_ids.size(),
                r.pushed_this_round.size());
      close_round(self, r);
    },
  };
}

} // namespace

const char* to_string(ps_request kind) {
  switch (kind) {
    case ps_request::create:
      return "create";
    case ps_request::pull:
      return "pull";
    case ps_request::push:
      return "push";
    case ps_request::replicate:
      return "replicate";
    case ps_request::configure:
      return "configure";
    case ps_request::install:
      return "install";
    case ps_request::stats:
      return "stats";
    case ps_request::save:
      return "save";
    case ps_request::restore:
      return "restore";
    case ps_request::prune:
      return "prune";
    case ps_request::ping:
      return "ping";
    case ps_request::handoff:
      return "handoff";
    case ps_request::drop:
      return "drop";
  }
  return "unknown";
}

consistency parse_consistency(const std::string& name) {
  if (name == "async")
    return consistency::async;
  if (name == "sync")
    return consistency::sync;
  if (name == "ssp")
    return consistency::ssp;
  throw input_error("training.mode: expected async, sync or ssp, got \"" + name
                    + "\"");
}

ps_actor spawn_ps(caf::actor_system& sys, ps_options opts) {
  // Built here, outside the actor: a bad rule is the caller's input_error.
  std::shared_ptr<const update_rule> dense
    = make_update_rule(opts.optimizer, "optimizer");
  std::shared_ptr<const update_rule> table
    = make_update_rule(opts.table_optimizer, "table_optimizer");
  return sys.spawn(ps_behavior, opts, std::move(dense), std::move(table));
}

} // namespace actorps
