#include "cluster/services/checkpointer.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/after.hpp"
#include "caf/scoped_actor.hpp"

#include "cluster/job/ask.hpp"
#include "cluster/services/checkpoint_fit.hpp"
#include "cluster/net/handshake.hpp"
#include "cluster/job/cluster.hpp"
#include "cluster/job/job_setup.hpp"
#include "core/checkpoint_reshard.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/update_rule.hpp"

namespace actorps {

namespace {

constexpr auto answer_timeout = std::chrono::seconds(60);

template <class T, class Handle, class... Ts>
T ask(caf::actor_system& sys, const Handle& dest, const std::string& what,
      Ts&&... xs) {
  return detail::ask<T>(sys, dest, what, answer_timeout,
                        std::forward<Ts>(xs)...);
}

/// The checkpoint shard `st` holds for shard `s` of `layout` (checked with
/// check_checkpoint or check_checkpoint_variables).
const checkpoint_shard& shard_in(const checkpoint_state& st,
                                 const placement& layout, const shard_info& s) {
  auto& var = layout.variables[s.variable];
  for (auto& c : st.shards)
    if (c.variable == var.name && c.index == s.index)
      return c;
  throw runtime_failure(fmt::format("the checkpoint has no shard {} of {}",
                                    s.index, var.name));
}

// -- snapshots ----------------------------------------------------------------

/// The checkpoint shard of table shard `t` (from server `p`'s snapshot).
checkpoint_shard table_shard_of(const placement& layout, uint32_t p,
                                table_snapshot& t) {
  auto& s = layout.shards.at(t.shard);
  auto& var = layout.variables[s.variable];
  checkpoint_shard out;
  out.variable = var.name;
  out.index = s.index;
  out.table = true;
  out.cols = var.cols;
  out.ps = p;
  out.keys = std::move(t.keys.keys);
  out.values.assign(t.values.values.begin(), t.values.values.end());
  for (auto& slot : t.slots)
    out.slots.emplace_back(slot.values.begin(), slot.values.end());
  out.steps = std::move(t.steps.keys);
  out.delta = t.delta;
  out.removed = std::move(t.removed.keys);
  return out;
}

/// "dense_0/kernel[0:392), embedding/user (table shard 1)" for server `p`.
std::string variables_on(const placement& layout, uint32_t p) {
  std::string out;
  for (auto& s : layout.shards_of(p)) {
    auto& name = layout.variables[s.variable].name;
    out += out.empty() ? "" : ", ";
    if (s.kind == variable_kind::table)
      out += fmt::format("{} (table shard {})", name, s.index);
    else
      out += fmt::format("{}[{}:{})", name, s.row_begin, s.row_end);
  }
  return out;
}

} // namespace

checkpoint_state capture_checkpoint(cluster& cl, const job_config& cfg,
                                    const training_progress& progress,
                                    const checkpoint_request& req) {
  auto& layout = cl.layout();
  checkpoint_state st;
  st.global_step = progress.global_step;
  st.epoch = progress.epoch;
  st.step_in_epoch = progress.step_in_epoch;
  st.workers = progress.workers;
  st.job = checkpoint_job_fields(make_fingerprint(cfg, layout));
  auto servers = cl.servers();
  for (uint32_t p = 0; p < servers.size(); ++p) {
    ps_snapshot snap;
    try {
      auto what = fmt::format("saving group {}", p);
      if (req.id == 0)
        snap = ask<ps_snapshot>(cl.system(), servers[p], what, save_atom_v, p);
      else
        snap = ask<ps_snapshot>(cl.system(), servers[p], what, save_atom_v, p,
                                req.base.empty() ? uint64_t{0} : req.base_id,
                                req.id);
    } catch (const detail::lost_while_asking& e) {
      throw checkpoint_interrupted(e.what());
    } catch (const runtime_failure& e) {
      // The group moved away meanwhile (its old server answers "moved"):
      // the next checkpoint finds it at its new server.
      auto now = cl.routes();
      if (p < now.size() && now[p].ps != servers[p])
        throw checkpoint_interrupted(
          fmt::format("{} (group {} moved meanwhile)", e.what(), p));
      throw;
    }
    if (snap.values.values.size() != layout.ps_sizes[p])
      throw runtime_failure(fmt::format("saving ps {}: {} floats, expected {}",
                                        p, snap.values.values.size(),
                                        layout.ps_sizes[p]));
    st.ps_clocks.push_back(snap.clock);
    st.optimizer_steps.push_back(snap.optimizer_steps);
    for (auto& t : snap.tables) {
      if (t.shard >= layout.shards.size()
          || layout.shards[t.shard].kind != variable_kind::table
          || layout.shards[t.shard].ps != p)
        throw runtime_failure(fmt::format("saving ps {}: it holds table shard "
                                          "{}, which the job does not place "
                                          "there",
                                          p, t.shard));
      st.shards.push_back(table_shard_of(layout, p, t));
    }
    for (auto& s : layout.shards_of(p)) {
      if (s.kind != variable_kind::dense)
        continue;
      auto& var = layout.variables[s.variable];
      checkpoint_shard out;
      out.variable = var.name;
      out.index = s.index;
      out.row_begin = s.row_begin;
      out.row_end = s.row_end;
      out.cols = var.cols;
      out.ps = p;
      auto first = s.ps_offset;
      auto last = s.ps_offset + s.size;
      out.values.assign(snap.values.values.begin() + first,
                        snap.values.values.begin() + last);
      for (auto& slot : snap.slots)
        out.slots.emplace_back(slot.values.begin() + first,
                               slot.values.begin() + last);
      st.shards.push_back(std::move(out));
    }
  }
  st.id = req.id;
  st.delta = std::any_of(st.shards.begin(), st.shards.end(),
                         [](const checkpoint_shard& s) { return s.delta; });
  if (st.delta) {
    st.base = req.base;
    st.base_id = req.base_id;
  }
  return st;
}

ps_snapshot snapshot_for(const placement& layout, const checkpoint_state& st,
                         uint32_t p) {
  ps_snapshot snap;
  snap.clock = st.ps_clocks.at(p);
  snap.optimizer_steps = st.optimizer_steps.at(p);
  snap.values.values.resize(layout.ps_sizes[p]);
  // The dense rule's slots: a server without a dense shard keeps them too,
  // empty, and refuses a snapshot without them.
  size_t dense_slots = 0;
  for (auto& c : st.shards)
    if (!c.table)
      dense_slots = std::max(dense_slots, c.slots.size());
  snap.slots.assign(dense_slots,
                    float_buffer{float_vector(layout.ps_sizes[p])});
  for (auto& s : layout.shards_of(p)) {
    auto& c = shard_in(st, layout, s);
    if (s.kind == variable_kind::table) {
      table_snapshot t;
      t.shard = layout.variable_shards[s.variable][s.index];
      t.keys.keys = c.keys;
      t.values.values.assign(c.values.begin(), c.values.end());
      for (auto& slot : c.slots)
        t.slots.push_back(float_buffer{float_vector(slot.begin(), slot.end())});
      t.steps.keys = c.steps;
      snap.tables.push_back(std::move(t));
      continue;
    }
    std::copy(c.values.begin(), c.values.end(),
              snap.values.values.begin() + s.ps_offset);
    if (snap.slots.size() < c.slots.size())
      snap.slots.resize(c.slots.size(),
                        float_buffer{float_vector(layout.ps_sizes[p])});
    for (size_t i = 0; i < c.slots.size(); ++i)
      std::copy(c.slots[i].begin(), c.slots[i].end(),
                snap.slots[i].values.begin() + s.ps_offset);
  }
  return snap;
}

ps_snapshot variables_snapshot_for(const placement& layout,
                                   const checkpoint_state& st, uint32_t p,
                                   const job_config& cfg) {
  auto rule = make_update_rule(cfg.optimizer, "optimizer");
  auto table_rule = make_update_rule(cfg.table_optimizer, "table_optimizer");
  // n floats at slot i's initial value, for each slot `r` keeps.
  auto fresh_slots = [](const update_rule& r, size_t n) {
    std::vector<float_buffer> out;
    for (size_t i = 0; i < r.slot_count(); ++i)
      out.push_back(float_buffer{float_vector(n, r.slot_init(i))});
    return out;
  };
  ps_snapshot snap; // clock and step count 0
  snap.values.values.resize(layout.ps_sizes[p]);
  snap.slots = fresh_slots(*rule, layout.ps_sizes[p]);
  for (auto& s : layout.shards_of(p)) {
    auto& c = shard_in(st, layout, s);
    if (s.kind == variable_kind::table) {
      table_snapshot t;
      t.shard = layout.variable_shards[s.variable][s.index];
      t.keys.keys = c.keys;
      t.values.values.assign(c.values.begin(), c.values.end());
      t.slots = fresh_slots(*table_rule, c.values.size());
      t.steps.keys.assign(c.keys.size(), 0);
      snap.tables.push_back(std::move(t));
      continue;
    }
    std::copy(c.values.begin(), c.values.end(),
              snap.values.values.begin() + s.ps_offset);
  }
  return snap;
}

void restore_ps(caf::actor_system& sys, const ps_actor& ps, uint32_t index,
                ps_snapshot snap) {
  ask<uint64_t>(sys, ps, fmt::format("restoring group {}", index),
                restore_atom_v, index,
                std::move(snap));
}

std::string restore_ps_from_latest(caf::actor_system& sys,
                                   const placement& layout,
                                   const job_config& cfg, const ps_actor& ps,
                                   uint32_t index) {
  auto dir = cfg.checkpoint_dir.empty() ? std::string{}
                                        : latest_checkpoint(cfg.checkpoint_dir);
  if (dir.empty()) {
    if (!cfg.reset_lost_ps)
      throw runtime_failure(fmt::format(
        "the shards placed on ps {} were lost (no live copy) and cannot be "
        "restored: {}; their variables are lost: {} (set "
        "cluster.reset_lost_ps to start lost shards again from the initial "
        "values)",
        index,
        cfg.checkpoint_dir.empty()
          ? std::string{"no checkpoint_dir"}
          : fmt::format("no checkpoint in {} yet", cfg.checkpoint_dir),
        variables_on(layout, index)));
    log::warn("coordinator", -1,
              "no checkpoint to restore the shards placed on ps {} from: they "
              "start again from the initial values (cluster.reset_lost_ps)",
              index);
    return dir;
  }
  // The job's first checkpoint may still be the one it was restored from,
  // written with another number of ps.
  auto st = read_checkpoint(dir);
  if (!checkpoint_fits_placement(st, layout))
    st = reshard_checkpoint(st, layout).state;
  restore_ps(sys, ps, index, snapshot_for(layout, st, index));
  log::info("coordinator", -1, "the shards placed on ps {} restored from {}",
            index, dir);
  return dir;
}

void restore_checkpoint(cluster& cl, const checkpoint_state& st) {
  auto& layout = cl.layout();
  auto servers = cl.servers();
  for (uint32_t p = 0; p < servers.size(); ++p)
    restore_ps(cl.system(), servers[p], p, snapshot_for(layout, st, p));
  // The backups get their primaries' restored state.
  cl.resync_replicas();
  auto& workers = cl.workers();
  for (uint32_t w = 0; w < workers.size(); ++w)
    ask<bool>(cl.system(), workers[w],
              fmt::format("moving worker {} to its data position", w),
              seek_atom_v, st.workers.at(w).epoch, st.workers.at(w).offset);
}

void restore_variables(cluster& cl, const checkpoint_state& st,
                       const job_config& cfg) {
  auto& layout = cl.layout();
  auto servers = cl.servers();
  for (uint32_t p = 0; p < servers.size(); ++p)
    restore_ps(cl.system(), servers[p], p,
               variables_snapshot_for(layout, st, p, cfg));
  cl.resync_replicas();
}

training_progress progress_of(const checkpoint_state& st) {
  return training_progress{st.global_step, st.epoch, st.step_in_epoch,
                           st.workers};
}

} // namespace actorps
