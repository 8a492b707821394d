#pragma once

// Comparing checkpoint states bit for bit, for the checkpoint fuzz targets.

#include <cstring>
#include <vector>

#include "core/checkpoint.hpp"

namespace actorps::fuzz {

/// Whether two float arrays hold the same bits (NaNs included).
inline bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size()
         && (x.empty()
             || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
}

/// Whether two shards are equal field by field, floats by their bits.
inline bool same_shard(const checkpoint_shard& x, const checkpoint_shard& y) {
  if (x.variable != y.variable || x.index != y.index || x.table != y.table
      || x.row_begin != y.row_begin || x.row_end != y.row_end
      || x.cols != y.cols || x.ps != y.ps || !same_bits(x.values, y.values)
      || x.slots.size() != y.slots.size() || x.keys != y.keys
      || x.steps != y.steps)
    return false;
  for (size_t i = 0; i < x.slots.size(); ++i)
    if (!same_bits(x.slots[i], y.slots[i]))
      return false;
  return true;
}

/// Whether two checkpoint states are equal field by field.
inline bool same_state(const checkpoint_state& x, const checkpoint_state& y) {
  if (x.global_step != y.global_step || x.epoch != y.epoch
      || x.step_in_epoch != y.step_in_epoch
      || x.workers.size() != y.workers.size() || x.ps_clocks != y.ps_clocks
      || x.optimizer_steps != y.optimizer_steps || x.job != y.job
      || x.shards.size() != y.shards.size())
    return false;
  for (size_t i = 0; i < x.workers.size(); ++i)
    if (x.workers[i].epoch != y.workers[i].epoch
        || x.workers[i].offset != y.workers[i].offset)
      return false;
  for (size_t i = 0; i < x.shards.size(); ++i)
    if (!same_shard(x.shards[i], y.shards[i]))
      return false;
  return true;
}

} // namespace actorps::fuzz
