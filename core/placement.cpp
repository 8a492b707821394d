#include "core/placement.hpp"

#include <cstring>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

std::vector<shard_info> placement::shards_of(uint32_t ps) const {
  std::vector<shard_info> result;
  for (auto& s : shards)
    if (s.ps == ps)
      result.push_back(s);
  return result;
}

placement place_variables(const std::vector<variable_def>& vars,
                          const partitioner_config& partitioner,
                          uint32_t num_ps) {
  if (num_ps == 0)
    throw input_error("cluster.ps: need at least one parameter server");
  placement result;
  result.variables = vars;
  result.ps_sizes.assign(num_ps, 0);
  std::set<std::string> names;
  uint32_t next_ps = 0;
  for (uint32_t v = 0; v < vars.size(); ++v) {
    auto& var = vars[v];
    if (var.rows == 0 || var.cols == 0)
      throw input_error(fmt::format("variable {} has shape {}x{}; both must "
                                    "be positive",
                                    var.name, var.rows, var.cols));
    if (!names.insert(var.name).second)
      throw input_error(fmt::format("variable name {} is used twice", var.name));
    result.variable_offsets.push_back(result.model_size);
    auto n = num_shards(partitioner, var.rows, var.cols);
    auto sizes = shard_sizes(var.rows, n);
    uint64_t row = 0;
    for (uint32_t i = 0; i < n; ++i) {
      shard_info s;
      s.variable = v;
      s.index = i;
      s.row_begin = row;
      s.row_end = row + sizes[i];
      s.ps = next_ps;
      s.size = sizes[i] * var.cols;
      s.ps_offset = result.ps_sizes[s.ps];
      s.model_offset = result.model_size + row * var.cols;
      result.ps_sizes[s.ps] += s.size;
      result.shards.push_back(s);
      row = s.row_end;
      next_ps = (next_ps + 1) % num_ps;
    }
    result.model_size += var.size();
  }
  return result;
}

void scatter_shards(const placement& pl, uint32_t ps, const float* ps_buffer,
                    float* model) {
  for (auto& s : pl.shards)
    if (s.ps == ps)
      std::memcpy(model + s.model_offset, ps_buffer + s.ps_offset,
                  s.size * sizeof(float));
}

float_vector gather_shards(const placement& pl, uint32_t ps,
                           const float* model) {
  float_vector result;
  result.reserve(pl.ps_sizes[ps]);
  // Shards were placed in creation order, so ps_offset grows along pl.shards.
  for (auto& s : pl.shards)
    if (s.ps == ps)
      result.insert(result.end(), model + s.model_offset,
                    model + s.model_offset + s.size);
  return result;
}

} // namespace actorps
