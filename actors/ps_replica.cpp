#include "actors/ps_replica.hpp"
#include "actors/ps_pieces.hpp"

#include <algorithm>
#include <utility>

#include "core/log.hpp"
#include "core/table_lookup.hpp"

namespace actorps {

ps_replica::ps_replica(uint32_t g, const ps_options& opts,
                       std::shared_ptr<const update_rule> dense_rule)
  : group(g), dense(std::move(dense_rule)), policies(opts.tables),
    server(opts.index) {
  if (policies.any([](const table_policy& p) {
        return p.steps_to_live || p.l2_threshold;
      }))
    sweep_rows = opts.sweep_rows;
  auto n = std::max<uint32_t>(opts.workers, 1);
  worker_clock.assign(n, 0);
  pushed_this_round.assign(n, false);
}

ps_stats replica_stats(const ps_replica& r) {
  auto s = r.stats;
  std::vector<table_stats> shards;
  for (auto& [shard, store] : r.tables) {
    auto c = store.counts();
    s.table_rows += c.rows;
    s.table_bytes += c.memory_bytes;
    s.rows_admitted += c.admitted;
    s.keys_rejected += c.pull_rejected;
    s.gradients_dropped += c.gradients_dropped;
    s.evicted_ttl += c.evicted_ttl;
    s.evicted_l2 += c.evicted_l2;
    s.evicted_budget += c.evicted_budget;
    s.filter_bytes += c.filter_bytes;
    shards.push_back(table_stats{store.def().variable, c.rows, c.memory_bytes,
                                 c.admitted, c.pull_rejected,
                                 c.gradients_dropped, c.evicted_ttl,
                                 c.evicted_l2, c.evicted_budget});
  }
  add_table_stats(s.tables, shards);
  return s;
}

caf::error check_tables(ps_replica& r, const std::vector<table_rows>& tables,
                        bool values, uint32_t ps_index) {
  // A push names each shard once: a key in two parts of one shard would be
  // applied twice.
  if (values)
    for (size_t i = 0; i < tables.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (tables[i].shard == tables[j].shard)
          return caf::make_error(errc::bad_message,
                                 "table shard pushed twice", tables[i].shard);
  for (auto& t : tables) {
    auto i = r.tables.find(t.shard);
    if (i == r.tables.end())
      return caf::make_error(errc::unknown_variable, "table shard", t.shard,
                             "ps", ps_index);
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

pull_reply read_replica(ps_replica& r, const pull_request& req, bool share) {
  pull_reply reply;
  reply.clock = r.stats.clock;
  if (req.dense) {
    // A slice was checked against the region when the pull arrived.
    auto from = req.slice ? req.offset : 0;
    auto count = req.slice ? req.count : r.dense.size();
    if (share) {
      reply.shared_values = r.dense.snapshot();
      reply.shared_offset = from;
      reply.shared_count = count;
    } else {
      auto* values = std::as_const(r.dense).values().data() + from;
      reply.values.values.assign(values, values + count);
    }
  }
  reply.tables.resize(req.tables.size());
  for (size_t i = 0; i < req.tables.size(); ++i) {
    auto& t = req.tables[i];
    auto& store = r.tables.at(t.shard);
    auto& keys = t.keys.keys;
    auto& out = reply.tables[i];
    out.shard = t.shard;
    out.values.values.resize(keys.size() * store.def().dim);
    store.pull(keys.data(), keys.size(), out.values.values.data(), req.create);
    r.stats.keys_pulled += keys.size();
  }
  return reply;
}

namespace {

void warn_near_budget(ps_replica& r, uint32_t shard) {
  auto limit = r.row_limits.find(shard);
  if (limit == r.row_limits.end() || r.budget_warned)
    return;
  auto& store = r.tables.at(shard);
  auto rows = store.size();
  if (rows * 10 < limit->second * 9)
    return;
  r.budget_warned = true;
  auto clock = std::max<uint64_t>(r.stats.clock, 1);
  log::warn("ps", static_cast<int>(r.server),
            "table {} shard {} holds {} rows, {:.0f}% of its budget of {} "
            "(grown by {:.1f} rows a push so far): once full, each new row "
            "evicts one ({}); this server's other shards are not warned of",
            store.def().variable, shard, rows,
            100.0 * double(rows) / double(limit->second), limit->second,
            double(rows) / double(clock), to_string(store.policy().evict));
}

} // namespace

void apply_update(ps_replica& r, const push_request& update, float scale,
                  float dense_step, float table_step) {
  if (r.dense.size() > 0) {
    if (scale == 1.0f) {
      r.dense.apply(update.gradient.values.data(), dense_step);
    } else {
      std::vector<float> g(update.gradient.values.begin(),
                           update.gradient.values.end());
      for (auto& x : g)
        x *= scale;
      r.dense.apply(g.data(), dense_step);
    }
  }
  for (auto& t : update.tables) {
    auto& store = r.tables.at(t.shard);
    store.set_clock(r.stats.clock);
    store.apply(t.keys.keys.data(), t.keys.keys.size(),
                t.values.values.data(), scale, table_step);
    r.stats.keys_pushed += t.keys.keys.size();
  }
  // The first shard at 90% of its budget: one warning, with its growth.
  if (!r.row_limits.empty())
    for (auto& t : update.tables)
      warn_near_budget(r, t.shard);
  // Time to live and L2 norm: a bounded sweep per push and shard, so that
  // eviction never holds up pulls and pushes for long (table_store::sweep).
  if (r.sweep_rows > 0)
    for (auto& [shard, store] : r.tables)
      store.sweep(r.stats.clock, r.sweep_rows);
}

void add_to_round(ps_replica& r, const push_request& req) {
  auto& g = req.gradient.values;
  if (r.round_ids.empty())
    r.round_sum.assign(g.begin(), g.end());
  else
    for (size_t i = 0; i < g.size(); ++i)
      r.round_sum[i] += g[i];
  for (auto& t : req.tables) {
    auto dim = r.tables.at(t.shard).def().dim;
    auto& rows = r.round_tables[t.shard];
    auto& keys = t.keys.keys;
    for (size_t i = 0; i < keys.size(); ++i) {
      auto [it, fresh] = rows.index.try_emplace(
        keys[i], static_cast<uint32_t>(rows.keys.size()));
      if (fresh) {
        rows.keys.push_back(keys[i]);
        rows.sums.resize(rows.sums.size() + dim, 0.0f);
      }
      float* sum = rows.sums.data() + uint64_t{it->second} * dim;
      const float* v = t.values.values.data() + i * dim;
      for (uint64_t j = 0; j < dim; ++j)
        sum[j] += v[j];
    }
  }
  r.round_ids.push_back(req.id);
}

push_request round_update(ps_replica& r) {
  push_request update;
  update.group = r.group;
  update.view = r.view;
  update.gradient.values.assign(r.round_sum.begin(), r.round_sum.end());
  for (auto& [shard, rows] : r.round_tables) {
    table_rows t;
    t.shard = shard;
    t.keys.keys = std::move(rows.keys);
    t.values.values.assign(rows.sums.begin(), rows.sums.end());
    update.tables.push_back(std::move(t));
  }
  r.round_tables.clear();
  return update;
}

namespace {

table_snapshot table_snapshot_of(uint32_t shard, table_store::contents c) {
  table_snapshot t;
  t.shard = shard;
  t.keys.keys = std::move(c.keys);
  t.values.values.assign(c.values.begin(), c.values.end());
  for (auto& s : c.slots)
    t.slots.push_back(float_buffer{float_vector(s.begin(), s.end())});
  t.steps.keys = std::move(c.steps);
  return t;
}

/// The dense region, clock and step count of `r`.
ps_snapshot dense_snapshot(const ps_replica& r) {
  ps_snapshot snap;
  snap.clock = r.stats.clock;
  snap.optimizer_steps = r.dense.steps();
  auto& values = r.dense.values();
  snap.values.values.assign(values.begin(), values.end());
  for (auto& slot : r.dense.slots())
    snap.slots.push_back(float_buffer{float_vector(slot.begin(), slot.end())});
  return snap;
}

} // namespace

ps_snapshot save_and_mark(ps_replica& r, uint64_t base, uint64_t mark) {
  auto snap = dense_snapshot(r);
  bool delta = base != 0 && base == r.marked;
  for (auto& [shard, store] : r.tables) {
    if (!delta) {
      snap.tables.push_back(table_snapshot_of(shard, store.export_rows()));
    } else {
      auto t = table_snapshot_of(shard, store.export_changed());
      t.delta = true;
      t.removed.keys = store.removed_since_mark();
      snap.tables.push_back(std::move(t));
    }
    // Marked in the same message as the export: no update falls between.
    store.mark_clean();
  }
  r.marked = mark;
  return snap;
}

ps_snapshot save_replica(const ps_replica& r, bool replication) {
  auto snap = dense_snapshot(r);
  for (auto& [shard, store] : r.tables)
    snap.tables.push_back(table_snapshot_of(shard, store.export_rows()));
  if (replication) {
    // Under sync the pushes of an open round are taken (their ids, counted
    // in stats.pushes) but not applied: their gradient is only summed, so
    // it is not in the values above. They reach the backup with the round's
    // forward, which must find them new there: a copy that named them
    // applied made the backup skip a round it knew only partly (an update
    // lost) or count its pushes twice (ps_move_test, move_test's sync case).
    for (auto id : r.applied)
      if (std::none_of(r.round_ids.begin(), r.round_ids.end(),
                       [&](const update_id& x) { return x.closure == id; }))
        snap.applied.keys.push_back(id);
    snap.pushes = r.stats.pushes - r.round_ids.size();
    snap.worker_clocks.keys = r.worker_clock;
    snap.partials = encode_partials(r);
  }
  return snap;
}

caf::error restore_replica(ps_replica& r, ps_snapshot& snap, bool replication,
                           const std::shared_ptr<const update_rule>& table_rule,
                           consistency mode, uint32_t ps_index) {
  auto& slots = r.dense.slots();
  if (snap.values.values.size() != r.dense.size()
      || snap.slots.size() != slots.size())
    return caf::make_error(errc::shape_mismatch, "restore of ps", ps_index,
                           "group", r.group, r.dense.size(), slots.size(),
                           snap.values.values.size(), snap.slots.size());
  for (auto& s : snap.slots)
    if (s.values.size() != r.dense.size())
      return caf::make_error(errc::shape_mismatch, "restore of ps slot",
                             ps_index, r.dense.size(), s.values.size());
  std::map<uint64_t, ps_replica::partial_push> partials;
  if (replication) {
    auto decoded = decode_partials(r, snap.partials, ps_index);
    if (!decoded)
      return decoded.error();
    partials = std::move(*decoded);
  }
  if (replication && !snap.worker_clocks.keys.empty()
      && snap.worker_clocks.keys.size() != r.worker_clock.size())
    return caf::make_error(errc::shape_mismatch, "worker clocks",
                           r.worker_clock.size(),
                           snap.worker_clocks.keys.size());
  // Tables: every snapshot is loaded into a fresh store first, so that a bad
  // one changes nothing.
  std::vector<std::pair<uint32_t, table_store>> fresh;
  for (auto& t : snap.tables) {
    for (auto& [shard, store] : fresh)
      if (shard == t.shard)
        return caf::make_error(errc::shape_mismatch,
                               "restore names table shard twice", t.shard);
    auto i = r.tables.find(t.shard);
    if (i == r.tables.end())
      return caf::make_error(errc::unknown_variable, "restore of table shard",
                             t.shard, "ps", ps_index);
    table_store store{i->second.def(), table_rule, i->second.policy()};
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
            r.dense.values().begin());
  for (size_t i = 0; i < slots.size(); ++i)
    std::copy(snap.slots[i].values.begin(), snap.slots[i].values.end(),
              slots[i].begin());
  r.dense.set_steps(snap.optimizer_steps);
  // A table shard the snapshot does not mention starts empty again.
  for (auto& [shard, store] : r.tables)
    store = table_store{store.def(), table_rule, store.policy()};
  for (auto& [shard, store] : fresh)
    r.tables.at(shard) = std::move(store);
  // Fresh stores track no changes: the next checkpoint gets every row.
  r.marked = 0;
  r.stats.clock = snap.clock;
  // A sync round in progress was computed on the replaced state.
  auto acks = std::move(r.round_acks);
  r.round_acks.clear();
  for (auto& ack : acks)
    ack.deliver(caf::make_error(errc::cancelled, "sync round abandoned by a "
                                                 "restore"));
  r.round_ids.clear();
  r.round_tables.clear();
  std::fill(r.pushed_this_round.begin(), r.pushed_this_round.end(), false);
  if (replication) {
    r.partial = std::move(partials);
    r.applied = std::set<uint64_t>(snap.applied.keys.begin(),
                                   snap.applied.keys.end());
    r.stats.pushes = snap.pushes;
    if (!snap.worker_clocks.keys.empty())
      r.worker_clock = snap.worker_clocks.keys;
  } else {
    // The restored state predates every push applied since: their ids no
    // longer count as applied, nor do pushes in pieces under way.
    r.applied.clear();
    r.partial.clear();
    // Without sync's rounds, the clock counts the pushes applied.
    if (mode != consistency::sync)
      r.stats.pushes = snap.clock;
  }
  return {};
}

caf::result<uint64_t>
create_in_replica(ps_replica& r, create_shard& req,
                  const std::shared_ptr<const update_rule>& table_rule) {
  if (!req.table) {
    auto expected = (req.row_end - req.row_begin) * req.cols;
    if (req.row_end < req.row_begin || req.values.values.size() != expected)
      return caf::make_error(errc::shape_mismatch, req.variable, req.shard,
                             expected, req.values.values.size());
    auto offset = r.dense.append(req.values.values.data(),
                                 req.values.values.size());
    ++r.dense_shards;
    r.stats.floats = r.dense.size();
    r.stats.shards = r.dense_shards + r.tables.size();
    return offset;
  }
  if (req.cols == 0 || !req.values.values.empty()
      || r.tables.count(req.shard) > 0)
    return caf::make_error(errc::shape_mismatch, "table shard", req.variable,
                           req.shard, req.cols, req.values.values.size());
  table_shard_def def;
  def.variable = req.variable;
  def.dim = req.cols;
  def.vocabulary = req.vocabulary;
  def.init_scale = req.init_scale;
  def.seed = req.seed;
  // The policy of this shard's table: its own, or the job-wide one.
  auto& policy = r.policies.for_table(req.variable);
  try {
    auto dim = def.dim;
    r.tables.emplace(req.shard,
                     table_store{std::move(def), table_rule, policy});
    if (policy.has_budget())
      r.row_limits[req.shard] = table_row_limit(
        policy, dim, table_rule ? table_rule->slot_count() : 0);
  } catch (const std::exception& e) {
    return caf::make_error(errc::shape_mismatch, "table shard", req.variable,
                           std::string{e.what()});
  }
  r.stats.shards = r.dense_shards + r.tables.size();
  return uint64_t{0};
}

void prune_replica(ps_replica& r, uint64_t first, uint64_t watermark) {
  if (first == r.pruned_first && watermark <= r.watermark)
    return;
  if (watermark < first)
    return;
  r.pruned_first = first;
  r.watermark = watermark;
  r.applied.erase(r.applied.lower_bound(first),
                  r.applied.lower_bound(watermark));
  prune_partials(r, first, watermark);
}

} // namespace actorps
