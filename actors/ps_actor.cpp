#include "actors/ps_actor.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/ps_replica.hpp"
#include "actors/telemetry.hpp"
#include "core/staleness_histogram.hpp" // metrics (issue 14)
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/process.hpp"

namespace actorps {

namespace {

struct ps_state {
  ps_options opts;
  std::shared_ptr<const update_rule> dense_rule;
  std::shared_ptr<const update_rule> table_rule;
  /// The replica groups this server holds, by group.
  std::map<uint32_t, ps_replica> groups;
  static constexpr const char* name = "parameter-server";
};

using ps_ptr = ps_actor::stateful_pointer<ps_state>;

using ack_promise = caf::typed_response_promise<uint64_t>;

/// The group a request names, or an error (no_shards while the server holds
/// nothing at all yet).
caf::expected<ps_replica*> find_group(ps_state& st, uint32_t g) {
  auto i = st.groups.find(g);
  if (i == st.groups.end() && st.groups.empty())
    return caf::make_error(errc::no_shards, st.opts.index);
  if (i == st.groups.end())
    return caf::make_error(errc::unknown_group, "ps", st.opts.index, "group",
                           g);
  return &i->second;
}

/// The group a worker's request names, if this server is its primary at the
/// view the request knows.
caf::expected<ps_replica*> serving(ps_state& st, uint32_t g, uint64_t view) {
  auto r = find_group(st, g);
  if (!r)
    return r;
  if (!(*r)->primary || (*r)->view != view)
    return caf::make_error(errc::stale_view, "ps", st.opts.index, "group", g,
                           (*r)->primary ? "primary" : "backup", (*r)->view,
                           view);
  return r;
}

/// Whether worker `w` may read now under ssp.
bool may_read(const ps_state& st, const ps_replica& r, uint32_t w) {
  if (st.opts.mode != consistency::ssp || w == no_worker)
    return true;
  auto slowest = *std::min_element(r.worker_clock.begin(),
                                   r.worker_clock.end());
  return r.worker_clock[w] <= slowest + st.opts.staleness;
}

void release_pulls(ps_ptr self, ps_replica& r) {
  auto held = std::move(r.held_pulls);
  r.held_pulls.clear();
  for (auto& h : held) {
    if (may_read(self->state, r, h.req.worker))
      h.promise.deliver(read_replica(r, h.req));
    else
      r.held_pulls.push_back(std::move(h));
  }
}

/// The step scales of a push of `staleness` for the dense region and the
/// table rows: 1 / tau where the rule is staleness-aware (optimizer_config).
std::pair<float, float> step_scales(const ps_options& opts,
                                    uint64_t staleness) {
  auto of = [&](const optimizer_config& rule) {
    return rule.staleness_aware ? staleness_step_scale(staleness) : 1.0f;
  };
  return {of(opts.optimizer), of(opts.table_optimizer)};
}

// -- replication ----------------------------------------------------------------

/// How long a primary waits for its backup to answer one forward.
constexpr auto forward_timeout = std::chrono::seconds(15);

void backup_lost(ps_ptr self, ps_replica& r, const std::string& why);

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
    return;
  }
  // Applied by the backup, or the backup is gone (then this copy is the only
  // one: the update is as durable as it can be).
  for (auto& ack : fw.acks)
    ack.deliver(fw.clock);
}

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

/// The group's backup is gone: pending forwards are acknowledged (this copy
/// is the only one now) and updates apply here alone until a new backup.
void backup_lost(ps_ptr self, ps_replica& r, const std::string& why) {
  log::warn("ps", static_cast<int>(self->state.opts.index),
            "group {}: backup lost ({}); applying alone", r.group, why);
  auto pending = std::move(r.forwards);
  r.forwards.clear();
  for (auto& f : pending)
    for (auto& ack : f.acks)
      ack.deliver(f.clock);
  r.backup = caf::actor{};
}

/// Applies the sync round's mean gradient and acknowledges every push of it
/// (after the backup applied it too).
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
    // async replication (see push): the round's pushes wait only while the
    // backup is more than `lag` forwards behind.
    forward(self, r, std::move(ids), scale, std::move(update), {});
    if (r.forwards.size() > lag) {
      auto& wait = r.forwards[r.forwards.size() - 1 - lag].acks;
      wait.insert(wait.end(), acks.begin(), acks.end());
      return;
    }
  }
  for (auto& ack : acks)
    ack.deliver(r.stats.clock);
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
  r.backup = caf::actor{};
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
                "through the coordinator",
                cfg.group, cfg.backup_ps, e.what());
    }
  }
  if (backup != r.backup) {
    if (r.backup)
      backup_lost(self, r, "replaced by the coordinator");
    r.backup = backup;
    if (backup)
      self->monitor(backup);
  }
  if (backup && cfg.install) {
    // Sent before any later forward: the backup installs this state, then
    // applies the updates after it, in order.
    auto g = r.group;
    auto index = static_cast<int>(st.opts.index);
    self->request(backup, caf::infinite, install_atom_v, r.group, r.view,
                  save_replica(r, true))
      .then([](uint64_t) {},
            [=](caf::error& err) {
              log::error("ps", index, "group {}: installing the backup "
                                      "failed: {}",
                         g, self->system().render(err));
              auto i = self->state.groups.find(g);
              if (i != self->state.groups.end() && i->second.backup)
                backup_lost(self, i->second, "its install failed");
            });
  }
  return true;
}

caf::result<uint64_t> push(ps_ptr self, push_request& req) {
  auto& st = self->state;
  telemetry::sample_mailbox(self, "ps", st.opts.index); // metrics (issue 14)
  auto found = serving(st, req.group, req.view);
  if (!found)
    return found.error();
  auto& r = **found;
  auto w = req.id.worker;
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
  if (r.was_applied(req.id.closure)) {
    ++r.stats.duplicates;
    if (!r.backup || r.forwards.empty())
      return r.stats.clock;
    // The first copy may still be on its way to the backup: this ack waits
    // for the newest forward (the backup applies them in order), so that
    // no acknowledged update is missing from the backup.
    auto rp = self->make_response_promise<uint64_t>();
    r.forwards.back().acks.push_back(rp);
    return rp;
  }
  r.applied.insert(req.id.closure);
  ++r.stats.pushes;
  auto staleness = r.stats.clock >= req.read_clock
                     ? r.stats.clock - req.read_clock
                     : 0;
  r.stats.staleness_sum += staleness;
  r.stats.staleness_max = std::max(r.stats.staleness_max, staleness);
  telemetry::record_staleness(r.stats, staleness); // metrics (issue 14)
  if (st.opts.mode != consistency::sync) {
    auto [dense_step, table_step] = step_scales(st.opts, staleness);
    apply_update(r, req, 1.0f, dense_step, table_step);
    ++r.stats.clock;
    if (st.opts.mode == consistency::ssp) {
      ++r.worker_clock[w];
      release_pulls(self, r);
    }
    if (!r.backup)
      return r.stats.clock;
    std::vector<update_id> ids{req.id};
    auto lag = st.opts.replication_lag;
    if (lag > 0) {
      // async: acknowledged now unless the backup is more than `lag`
      // forwards behind; then once it is back to `lag`.
      auto clock = r.stats.clock;
      forward(self, r, std::move(ids), 1.0f, std::move(req), {});
      if (r.forwards.size() <= lag)
        return clock;
      auto rp = self->make_response_promise<uint64_t>();
      r.forwards[r.forwards.size() - 1 - lag].acks.push_back(rp);
      return rp;
    }
    auto rp = self->make_response_promise<uint64_t>();
    forward(self, r, std::move(ids), 1.0f, std::move(req), {rp});
    return rp;
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
  if (st.opts.mode == consistency::sync) {
    apply_update(r, req.update, req.scale);
  } else {
    auto [dense_step, table_step] = step_scales(st.opts, staleness);
    apply_update(r, req.update, req.scale, dense_step, table_step);
  }
  if (st.opts.mode != consistency::sync) {
    r.stats.staleness_sum += staleness;
    r.stats.staleness_max = std::max(r.stats.staleness_max, staleness);
    // Only the group's counters: the process-wide histogram counted this
    // push at the primary already.
    add_staleness(r.stats.staleness_buckets, staleness);
  }
  r.stats.clock = req.clock;
  for (auto& id : req.ids) {
    r.applied.insert(id.closure);
    ++r.stats.pushes;
    if (st.opts.mode == consistency::ssp && id.worker < r.worker_clock.size())
      ++r.worker_clock[id.worker];
  }
  return r.stats.clock;
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
      auto i = st.groups.find(req.group);
      if (i == st.groups.end())
        i = st.groups.emplace(req.group,
                              ps_replica{req.group, st.opts, st.dense_rule})
              .first;
      return create_in_replica(i->second, req, st.table_rule);
    },
    [=](pull_atom, pull_request& req) -> caf::result<pull_reply> {
      auto& st = self->state;
      auto found = serving(st, req.group, req.view);
      if (!found)
        return found.error();
      auto& r = **found;
      if (r.dense_shards == 0 && r.tables.empty())
        return caf::make_error(errc::no_shards, st.opts.index);
      if (req.worker != no_worker && req.worker >= r.worker_clock.size())
        return caf::make_error(errc::unknown_worker, req.worker,
                               r.worker_clock.size());
      if (auto err = check_tables(r, req.tables, false, st.opts.index))
        return err;
      if (may_read(st, r, req.worker))
        return read_replica(r, req);
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
      return push(self, req);
    },
    [=](replicate_atom, replicate_request& req) -> caf::result<uint64_t> {
      return replicate(self, req);
    },
    [=](configure_atom, replica_config& cfg) -> caf::result<bool> {
      return configure(self, cfg);
    },
    [=](install_atom, uint32_t g, uint64_t view,
        ps_snapshot& snap) -> caf::result<uint64_t> {
      auto& st = self->state;
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
      auto found = find_group(st, g);
      if (!found)
        return found.error();
      auto s = (*found)->stats;
      for (auto& [shard, store] : (*found)->tables) {
        s.table_rows += store.size();
        s.table_bytes += store.memory_bytes();
      }
      s.peak_rss_bytes = peak_rss_bytes();
      s.view = (*found)->view;
      s.primary = (*found)->primary;
      return s;
    },
    [=](freeze_atom, uint64_t ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    },
    [=](save_atom, uint32_t g) -> caf::result<ps_snapshot> {
      auto found = find_group(self->state, g);
      if (!found)
        return found.error();
      return save_replica(**found, false);
    },
    [=](restore_atom, uint32_t g, ps_snapshot& snap) -> caf::result<uint64_t> {
      auto& st = self->state;
      auto found = find_group(st, g);
      if (!found)
        return found.error();
      if (auto err = restore_replica(**found, snap, false, st.table_rule,
                                     st.opts.mode, st.opts.index))
        return err;
      return (*found)->stats.clock;
    },
    [=](prune_atom, uint64_t first, uint64_t watermark) {
      for (auto& [g, r] : self->state.groups)
        prune_replica(r, first, watermark);
    },
    [=](ping_atom) -> uint32_t { return self->state.opts.index; },
    [=](caf::flush_atom, uint32_t g, uint64_t round) {
      auto& st = self->state;
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
          held.promise.deliver(read_replica(r, held.req));
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
