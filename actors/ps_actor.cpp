#include "actors/ps_actor.hpp"

#include <algorithm>
#include <map>
#include <thread>
#include <unordered_set>

#include <absl/container/flat_hash_map.h>

#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "core/error.hpp"
#include "core/process.hpp"
#include "core/log.hpp"
#include "core/table_lookup.hpp"
#include "core/table_store.hpp"

namespace actorps {

namespace {

/// The row gradients of one table shard summed over a sync round.
struct round_rows {
  std::vector<uint64_t> keys;
  std::vector<float> sums;
  absl::flat_hash_map<uint64_t, uint32_t> index;
};

struct ps_state {
  ps_options opts;
  std::shared_ptr<const update_rule> table_rule;
  dense_region dense;
  /// Dense shards created (their values live in `dense`).
  uint64_t dense_shards = 0;
  /// Table shards by shard id.
  std::map<uint32_t, table_store> tables;
  ps_stats stats;
  /// The closure ids of every accepted push.
  std::unordered_set<uint64_t> applied;
  // -- sync -------------------------------------------------------------------
  std::vector<float> round_sum;
  std::map<uint32_t, round_rows> round_tables;
  std::vector<bool> pushed_this_round;
  uint32_t round_pushes = 0;
  std::vector<caf::typed_response_promise<uint64_t>> round_acks;
  // -- ssp --------------------------------------------------------------------
  /// Pushes applied per worker.
  std::vector<uint64_t> worker_clock;
  struct held_pull {
    pull_request req;
    caf::typed_response_promise<pull_reply> promise;
  };
  std::vector<held_pull> held_pulls;
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

/// Checks the table parts of a pull or push: every shard held, keys inside
/// the vocabulary, and (`values`: a push) each shard once, keys x dim values
/// and no key twice.
caf::error check_tables(ps_state& st, const std::vector<table_rows>& tables,
                        bool values) {
  // A push names each shard once: a key in two parts of one shard would be
  // applied twice.
  if (values)
    for (size_t i = 0; i < tables.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (tables[i].shard == tables[j].shard)
          return caf::make_error(errc::bad_message,
                                 "table shard pushed twice", tables[i].shard);
  for (auto& t : tables) {
    auto i = st.tables.find(t.shard);
    if (i == st.tables.end())
      return caf::make_error(errc::unknown_variable, "table shard", t.shard,
                             "ps", st.opts.index);
    auto& store = i->second;
    auto& keys = t.keys.keys;
    auto bad = store.first_invalid_key(keys.data(), keys.size());
    if (bad < keys.size())
      return caf::make_error(errc::key_out_of_range, store.def().variable,
                             keys[bad], store.def().vocabulary);
    if (!values)
      continue;
    if (t.values.values.size() != keys.size() * store.def().dim)
      return caf::make_error(errc::shape_mismatch, store.def().variable,
                             keys.size() * store.def().dim,
                             t.values.values.size());
    auto dup = first_duplicate(keys.data(), keys.size());
    if (dup < keys.size())
      return caf::make_error(errc::bad_message, "key pushed twice",
                             store.def().variable, keys[dup]);
  }
  return {};
}

pull_reply read(ps_state& st, const pull_request& req) {
  pull_reply reply;
  reply.clock = st.stats.clock;
  if (req.dense)
    reply.values.values.assign(st.dense.values().begin(),
                               st.dense.values().end());
  reply.tables.resize(req.tables.size());
  for (size_t i = 0; i < req.tables.size(); ++i) {
    auto& t = req.tables[i];
    auto& store = st.tables.at(t.shard);
    auto& keys = t.keys.keys;
    auto& out = reply.tables[i];
    out.shard = t.shard;
    out.values.values.resize(keys.size() * store.def().dim);
    store.pull(keys.data(), keys.size(), out.values.values.data(), req.create);
    st.stats.keys_pulled += keys.size();
  }
  return reply;
}

void release_pulls(ps_ptr self) {
  auto& st = self->state;
  auto held = std::move(st.held_pulls);
  st.held_pulls.clear();
  for (auto& h : held) {
    if (may_read(st, h.req.worker))
      h.promise.deliver(read(st, h.req));
    else
      st.held_pulls.push_back(std::move(h));
  }
}

/// Applies one push now (async, ssp).
void apply_push(ps_state& st, const push_request& req) {
  if (st.dense.size() > 0)
    st.dense.apply(req.gradient.values.data());
  for (auto& t : req.tables) {
    st.tables.at(t.shard).apply(t.keys.keys.data(), t.keys.keys.size(),
                                t.values.values.data());
    st.stats.keys_pushed += t.keys.keys.size();
  }
}

/// Adds one push to the sync round's sums.
void add_to_round(ps_state& st, const push_request& req) {
  auto& g = req.gradient.values;
  if (st.round_pushes == 0)
    st.round_sum.assign(g.begin(), g.end());
  else
    for (size_t i = 0; i < g.size(); ++i)
      st.round_sum[i] += g[i];
  for (auto& t : req.tables) {
    auto dim = st.tables.at(t.shard).def().dim;
    auto& r = st.round_tables[t.shard];
    auto& keys = t.keys.keys;
    for (size_t i = 0; i < keys.size(); ++i) {
      auto [it, fresh] = r.index.try_emplace(keys[i],
                                             static_cast<uint32_t>(r.keys.size()));
      if (fresh) {
        r.keys.push_back(keys[i]);
        r.sums.resize(r.sums.size() + dim, 0.0f);
      }
      float* sum = r.sums.data() + uint64_t{it->second} * dim;
      const float* v = t.values.values.data() + i * dim;
      for (uint64_t j = 0; j < dim; ++j)
        sum[j] += v[j];
    }
  }
}

/// Applies the sync round's mean gradient and acknowledges every push of it.
void close_round(ps_state& st) {
  auto scale = 1.0f / static_cast<float>(st.round_pushes);
  if (st.dense.size() > 0) {
    for (auto& x : st.round_sum)
      x *= scale;
    st.dense.apply(st.round_sum.data());
  }
  for (auto& [shard, r] : st.round_tables) {
    st.tables.at(shard).apply(r.keys.data(), r.keys.size(), r.sums.data(),
                              scale);
    st.stats.keys_pushed += r.keys.size();
  }
  st.round_tables.clear();
  ++st.stats.clock;
  st.round_pushes = 0;
  std::fill(st.pushed_this_round.begin(), st.pushed_this_round.end(), false);
  auto acks = std::move(st.round_acks);
  st.round_acks.clear();
  for (auto& ack : acks)
    ack.deliver(st.stats.clock);
}

ps_snapshot save(const ps_state& st) {
  ps_snapshot snap;
  snap.clock = st.stats.clock;
  snap.optimizer_steps = st.dense.steps();
  auto& values = st.dense.values();
  snap.values.values.assign(values.begin(), values.end());
  for (auto& slot : const_cast<dense_region&>(st.dense).slots())
    snap.slots.push_back(float_buffer{float_vector(slot.begin(), slot.end())});
  for (auto& [shard, store] : st.tables) {
    auto c = store.export_rows();
    table_snapshot t;
    t.shard = shard;
    t.keys.keys = std::move(c.keys);
    t.values.values.assign(c.values.begin(), c.values.end());
    for (auto& s : c.slots)
      t.slots.push_back(float_buffer{float_vector(s.begin(), s.end())});
    t.steps.keys = std::move(c.steps);
    snap.tables.push_back(std::move(t));
  }
  return snap;
}

caf::result<uint64_t> restore(ps_state& st, ps_snapshot& snap) {
  auto& slots = st.dense.slots();
  if (snap.values.values.size() != st.dense.size()
      || snap.slots.size() != slots.size())
    return caf::make_error(errc::shape_mismatch, "restore of ps",
                           st.opts.index, st.dense.size(), slots.size(),
                           snap.values.values.size(), snap.slots.size());
  for (auto& s : snap.slots)
    if (s.values.size() != st.dense.size())
      return caf::make_error(errc::shape_mismatch, "restore of ps slot",
                             st.opts.index, st.dense.size(), s.values.size());
  // Tables: every snapshot is loaded into a fresh store first, so that a bad
  // one changes nothing.
  std::vector<std::pair<uint32_t, table_store>> fresh;
  for (auto& t : snap.tables) {
    for (auto& [shard, store] : fresh)
      if (shard == t.shard)
        return caf::make_error(errc::shape_mismatch,
                               "restore names table shard twice", t.shard);
    auto i = st.tables.find(t.shard);
    if (i == st.tables.end())
      return caf::make_error(errc::unknown_variable, "restore of table shard",
                             t.shard, "ps", st.opts.index);
    table_store store{i->second.def(), st.table_rule};
    table_store::contents c;
    c.keys = std::move(t.keys.keys);
    c.values.assign(t.values.values.begin(), t.values.values.end());
    for (auto& s : t.slots)
      c.slots.emplace_back(s.values.begin(), s.values.end());
    c.steps = std::move(t.steps.keys);
    try {
      store.import_rows(std::move(c));
    } catch (const std::exception& e) {
      return caf::make_error(errc::shape_mismatch, "restore of table shard",
                             t.shard, std::string{e.what()});
    }
    fresh.emplace_back(t.shard, std::move(store));
  }
  std::copy(snap.values.values.begin(), snap.values.values.end(),
            st.dense.values().begin());
  for (size_t i = 0; i < slots.size(); ++i)
    std::copy(snap.slots[i].values.begin(), snap.slots[i].values.end(),
              slots[i].begin());
  st.dense.set_steps(snap.optimizer_steps);
  // A table shard the snapshot does not mention starts empty again.
  for (auto& [shard, store] : st.tables)
    store = table_store{store.def(), st.table_rule};
  for (auto& [shard, store] : fresh)
    st.tables.at(shard) = std::move(store);
  st.stats.clock = snap.clock;
  // A sync round in progress was computed on the replaced state.
  auto acks = std::move(st.round_acks);
  st.round_acks.clear();
  for (auto& ack : acks)
    ack.deliver(caf::make_error(errc::cancelled, "sync round abandoned by a "
                                                 "restore"));
  st.round_pushes = 0;
  st.round_tables.clear();
  std::fill(st.pushed_this_round.begin(), st.pushed_this_round.end(), false);
  // The restored state predates every push applied since: their ids no
  // longer count as applied.
  st.applied.clear();
  // Without sync's rounds, the clock counts the pushes applied.
  if (st.opts.mode != consistency::sync)
    st.stats.pushes = snap.clock;
  return st.stats.clock;
}

caf::result<uint64_t> create(ps_state& st, create_shard& req) {
  if (!req.table) {
    auto expected = (req.row_end - req.row_begin) * req.cols;
    if (req.row_end < req.row_begin || req.values.values.size() != expected)
      return caf::make_error(errc::shape_mismatch, req.variable, req.shard,
                             expected, req.values.values.size());
    auto offset = st.dense.append(req.values.values.data(),
                                  req.values.values.size());
    ++st.dense_shards;
    st.stats.floats = st.dense.size();
    st.stats.shards = st.dense_shards + st.tables.size();
    return offset;
  }
  if (req.cols == 0 || !req.values.values.empty()
      || st.tables.count(req.shard) > 0)
    return caf::make_error(errc::shape_mismatch, "table shard", req.variable,
                           req.shard, req.cols, req.values.values.size());
  table_shard_def def;
  def.variable = req.variable;
  def.dim = req.cols;
  def.vocabulary = req.vocabulary;
  def.init_scale = req.init_scale;
  def.seed = req.seed;
  st.tables.emplace(req.shard, table_store{std::move(def), st.table_rule});
  st.stats.shards = st.dense_shards + st.tables.size();
  return uint64_t{0};
}

ps_actor::behavior_type ps_behavior(ps_ptr self, ps_options opts,
                                    std::shared_ptr<const update_rule> dense,
                                    std::shared_ptr<const update_rule> table) {
  auto& st = self->state;
  st.opts = opts;
  st.dense = dense_region{std::move(dense)};
  st.table_rule = std::move(table);
  st.worker_clock.assign(std::max<uint32_t>(opts.workers, 1), 0);
  st.pushed_this_round.assign(std::max<uint32_t>(opts.workers, 1), false);
  return {
    [=](create_atom, create_shard& req) -> caf::result<uint64_t> {
      return create(self->state, req);
    },
    [=](pull_atom, pull_request& req) -> caf::result<pull_reply> {
      auto& st = self->state;
      if (st.dense_shards == 0 && st.tables.empty())
        return caf::make_error(errc::no_shards, st.opts.index);
      if (req.worker != no_worker && req.worker >= st.worker_clock.size())
        return caf::make_error(errc::unknown_worker, req.worker,
                               st.worker_clock.size());
      if (auto err = check_tables(st, req.tables, false))
        return err;
      if (may_read(st, req.worker))
        return read(st, req);
      auto rp = self->make_response_promise<pull_reply>();
      st.held_pulls.push_back(ps_state::held_pull{std::move(req), rp});
      return rp;
    },
    [=](push_atom, const push_request& req) -> caf::result<uint64_t> {
      auto& st = self->state;
      auto w = req.id.worker;
      if (req.gradient.values.size() != st.dense.size())
        return caf::make_error(errc::shape_mismatch, "push to ps",
                               st.opts.index, st.dense.size(),
                               req.gradient.values.size());
      if (auto err = check_tables(st, req.tables, true))
        return err;
      if (st.opts.mode != consistency::async && w >= st.worker_clock.size())
        return caf::make_error(errc::unknown_worker, w,
                               st.worker_clock.size());
      if (st.opts.mode == consistency::sync && st.pushed_this_round[w])
        return caf::make_error(errc::bad_message,
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
        apply_push(st, req);
        ++st.stats.clock;
        if (st.opts.mode == consistency::ssp) {
          ++st.worker_clock[w];
          release_pulls(self);
        }
        return st.stats.clock;
      }
      // sync: sum this round's gradients; the last push applies their mean.
      add_to_round(st, req);
      st.pushed_this_round[w] = true;
      auto rp = self->make_response_promise<uint64_t>();
      st.round_acks.push_back(rp);
      if (++st.round_pushes == st.pushed_this_round.size()) {
        close_round(st);
      } else if (st.round_pushes == 1 && st.opts.round_timeout.count() > 0) {
        // Rounds are named by the clock they close at.
        self->delayed_send(self, st.opts.round_timeout, caf::flush_atom_v,
                           st.stats.clock + 1);
      }
      return rp;
    },
    [=](stats_atom) -> ps_stats {
      auto& st = self->state;
      auto s = st.stats;
      for (auto& [shard, store] : st.tables) {
        s.table_rows += store.size();
        s.table_bytes += store.memory_bytes();
      }
      s.peak_rss_bytes = peak_rss_bytes();
      return s;
    },
    [=](freeze_atom, uint64_t ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    },
    [=](save_atom) -> ps_snapshot { return save(self->state); },
    [=](ping_atom) -> uint32_t { return self->state.opts.index; },
    [=](caf::flush_atom, uint64_t round) {
      auto& st = self->state;
      if (st.round_pushes == 0 || st.stats.clock + 1 != round)
        return; // closed already
      log::warn("ps", static_cast<int>(st.opts.index),
                "sync round {} closed after {} ms with {} of {} workers' "
                "pushes",
                round, st.opts.round_timeout.count(), st.round_pushes,
                st.pushed_this_round.size());
      close_round(st);
    },
    [=](restore_atom, ps_snapshot& snap) -> caf::result<uint64_t> {
      return restore(self->state, snap);
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
