#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace actorps {

/// How a variable is split along its first axis, with TensorFlow's arithmetic
/// (`tf.distribute.experimental.partitioners`).
///
/// - fixed_shards: `min(num_shards, rows)` shards.
/// - min_size: `max(1, min(rows, max_shards, ceil(bytes / min_shard_bytes)))`
///   shards, max_shards 0 counting as 1 (TF's `MinSizePartitioner`, via
///   `min_max_variable_partitioner`).
/// - max_size: `ceil(rows / max(1, floor(max_shard_bytes / row_bytes)))`,
///   capped at `max_shards` when that is positive (TF's `MaxSizePartitioner`,
///   via `variable_axis_size_partitioner`).
struct partitioner_config {
  enum class kind { fixed_shards, min_size, max_size };
  kind type = kind::fixed_shards;
  /// fixed_shards: the number of shards asked for (>= 1).
  uint64_t num_shards = 1;
  /// min_size: smallest shard in bytes (TF default 256 KiB).
  uint64_t min_shard_bytes = 256 * 1024;
  /// max_size: largest shard in bytes.
  uint64_t max_shard_bytes = 0;
  /// At most this many shards; 0 (the default) is TensorFlow's default of
  /// each: 1 for min_size (`MinSizePartitioner(max_shards=1)`), no cap for
  /// max_size (`MaxSizePartitioner(max_shards=None)`).
  uint64_t max_shards = 0;
};

/// Returns the number of shards for a variable of `rows` x `cols` elements of
/// `element_bytes` bytes each. Always >= 1 and <= max(rows, 1).
uint64_t num_shards(const partitioner_config& cfg, uint64_t rows, uint64_t cols,
                    uint64_t element_bytes = 4);

/// Splits `rows` into `shards` contiguous ranges the way TensorFlow sizes
/// partitioned variables: the first `rows % shards` shards get one extra row
/// (13 rows over 5 shards -> 3,3,3,2,2). Returns the row count of each shard.
/// @pre shards >= 1 and shards <= max(rows, 1)
std::vector<uint64_t> shard_sizes(uint64_t rows, uint64_t shards);

/// Parses "fixed_shards" | "min_size" | "max_size"; throws input_error.
partitioner_config::kind parse_partitioner_kind(const std::string& name);

} // namespace actorps
