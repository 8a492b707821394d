#include "actors/ps_chain.hpp"
#include "actors/ps_move.hpp"
#include "actors/ps_pieces.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/staleness_histogram.hpp"

namespace actorps {

namespace {

/// How long a primary waits for its backup to answer one forward.
constexpr auto forward_timeout = std::chrono::seconds(15);

/// Forward number `seq` of group `g` got its answer (`err` empty: applied).
void complete_forward(ps_ptr self, uint32_t g, uint64_t seq,
                      const caf::error& err) {
  auto i = self->state.groups.find(g);
  if (i == self->state.groups.end())
    return;
  auto& r = i->second;
  auto f = std::find_if(r.forwards.begin(), r.forwards.end(),
                        [&](const ps_replica::forward& x) {
                          return x.seq == seq;
                        });
  if (f == r.forwards.end())
    return; // answered already (the backup was dropped)
  auto fw = std::move(*f);
  r.forwards.erase(f);
  if (err == errc::stale_view) {
    // The backup was promoted: this server was deposed. The update is not
    // acknowledged; its closure runs again at the new primary.
    log::warn("ps", static_cast<int>(self->state.opts.index),
              "group {}: the backup refuses updates (a newer view): this "
              "server no longer serves the group",
              g);
    r.primary = false;
    for (auto& ack : fw.acks)
      ack.deliver(err);
    end_handoff(r, err);
    return;
  }
  // Applied by the backup, or the backup is gone (then this copy is the only
  // one: the update is as durable as it can be).
  for (auto& ack : fw.acks)
    ack.deliver(fw.clock);
  handoff_progress(self, r);
}

} // namespace


/// Sends one applied update to the backup; `acks` are answered once the
/// backup has applied it.
void forward(ps_ptr self, ps_replica& r, std::vector<update_id> ids,
             float scale, push_request update,
             std::vector<ack_promise> acks) {
  auto seq = r.next_forward++;
  r.forwards.push_back(ps_replica::forward{seq, std::move(acks),
                                           r.stats.clock});
  replicate_request req;
  req.group = r.group;
  req.view = r.view;
  req.clock = r.stats.clock;
  req.ids = std::move(ids);
  req.scale = scale;
  req.update = std::move(update);
  auto g = r.group;
  // The backup is monitored: when it is lost, every pending forward is
  // answered at once (backup_lost). A forward without an answer for
  // forward_timeout although the backup lives (a message lost on a
  // connection being set up again) would hold its pushes forever: the
  // primary then drops the backup as if lost, so that the job goes on (what
  // the backup missed is counted as lost should it ever take over).
  self->request(caf::actor_cast<caf::actor>(r.backup), forward_timeout,
                replicate_atom_v, std::move(req))
    .then([=](uint64_t) { complete_forward(self, g, seq, caf::error{}); },
          [=](caf::error& err) {
            if (err != caf::sec::request_timeout) {
              complete_forward(self, g, seq, err);
              return;
            }
            auto i = self->state.groups.find(g);
            if (i == self->state.groups.end() || !i->second.backup)
              return;
            auto& rr = i->second;
            bool pending = std::any_of(rr.forwards.begin(), rr.forwards.end(),
                                       [&](const ps_replica::forward& f) {
                                         return f.seq == seq;
                                       });
            if (pending)
              backup_lost(self, rr,
                          fmt::format("no answer to a forward in {} s",
                                      forward_timeout.count()));
          });
}

std::vector<ack_promise>* backlog_wait(ps_replica& r, uint32_t lag) {
  if (r.forwards.size() <= lag)
    return nullptr;
  return &r.forwards[r.forwards.size() - 1 - lag].acks;
}

void close_round(ps_ptr self, ps_replica& r) {
  auto scale = 1.0f / static_cast<float>(r.round_ids.size());
  auto update = round_update(r);
  apply_update(r, update, scale);
  ++r.stats.clock;
  auto ids = std::move(r.round_ids);
  r.round_ids.clear();
  std::fill(r.pushed_this_round.begin(), r.pushed_this_round.end(), false);
  auto acks = std::move(r.round_acks);
  r.round_acks.clear();
  auto lag = self->state.opts.replication_lag;
  if (r.backup && lag == 0) {
    forward(self, r, std::move(ids), scale, std::move(update),
            std::move(acks));
    return;
  }
  if (r.backup) {
    forward(self, r, std::move(ids), scale, std::move(update), {});
    if (auto* wait = backlog_wait(r, lag)) {
      wait->insert(wait->end(), acks.begin(), acks.end());
      return;
    }
  }
  for (auto& ack : acks)
    ack.deliver(r.stats.clock);
}

/// The group's backup is gone: pending forwards are acknowledged (this copy
/// is the only one now) and updates apply here alone until a new backup.
void backup_lost(ps_ptr self, ps_replica& r, const std::string& why,
                 bool planned) {
  if (planned)
    log::info("ps", static_cast<int>(self->state.opts.index),
              "group {}: its backup is replaced ({})", r.group, why);
  else
    log::warn("ps", static_cast<int>(self->state.opts.index),
              "group {}: backup lost ({}); applying alone", r.group, why);
  auto pending = std::move(r.forwards);
  r.forwards.clear();
  for (auto& f : pending)
    for (auto& ack : f.acks)
      ack.deliver(f.clock);
  r.backup = caf::actor{};
  r.installing = false;
  abandon_handoff(self, r,
                  caf::make_error(errc::ps_lost, "the backup of group",
                                  r.group, why));
}

/// Makes this server a backup of `r`'s group (or a deposed primary): what
/// waits for an answer as a primary is refused.
void step_down(ps_replica& r, uint32_t ps_index) {
  auto stale = caf::make_error(errc::stale_view, "ps", ps_index, "group",
                               r.group, "no longer primary");
  for (auto& h : r.held_pulls)
    h.promise.deliver(stale);
  r.held_pulls.clear();
  for (auto& ack : r.round_acks)
    ack.deliver(stale);
  r.round_acks.clear();
  r.round_ids.clear();
  r.round_tables.clear();
  std::fill(r.pushed_this_round.begin(), r.pushed_this_round.end(), false);
  for (auto& f : r.forwards)
    for (auto& ack : f.acks)
      ack.deliver(stale);
  r.forwards.clear();
  end_handoff(r, stale);
  r.backup = caf::actor{};
  r.installing = false;
  r.primary = false;
}

caf::result<bool> configure(ps_ptr self, replica_config& cfg) {
  auto& st = self->state;
  auto found = find_group(st, cfg.group);
  if (!found)
    return found.error();
  auto& r = **found;
  if (cfg.view < r.view)
    return caf::make_error(errc::stale_view, "ps", st.opts.index, "group",
                           cfg.group, "configure", r.view, cfg.view);
  r.view = cfg.view;
  if (!cfg.primary) {
    step_down(r, st.opts.index);
    return true;
  }
  r.primary = true;
  auto backup = caf::actor_cast<caf::actor>(cfg.backup);
  if (backup && st.opts.dial
      && cfg.backup_ps != std::numeric_limits<uint32_t>::max()) {
    try {
      backup = st.opts.dial(cfg.backup_ps);
    } catch (const std::exception& e) {
      log::warn("ps", static_cast<int>(st.opts.index),
                "group {}: cannot reach its backup ps{} directly ({}); going "
                "through the chief",
                cfg.group, cfg.backup_ps, e.what());
    }
  }
  if (backup != r.backup) {
    if (r.backup)
      backup_lost(self, r, "by the coordinator", true);
    r.backup = backup;
    if (backup)
      self->monitor(backup);
  }
  if (backup && cfg.install) {
    // Sent before any later forward: the backup installs this state, then
    // applies the updates after it, in order.
    // The reply waits for the install: once it comes, the backup holds
    // every update acknowledged here (a planned move relies on it).
    auto g = r.group;
    auto index = static_cast<int>(st.opts.index);
    r.installing = true;
    auto rp = self->make_response_promise<bool>();
    self->request(backup, caf::infinite, install_atom_v, r.group, r.view,
                  save_replica(r, true))
      .then(
        [=](uint64_t) mutable {
          rp.deliver(true);
          // (An answer of a backup replaced since is not this install's.)
          auto i = self->state.groups.find(g);
          if (i == self->state.groups.end() || i->second.backup != backup)
            return;
          i->second.installing = false;
          handoff_progress(self, i->second);
        },
        [=](caf::error& err) mutable {
          log::error("ps", index, "group {}: installing the backup failed: {}",
                     g, self->system().render(err));
          rp.deliver(err);
          auto i = self->state.groups.find(g);
          if (i != self->state.groups.end() && i->second.backup == backup)
            backup_lost(self, i->second, "its install failed");
        });
    return rp;
  }
  return true;
}

/// A piece of a push in pieces forwarded by the primary: applied as the
/// primary applied it (actors/ps_pieces.hpp); the update's counters move
/// with its last piece, the clock follows the primary's.
caf::result<uint64_t> replicate_piece(ps_state& st, ps_replica& r,
                                      replicate_request& req) {
  if (st.opts.mode != consistency::async || req.ids.size() != 1
      || req.scale != 1.0f)
    return caf::make_error(errc::bad_message, "replicate to ps", st.opts.index,
                           "group", r.group,
                           "a piece outside async, of several updates or "
                           "scaled");
  if (auto err = check_tables(r, req.update.tables, true, st.opts.index))
    return err;
  // The staleness the primary recorded at the update's first piece: its
  // clock then was the clock after this piece (a piece moves it only when
  // it completes the update: then one more).
  auto alone = r.partial.count(req.update.id.closure) == 0
               && req.update.gradient.values.size() == r.dense.size();
  auto arrival = alone && req.clock > 0 ? req.clock - 1 : req.clock;
  auto read = req.update.read_clock;
  auto staleness = arrival >= read ? arrival - read : 0;
  auto done = apply_piece(r, req.update, st.opts, staleness, st.opts.index);
  if (!done)
    return done.error();
  if (done->outcome == piece_outcome::whole) {
    // As the primary's clock before the update completed.
    auto s = done->staleness;
    r.stats.staleness_sum += s;
    r.stats.staleness_max = std::max(r.stats.staleness_max, s);
    add_staleness(r.stats.staleness_buckets, s);
    ++r.stats.pushes;
  }
  if (done->outcome != piece_outcome::duplicate)
    r.stats.clock = req.clock;
  return r.stats.clock;
}

caf::result<uint64_t> replicate(ps_ptr self, replicate_request& req) {
  auto& st = self->state;
  auto found = find_group(st, req.group);
  if (!found)
    return found.error();
  auto& r = **found;
  if (r.primary || req.view != r.view)
    return caf::make_error(errc::stale_view, "ps", st.opts.index, "group",
                           req.group, "replicate", r.view, req.view);
  // A forwarded update is input from a peer like a push: the same checks
  // before anything touches the buffers (fuzz/ps_requests_fuzz.cpp found an
  // unchecked gradient size and an unknown table shard here).
  if (req.update.piece)
    return replicate_piece(st, r, req);
  if (req.update.gradient.values.size() != r.dense.size())
    return caf::make_error(errc::shape_mismatch, "replicate to ps",
                           st.opts.index, "group", r.group, r.dense.size(),
                           req.update.gradient.values.size());
  if (auto err = check_tables(r, req.update.tables, true, st.opts.index))
    return err;
  bool fresh = std::any_of(req.ids.begin(), req.ids.end(),
                           [&](const update_id& id) {
                             return !r.was_applied(id.closure);
                           });
  if (!fresh)
    return r.stats.clock;
  // The staleness the primary recorded (its clock at arrival was one below
  // the clock after the update): the backup scales a staleness-aware step
  // alike, and a promoted backup's counters go on where the primary's
  // stopped.
  auto arrival = req.clock > 0 ? req.clock - 1 : 0;
  auto read = req.update.read_clock;
  auto staleness = arrival >= read ? arrival - read : 0;
  // (sync: a round's mean, never stale.)
  bool sync = st.opts.mode == consistency::sync;
  auto [dense_step, table_step] = step_scales(st.opts, sync ? 0 : staleness);
  apply_update(r, req.update, req.scale, dense_step, table_step);
  if (!sync) {
    r.stats.staleness_sum += staleness;
    r.stats.staleness_max = std::max(r.stats.staleness_max, staleness);
    // Only the group's counters: the process-wide histogram counted this
    // push at the primary already.
    add_staleness(r.stats.staleness_buckets, staleness);
  }
  r.stats.clock = req.clock;
  for (auto& id : req.ids) {
    // Each update id counts once (a push counted here already is not
    // counted again with a round that names it).
    if (r.was_applied(id.closure))
      continue;
    r.applied.insert(id.closure);
    ++r.stats.pushes;
    if (st.opts.mode == consistency::ssp && id.worker < r.worker_clock.size())
      ++r.worker_clock[id.worker];
  }
  return r.stats.clock;
}

} // namespace actorps
