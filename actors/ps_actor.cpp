#include "actors/ps_actor.hpp"

#include <algorithm>
#include <thread>
#include <unordered_set>

#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "core/error.hpp"

namespace actorps {

namespace {

struct ps_state {
  ps_options opts;
  std::vector<float> values;
  optimizer_state optimizer;
  std::vector<create_shard> shards; // metadata only; values moved out
  ps_stats stats;
  /// (worker, incarnation, closure) of every accepted push.
  std::unordered_set<uint64_t> applied;
  // -- sync -------------------------------------------------------------------
  std::vector<float> round_sum;
  std::vector<bool> pushed_this_round;
  uint32_t round_pushes = 0;
  std::vector<caf::typed_response_promise<uint64_t>> round_acks;
  // -- ssp --------------------------------------------------------------------
  /// Pushes applied per worker.
  std::vector<uint64_t> worker_clock;
  std::vector<std::pair<uint32_t, caf::typed_response_promise<pull_reply>>>
    held_pulls;
  static constexpr const char* name = "parameter-server";
};

using ps_ptr = ps_actor::stateful_pointer<ps_state>;

/// The key under which a push counts as applied: its closure. A closure
/// re-run after its worker was lost pushes again under the same closure id
/// from another worker (or incarnation); a server that already applied the
/// first attempt's push discards the second, so each closure's gradient is
/// applied at most once per server. Worker and incarnation are kept in the
/// id for diagnostics.
uint64_t key_of(const update_id& id) {
  return id.closure;
}

/// Whether worker `w` may read now under ssp.
bool may_read(const ps_state& st, uint32_t w) {
  if (st.opts.mode != consistency::ssp || w == no_worker)
    return true;
  auto slowest = *std::min_element(st.worker_clock.begin(),
                                   st.worker_clock.end());
  return st.worker_clock[w] <= slowest + st.opts.staleness;
}

pull_reply snapshot(const ps_state& st) {
  return pull_reply{st.stats.clock, float_buffer{float_vector(st.values.begin(), st.values.end())}};
}

void release_pulls(ps_ptr self) {
  auto& st = self->state;
  auto held = std::move(st.held_pulls);
  st.held_pulls.clear();
  for (auto& [w, rp] : held) {
    if (may_read(st, w))
      rp.deliver(snapshot(st));
    else
      st.held_pulls.emplace_back(w, std::move(rp));
  }
}

ps_actor::behavior_type ps_behavior(ps_ptr self, ps_options opts) {
  auto& st = self->state;
  st.opts = opts;
  st.optimizer = optimizer_state{opts.optimizer, 0};
  st.worker_clock.assign(std::max<uint32_t>(opts.workers, 1), 0);
  st.pushed_this_round.assign(std::max<uint32_t>(opts.workers, 1), false);
  return {
    [=](create_atom, create_shard& req) -> caf::result<uint64_t> {
      auto& st = self->state;
      auto expected = (req.row_end - req.row_begin) * req.cols;
      if (req.row_end < req.row_begin || req.values.values.size() != expected)
        return caf::make_error(errc::shape_mismatch, req.variable, req.shard,
                               expected, req.values.values.size());
      auto offset = st.values.size();
      st.values.insert(st.values.end(), req.values.values.begin(),
                       req.values.values.end());
      st.optimizer.resize(st.values.size());
      req.values.values.clear();
      st.shards.push_back(std::move(req));
      st.stats.floats = st.values.size();
      st.stats.shards = st.shards.size();
      return offset;
    },
    [=](pull_atom, uint32_t worker) -> caf::result<pull_reply> {
      auto& st = self->state;
      if (st.shards.empty())
        return caf::make_error(errc::no_shards, st.opts.index);
      if (worker != no_worker && worker >= st.worker_clock.size())
        return caf::make_error(errc::unknown_worker, worker,
                               st.worker_clock.size());
      if (may_read(st, worker))
        return snapshot(st);
      auto rp = self->make_response_promise<pull_reply>();
      st.held_pulls.emplace_back(worker, rp);
      return rp;
    },
    [=](push_atom, const push_request& req) -> caf::result<uint64_t> {
      auto& st = self->state;
      auto w = req.id.worker;
      if (req.gradient.values.size() != st.values.size())
        return caf::make_error(errc::shape_mismatch, "push to ps",
                               st.opts.index, st.values.size(),
                               req.gradient.values.size());
      if (st.opts.mode != consistency::async && w >= st.worker_clock.size())
        return caf::make_error(errc::unknown_worker, w,
                               st.worker_clock.size());
      if (st.opts.mode == consistency::sync && st.pushed_this_round[w])
        return caf::make_error(errc::step_failed,
                               "sync: a second push of worker in one round", w);
      if (!st.applied.insert(key_of(req.id)).second) {
        ++st.stats.duplicates;
        return st.stats.clock;
      }
      ++st.stats.pushes;
      auto staleness = st.stats.clock >= req.read_clock
                         ? st.stats.clock - req.read_clock
                         : 0;
      st.stats.staleness_sum += staleness;
      st.stats.staleness_max = std::max(st.stats.staleness_max, staleness);
      if (st.opts.mode != consistency::sync) {
        st.optimizer.apply(st.values.data(), req.gradient.values.data());
        ++st.stats.clock;
        if (st.opts.mode == consistency::ssp) {
          ++st.worker_clock[w];
          release_pulls(self);
        }
        return st.stats.clock;
      }
      // sync: sum this round's gradients; the last push applies their mean.
      auto& g = req.gradient.values;
      if (st.round_pushes == 0)
        st.round_sum.assign(g.begin(), g.end());
      else
        for (size_t i = 0; i < g.size(); ++i)
          st.round_sum[i] += g[i];
      st.pushed_this_round[w] = true;
      auto rp = self->make_response_promise<uint64_t>();
      st.round_acks.push_back(rp);
      if (++st.round_pushes == st.pushed_this_round.size()) {
        auto scale = 1.0f / static_cast<float>(st.round_pushes);
        for (auto& x : st.round_sum)
          x *= scale;
        st.optimizer.apply(st.values.data(), st.round_sum.data());
        ++st.stats.clock;
        st.round_pushes = 0;
        std::fill(st.pushed_this_round.begin(), st.pushed_this_round.end(),
                  false);
        auto acks = std::move(st.round_acks);
        st.round_acks.clear();
        for (auto& ack : acks)
          ack.deliver(st.stats.clock);
      }
      return rp;
    },
    [=](stats_atom) -> ps_stats { return self->state.stats; },
    [=](freeze_atom, uint64_t ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    },
    [=](save_atom) -> ps_snapshot {
      auto& st = self->state;
      ps_snapshot snap;
      snap.clock = st.stats.clock;
      snap.optimizer_steps = st.optimizer.steps();
      snap.values.values.assign(st.values.begin(), st.values.end());
      for (auto& slot : st.optimizer.slots())
        snap.slots.push_back(float_buffer{float_vector(slot.begin(), slot.end())});
      return snap;
    },
    [=](restore_atom, ps_snapshot& snap) -> caf::result<uint64_t> {
      auto& st = self->state;
      auto& slots = st.optimizer.slots();
      if (snap.values.values.size() != st.values.size()
          || snap.slots.size() != slots.size())
        return caf::make_error(errc::shape_mismatch, "restore of ps",
                               st.opts.index, st.values.size(), slots.size(),
                               snap.values.values.size(), snap.slots.size());
      for (auto& s : snap.slots)
        if (s.values.size() != st.values.size())
          return caf::make_error(errc::shape_mismatch, "restore of ps slot",
                                 st.opts.index, st.values.size(),
                                 s.values.size());
      std::copy(snap.values.values.begin(), snap.values.values.end(),
                st.values.begin());
      for (size_t i = 0; i < slots.size(); ++i)
        std::copy(snap.slots[i].values.begin(), snap.slots[i].values.end(),
                  slots[i].begin());
      st.optimizer.set_steps(snap.optimizer_steps);
      st.stats.clock = snap.clock;
      // The restored state predates every push applied since: their ids no
      // longer count as applied.
      st.applied.clear();
      // Without sync's rounds, the clock counts the pushes applied.
      if (st.opts.mode != consistency::sync)
        st.stats.pushes = snap.clock;
      return st.stats.clock;
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
  return sys.spawn(ps_behavior, opts);
}

} // namespace actorps
