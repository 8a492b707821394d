#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/float_vector.hpp"
#include "core/partitioner.hpp"

namespace actorps {

/// A model variable: a dense rows x cols float tensor, row-major. Vectors
/// (biases) are rows x 1 so that they shard along their only axis.
struct variable_def {
  std::string name;
  uint64_t rows = 0;
  uint64_t cols = 1;

  uint64_t size() const noexcept {
    return rows * cols;
  }
};

/// One shard: rows [row_begin, row_end) of a variable, placed on one
/// parameter server. Because variables are row-major and split along the
/// first axis, a shard is one contiguous range both in the variable and in its
/// parameter server's buffer.
struct shard_info {
  uint32_t variable = 0;  ///< index into placement::variables
  uint32_t index = 0;     ///< shard number within the variable
  uint64_t row_begin = 0; ///< first row (inclusive)
  uint64_t row_end = 0;   ///< last row (exclusive)
  uint32_t ps = 0;        ///< parameter server that owns it
  uint64_t ps_offset = 0; ///< float offset in that server's buffer
  uint64_t model_offset = 0; ///< float offset in the flat model buffer
  uint64_t size = 0;         ///< floats: (row_end - row_begin) * cols
};

/// The variable -> shard -> parameter server map the coordinator computes and
/// hands to every worker.
///
/// Layouts: the flat *model buffer* holds the variables one after another
/// (variable i at offset variable_offsets[i]); *ps buffer* p holds the shards
/// placed on parameter server p, in creation order. Shards are placed
/// round-robin over the servers in creation order (variable by variable, shard
/// by shard), as TensorFlow's ParameterServerStrategy does.
struct placement {
  std::vector<variable_def> variables;
  std::vector<uint64_t> variable_offsets;
  std::vector<shard_info> shards;
  /// Floats held by each parameter server.
  std::vector<uint64_t> ps_sizes;
  /// Floats in the flat model buffer.
  uint64_t model_size = 0;

  /// Shards placed on parameter server `ps`, in buffer order.
  std::vector<shard_info> shards_of(uint32_t ps) const;
};

/// Computes the placement of `vars` over `num_ps` parameter servers.
/// @throws input_error if num_ps is 0, a variable has no elements, or two
///         variables share a name.
placement place_variables(const std::vector<variable_def>& vars,
                          const partitioner_config& partitioner,
                          uint32_t num_ps);

/// Copies each shard of parameter server `ps` from `ps_buffer` into its place
/// in `model` (the flat model buffer).
void scatter_shards(const placement& pl, uint32_t ps, const float* ps_buffer,
                    float* model);

/// Returns the buffer of parameter server `ps` (ps_sizes[ps] floats): its
/// shards copied out of the flat model buffer `model`, in buffer order.
/// Appends shard by shard, so no float is written twice (it runs for every
/// push).
float_vector gather_shards(const placement& pl, uint32_t ps,
                           const float* model);

} // namespace actorps
