#include "core/checkpoint_reshard.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

/// The checkpoint's shards by variable name.
using shards_by_variable
  = std::map<std::string, std::vector<const checkpoint_shard*>>;

/// "rows 0-392 of dense_0/kernel" or "table shard 1 of embedding/user".
std::string shard_name(const checkpoint_shard& c) {
  if (c.table)
    return fmt::format("table shard {} of {}", c.index, c.variable);
  return fmt::format("shard {} (rows {}-{}) of {}", c.index, c.row_begin,
                     c.row_end, c.variable);
}

/// Checks what every shard of variable `var` must have in common: its kind,
/// its columns and its number of slots (returned).
size_t common_slots(const variable_def& var,
                    const std::vector<const checkpoint_shard*>& pieces) {
  bool table = var.kind == variable_kind::table;
  size_t slots = pieces.front()->slots.size();
  for (auto* c : pieces) {
    if (c->table != table)
      throw input_error(fmt::format(
        "re-sharding: {} is a {} shard, but {} is a {} variable",
        shard_name(*c), c->table ? "table" : "dense", var.name,
        to_string(var.kind)));
    if (c->cols != var.cols)
      throw input_error(fmt::format("re-sharding: {} has {} columns, the "
                                    "variable {}",
                                    shard_name(*c), c->cols, var.cols));
    if (c->slots.size() != slots)
      throw input_error(fmt::format(
        "re-sharding: the shards of {} have {} and {} optimizer slots",
        var.name, slots, c->slots.size()));
    auto rows = table ? c->keys.size() : c->row_end - c->row_begin;
    if (!table && c->row_end < c->row_begin)
      throw input_error(fmt::format("re-sharding: {} ends before it begins",
                                    shard_name(*c)));
    auto floats = rows * c->cols;
    bool sized = c->values.size() == floats
                 && std::all_of(c->slots.begin(), c->slots.end(),
                                [&](const std::vector<float>& s) {
                                  return s.size() == floats;
                                });
    if (!sized || (table && c->steps.size() != c->keys.size()))
      throw input_error(fmt::format("re-sharding: {} holds arrays of another "
                                    "size than its {} rows x {} columns",
                                    shard_name(*c), rows, c->cols));
  }
  return slots;
}

/// Re-slices dense variable `v` into its target shards (`out`, by shard id).
void recut_dense(const placement& target, uint32_t v,
                 std::vector<const checkpoint_shard*> pieces,
                 std::vector<checkpoint_shard>& out) {
  auto& var = target.variables[v];
  auto slots = common_slots(var, pieces);
  std::sort(pieces.begin(), pieces.end(),
            [](const checkpoint_shard* a, const checkpoint_shard* b) {
              return a->row_begin < b->row_begin;
            });
  // The pieces must tile [0, rows): each begins where the one before ends.
  uint64_t next = 0;
  for (auto* c : pieces) {
    if (c->row_begin != next)
      throw input_error(fmt::format(
        "re-sharding: the shards of {} {} rows {}-{}", var.name,
        c->row_begin < next ? "overlap at" : "leave out", std::min(next,
                                                                   c->row_begin),
        std::max(next, c->row_begin)));
    next = c->row_end;
  }
  if (next != var.rows)
    throw input_error(fmt::format("re-sharding: the shards of {} cover rows "
                                  "0-{}, the variable has {}",
                                  var.name, next, var.rows));
  auto cols = var.cols;
  for (auto id : target.variable_shards[v]) {
    auto& s = target.shards[id];
    auto& o = out[id];
    o.values.reserve(s.size);
    o.slots.assign(slots, {});
    for (auto& slot : o.slots)
      slot.reserve(s.size);
    for (auto* c : pieces) {
      auto lo = std::max(s.row_begin, c->row_begin);
      auto hi = std::min(s.row_end, c->row_end);
      if (lo >= hi)
        continue;
      auto first = static_cast<ptrdiff_t>((lo - c->row_begin) * cols);
      auto last = static_cast<ptrdiff_t>((hi - c->row_begin) * cols);
      o.values.insert(o.values.end(), c->values.begin() + first,
                      c->values.begin() + last);
      for (size_t i = 0; i < slots; ++i)
        o.slots[i].insert(o.slots[i].end(), c->slots[i].begin() + first,
                          c->slots[i].begin() + last);
    }
  }
}

/// Re-distributes the rows of table `v` to its target shards (`out`, by
/// shard id) by the target's partition of its keys.
void recut_table(const placement& target, uint32_t v,
                 const std::vector<const checkpoint_shard*>& pieces,
                 std::vector<checkpoint_shard>& out) {
  auto& var = target.variables[v];
  auto slots = common_slots(var, pieces);
  auto cols = var.cols;
  for (auto id : target.variable_shards[v])
    out[id].slots.assign(slots, {});
  for (auto* c : pieces) {
    for (size_t r = 0; r < c->keys.size(); ++r) {
      auto key = c->keys[r];
      if (var.rows != 0 && key >= var.rows)
        throw input_error(fmt::format("re-sharding: {} holds key {}, at or "
                                      "above the vocabulary of {}",
                                      shard_name(*c), key, var.rows));
      auto& o = out[target.shard_id_of_key(v, key)];
      auto first = static_cast<ptrdiff_t>(r * cols);
      auto last = first + static_cast<ptrdiff_t>(cols);
      o.keys.push_back(key);
      o.steps.push_back(c->steps[r]);
      o.values.insert(o.values.end(), c->values.begin() + first,
                      c->values.begin() + last);
      for (size_t i = 0; i < slots; ++i)
        o.slots[i].insert(o.slots[i].end(), c->slots[i].begin() + first,
                          c->slots[i].begin() + last);
    }
  }
  // A key held by two of the checkpoint's shards lands in one target shard
  // twice: look for it there.
  for (auto id : target.variable_shards[v]) {
    auto keys = out[id].keys;
    std::sort(keys.begin(), keys.end());
    auto twice = std::adjacent_find(keys.begin(), keys.end());
    if (twice != keys.end())
      throw input_error(fmt::format("re-sharding: key {} of {} is held by two "
                                    "of the checkpoint's shards",
                                    *twice, var.name));
  }
}

} // namespace

bool checkpoint_fits_placement(const checkpoint_state& st,
                               const placement& target) {
  if (st.shards.size() != target.shards.size()
      || st.ps_clocks.size() != target.ps_sizes.size())
    return false;
  std::map<std::pair<std::string, uint32_t>, const checkpoint_shard*> by_name;
  for (auto& c : st.shards)
    if (!by_name.emplace(std::pair{c.variable, c.index}, &c).second)
      return false;
  for (auto& s : target.shards) {
    auto& var = target.variables[s.variable];
    auto i = by_name.find({var.name, s.index});
    if (i == by_name.end())
      return false;
    auto& c = *i->second;
    bool table = s.kind == variable_kind::table;
    if (c.table != table || c.ps != s.ps || c.cols != var.cols)
      return false;
    if (!table && (c.row_begin != s.row_begin || c.row_end != s.row_end))
      return false;
  }
  return true;
}

resharded_checkpoint reshard_checkpoint(const checkpoint_state& st,
                                        const placement& target) {
  if (st.delta)
    throw input_error("re-sharding needs a whole checkpoint, not a delta "
                      "(read it with read_checkpoint, which replays its "
                      "chain)");
  if (st.ps_clocks.empty()
      || st.ps_clocks.size() != st.optimizer_steps.size())
    throw input_error(fmt::format("re-sharding: {} ps clocks and {} optimizer "
                                  "step counts",
                                  st.ps_clocks.size(),
                                  st.optimizer_steps.size()));
  shards_by_variable pieces;
  for (auto& c : st.shards)
    pieces[c.variable].push_back(&c);
  for (auto& [name, list] : pieces) {
    auto known = std::any_of(target.variables.begin(), target.variables.end(),
                             [&](const variable_def& v) {
                               return v.name == name;
                             });
    if (!known)
      throw input_error(fmt::format("re-sharding: the checkpoint has a "
                                    "variable {}, which the job does not",
                                    name));
  }
  resharded_checkpoint out;
  auto& res = out.state;
  res.global_step = st.global_step;
  res.epoch = st.epoch;
  res.step_in_epoch = st.step_in_epoch;
  res.workers = st.workers;
  res.job = st.job;
  res.id = st.id;
  auto num_ps = target.ps_sizes.size();
  res.ps_clocks.assign(num_ps, *std::max_element(st.ps_clocks.begin(),
                                                 st.ps_clocks.end()));
  res.optimizer_steps.assign(num_ps,
                             *std::max_element(st.optimizer_steps.begin(),
                                               st.optimizer_steps.end()));
  res.shards.resize(target.shards.size());
  for (size_t id = 0; id < target.shards.size(); ++id) {
    auto& s = target.shards[id];
    auto& var = target.variables[s.variable];
    auto& o = res.shards[id];
    o.variable = var.name;
    o.index = s.index;
    o.table = s.kind == variable_kind::table;
    o.row_begin = o.table ? 0 : s.row_begin;
    o.row_end = o.table ? 0 : s.row_end;
    o.cols = var.cols;
    o.ps = s.ps;
    ++(o.table ? out.table_shards : out.dense_shards);
  }
  for (uint32_t v = 0; v < target.variables.size(); ++v) {
    auto& var = target.variables[v];
    auto i = pieces.find(var.name);
    if (i == pieces.end())
      throw input_error(fmt::format("re-sharding: the checkpoint has no "
                                    "shard of {}",
                                    var.name));
    if (var.kind == variable_kind::dense)
      recut_dense(target, v, i->second, res.shards);
    else
      recut_table(target, v, i->second, res.shards);
  }
  return out;
}

} // namespace actorps
