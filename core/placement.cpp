#include "core/placement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

const char* to_string(variable_kind k) {
  switch (k) {
    case variable_kind::dense:
      return "dense";
    case variable_kind::table:
      return "table";
  }
  return "?";
}

table_partition parse_table_partition(const std::string& name,
                                      const std::string& field) {
  if (name == "mod")
    return table_partition::mod;
  if (name == "div")
    return table_partition::div;
  throw input_error(
    fmt::format("{}: expected mod or div, got \"{}\"", field, name));
}

const char* to_string(table_partition p) {
  switch (p) {
    case table_partition::mod:
      return "mod";
    case table_partition::div:
      return "div";
    case table_partition::hash:
      return "hash";
  }
  return "?";
}

uint64_t mix64(uint64_t x) noexcept {
  // splitmix64's output function (Steele, Lea & Flood, "Fast splittable
  // pseudorandom number generators", OOPSLA 2014; constants by Vigna).
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::vector<shard_info> placement::shards_of(uint32_t ps) const {
  std::vector<shard_info> result;
  for (auto& s : shards)
    if (s.ps == ps)
      result.push_back(s);
  return result;
}

table_partition placement::partition_of(uint32_t v) const {
  return variables[v].rows == 0 ? table_partition::hash
                                : fixed_vocabulary_partition;
}

uint32_t placement::shard_of_key(uint32_t v, uint64_t key) const {
  auto& r = key_partitions[v];
  switch (r.partition) {
    case table_partition::mod:
      return static_cast<uint32_t>(key % r.shards);
    case table_partition::div:
      return static_cast<uint32_t>(
        key < r.split ? key / (r.ids_per_shard + 1)
                      : r.extras + (key - r.split) / r.ids_per_shard);
    case table_partition::hash:
      break;
  }
  return static_cast<uint32_t>(mix64(key) % r.shards);
}

namespace {

/// The number of shards of table `var`: see place_variables.
uint64_t table_shards(const variable_def& var,
                      const partitioner_config& partitioner, uint32_t num_ps) {
  if (var.rows > 0)
    return num_shards(partitioner, var.rows, var.cols);
  if (partitioner.type == partitioner_config::kind::fixed_shards)
    return std::max<uint64_t>(partitioner.num_shards, 1);
  return num_ps;
}

} // namespace

placement place_variables(const std::vector<variable_def>& vars,
                          const partitioner_config& partitioner,
                          uint32_t num_ps,
                          table_partition fixed_vocabulary_partition) {
  if (num_ps == 0)
    throw input_error("cluster.ps: need at least one parameter server");
  placement result;
  result.variables = vars;
  result.fixed_vocabulary_partition = fixed_vocabulary_partition;
  result.ps_sizes.assign(num_ps, 0);
  result.variable_shards.resize(vars.size());
  result.key_partitions.resize(vars.size());
  std::set<std::string> names;
  uint32_t next_ps = 0;
  auto add_shard = [&](shard_info s) {
    s.ps = next_ps;
    next_ps = (next_ps + 1) % num_ps;
    result.variable_shards[s.variable].push_back(
      static_cast<uint32_t>(result.shards.size()));
    result.shards.push_back(s);
    return s;
  };
  for (uint32_t v = 0; v < vars.size(); ++v) {
    auto& var = vars[v];
    if (var.kind == variable_kind::table) {
      if (var.cols == 0)
        throw input_error(fmt::format("table {} has dimension 0; it must be "
                                      "positive",
                                      var.name));
      if (!std::isfinite(var.init_scale) || var.init_scale < 0.0f)
        throw input_error(fmt::format("table {} has init_scale {}; it must be "
                                      "finite and >= 0",
                                      var.name, var.init_scale));
    } else if (var.rows == 0 || var.cols == 0) {
      throw input_error(fmt::format("variable {} has shape {}x{}; both must "
                                    "be positive",
                                    var.name, var.rows, var.cols));
    }
    if (!names.insert(var.name).second)
      throw input_error(fmt::format("variable name {} is used twice", var.name));
    if (var.kind == variable_kind::table) {
      result.variable_offsets.push_back(0);
      auto n = table_shards(var, partitioner, num_ps);
      if (n > UINT32_MAX)
        throw input_error(fmt::format("table {}: {} shards are too many",
                                      var.name, n));
      auto& kp = result.key_partitions[v];
      kp.partition = result.partition_of(v);
      kp.shards = static_cast<uint32_t>(n);
      if (var.rows > 0) {
        // num_shards() never exceeds the rows, so ids_per_shard >= 1.
        kp.ids_per_shard = var.rows / n;
        kp.extras = var.rows % n;
        kp.split = kp.extras * (kp.ids_per_shard + 1);
      }
      for (uint32_t i = 0; i < n; ++i) {
        shard_info s;
        s.variable = v;
        s.index = i;
        s.kind = variable_kind::table;
        add_shard(s);
      }
      continue;
    }
    result.variable_offsets.push_back(result.model_size);
    auto n = num_shards(partitioner, var.rows, var.cols);
    auto sizes = shard_sizes(var.rows, n);
    uint64_t row = 0;
    for (uint32_t i = 0; i < n; ++i) {
      shard_info s;
      s.variable = v;
      s.index = i;
      s.kind = variable_kind::dense;
      s.row_begin = row;
      s.row_end = row + sizes[i];
      s.size = sizes[i] * var.cols;
      s.model_offset = result.model_size + row * var.cols;
      s.ps_offset = result.ps_sizes[next_ps];
      auto placed = add_shard(s);
      result.ps_sizes[placed.ps] += s.size;
      row = s.row_end;
    }
    result.model_size += var.size();
  }
  for (uint32_t v = 0; v < vars.size(); ++v)
    if (vars[v].kind == variable_kind::table)
      result.tables.push_back(v);
  return result;
}

void scatter_shards(const placement& pl, uint32_t ps, const float* ps_buffer,
                    float* model) {
  for (auto& s : pl.shards)
    if (s.ps == ps && s.kind == variable_kind::dense)
      std::memcpy(model + s.model_offset, ps_buffer + s.ps_offset,
                  s.size * sizeof(float));
}

void scatter_shards(const placement& pl, uint32_t ps, uint64_t from,
                    uint64_t to, const float* values, float* model) {
  for (auto& s : pl.shards) {
    if (s.ps != ps || s.kind != variable_kind::dense)
      continue;
    auto lo = std::max(from, s.ps_offset);
    auto hi = std::min(to, s.ps_offset + s.size);
    if (lo < hi)
      std::memcpy(model + s.model_offset + (lo - s.ps_offset),
                  values + (lo - from), (hi - lo) * sizeof(float));
  }
}

uint64_t region_prefix(const placement& pl, uint32_t ps, uint64_t model_end) {
  uint64_t n = 0;
  for (auto& s : pl.shards)
    if (s.ps == ps && s.kind == variable_kind::dense
        && s.model_offset < model_end)
      n = s.ps_offset + std::min(s.size, model_end - s.model_offset);
  return n;
}

float_vector gather_shards(const placement& pl, uint32_t ps,
                           const float* model) {
  return gather_shards(pl, ps, model, 0, pl.ps_sizes[ps]);
}

float_vector gather_shards(const placement& pl, uint32_t ps,
                           const float* model, uint64_t from, uint64_t to) {
  float_vector result;
  result.reserve(to - from);
  // Shards were placed in creation order, so ps_offset grows along pl.shards.
  for (auto& s : pl.shards)
    if (s.ps == ps && s.kind == variable_kind::dense && s.ps_offset >= from
        && s.ps_offset < to)
      result.insert(result.end(), model + s.model_offset,
                    model + s.model_offset + s.size);
  return result;
}

} // namespace actorps
