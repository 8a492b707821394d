#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/float_vector.hpp"
#include "core/partitioner.hpp"

namespace actorps {

/// The two kinds of variables (docs/design.md).
enum class variable_kind : uint8_t {
  /// A rows x cols float tensor, row-major, split along its first axis.
  dense,
  /// An embedding table: key -> row of `cols` floats. Rows exist only for
  /// keys that were pulled or pushed; a row is created with values drawn
  /// from (seed, variable name, key) alone.
  table,
};

/// "dense" or "table".
const char* to_string(variable_kind k);

/// A model variable.
///
/// - dense: `rows` x `cols` floats, row-major. Vectors (biases) are rows x 1
///   so that they shard along their only axis.
/// - table: rows of `cols` floats (the row dimension) indexed by 64-bit keys;
///   `rows` is the vocabulary size (keys must be < rows) or 0 for unbounded
///   keys (any 64-bit value, e.g. hashed feature values). A new row starts
///   U(-init_scale, init_scale) (0: zeros).
struct variable_def {
  std::string name;
  variable_kind kind = variable_kind::dense;
  uint64_t rows = 0;
  uint64_t cols = 1;
  float init_scale = 0.0f;

  /// Floats of a dense variable (0 for a table).
  uint64_t size() const noexcept {
    return kind == variable_kind::dense ? rows * cols : 0;
  }

  static variable_def dense(std::string name, uint64_t rows, uint64_t cols) {
    return {std::move(name), variable_kind::dense, rows, cols, 0.0f};
  }

  /// An embedding table of `dim`-float rows; vocabulary 0 = unbounded keys.
  static variable_def table(std::string name, uint64_t vocabulary,
                            uint64_t dim, float init_scale) {
    return {std::move(name), variable_kind::table, vocabulary, dim,
            init_scale};
  }
};

/// How the keys of a table with a fixed vocabulary are split over its shards
/// (TensorFlow's `partition_strategy` of `embedding_lookup`). Tables with
/// unbounded keys always use `hash`.
enum class table_partition : uint8_t {
  /// key % shards (TF's "mod", its default).
  mod,
  /// contiguous key ranges: the first `vocabulary % shards` shards get one
  /// key more (TF's "div").
  div,
  /// mix64(key) % shards: a 64-bit finaliser spreads any key set evenly.
  hash,
};

/// Parses "mod" | "div"; throws input_error naming `field`.
table_partition parse_table_partition(const std::string& name,
                                      const std::string& field);

const char* to_string(table_partition p);

/// One shard of a variable, placed on one parameter server.
///
/// Dense: rows [row_begin, row_end) of the variable, `size` floats, one
/// contiguous range both in the flat model buffer (at model_offset) and in
/// its server's dense region (at ps_offset), because variables are row-major
/// and split along the first axis.
/// Table: the keys k with placement::shard_of_key(variable, k) == index.
struct shard_info {
  uint32_t variable = 0;  ///< index into placement::variables
  uint32_t index = 0;     ///< shard number within the variable
  variable_kind kind = variable_kind::dense;
  uint32_t ps = 0;        ///< parameter server that owns it
  // -- dense only ---------------------------------------------------------------
  uint64_t row_begin = 0; ///< first row (inclusive)
  uint64_t row_end = 0;   ///< last row (exclusive)
  uint64_t ps_offset = 0; ///< float offset in that server's dense region
  uint64_t model_offset = 0; ///< float offset in the flat model buffer
  uint64_t size = 0;         ///< floats: (row_end - row_begin) * cols
};

/// The variable -> shard -> parameter server map the coordinator computes and
/// hands to every worker; every node computes the same one from the same
/// config.
///
/// Layouts: the flat *model buffer* holds the dense variables one after
/// another (dense variable i at offset variable_offsets[i]); the *dense
/// region* of server p holds the dense shards placed on p, in creation order.
/// Tables have no place in either: their rows travel by key.
/// Shards are placed round-robin over the servers in creation order
/// (variable by variable, shard by shard), as TensorFlow's
/// ParameterServerStrategy does. A shard is named on the wire by its position
/// in `shards` (its *shard id*).
struct placement {
  std::vector<variable_def> variables;
  /// Dense variables: offset in the flat model buffer; tables: 0.
  std::vector<uint64_t> variable_offsets;
  std::vector<shard_info> shards;
  /// Per variable: the shard ids of its shards, by shard index.
  std::vector<std::vector<uint32_t>> variable_shards;
  /// Indices (into variables) of the tables, in variable order.
  std::vector<uint32_t> tables;
  /// How fixed-vocabulary tables split their keys (mod or div).
  table_partition fixed_vocabulary_partition = table_partition::mod;
  /// Floats in the dense region of each parameter server.
  std::vector<uint64_t> ps_sizes;
  /// Floats in the flat model buffer (the dense variables).
  uint64_t model_size = 0;

  // -- derived by place_variables; do not edit ------------------------------

  /// What shard_of_key needs for one table, precomputed so that routing a
  /// key costs one division (it runs for every key of every step).
  struct key_partition {
    table_partition partition = table_partition::hash;
    uint32_t shards = 1;
    /// div only: vocabulary / shards, vocabulary % shards, and the first key
    /// of the shards without an extra key (extras * (ids_per_shard + 1)).
    uint64_t ids_per_shard = 0;
    uint64_t extras = 0;
    uint64_t split = 0;
  };

  /// Per variable (default for dense variables).
  std::vector<key_partition> key_partitions;

  /// Shards placed on parameter server `ps`, in creation order.
  std::vector<shard_info> shards_of(uint32_t ps) const;

  /// The strategy table `v` uses (hash for unbounded keys).
  table_partition partition_of(uint32_t v) const;

  /// The shard index (within table `v`, of n shards) that holds `key`:
  /// - mod: key % n;
  /// - div: with V the vocabulary, q = V / n and r = V % n, the first r shards
  ///   hold q + 1 consecutive keys and the others q:
  ///   key < r (q + 1) ? key / (q + 1) : r + (key - r (q + 1)) / q
  ///   (TensorFlow's embedding_ops.py, `_embedding_lookup_and_transform`,
  ///   which writes it max(key / (q + 1), (key - r) / q));
  /// - hash: mix64(key) % n.
  /// Cost: one 64-bit division.
  /// @pre variables[v] is a table and, with a fixed vocabulary, key < rows.
  uint32_t shard_of_key(uint32_t v, uint64_t key) const;

  /// The shard id (into `shards`) that holds `key` of table `v`.
  uint32_t shard_id_of_key(uint32_t v, uint64_t key) const {
    return variable_shards[v][shard_of_key(v, key)];
  }
};

/// A 64-bit finaliser (splitmix64's): a bijection that spreads sequential
/// and clustered keys over all bits.
uint64_t mix64(uint64_t x) noexcept;

/// Computes the placement of `vars` over `num_ps` parameter servers.
/// Dense variables are split by `partitioner`; a table with a fixed
/// vocabulary is split by it too (its rows being the vocabulary), one with
/// unbounded keys into `num_shards` shards for fixed_shards and one per
/// server otherwise.
/// @throws input_error if num_ps is 0, a dense variable has no elements, a
///         table has a zero dimension or an init_scale that is negative or
///         not finite, or two variables share a name.
placement place_variables(const std::vector<variable_def>& vars,
                          const partitioner_config& partitioner,
                          uint32_t num_ps,
                          table_partition fixed_vocabulary_partition
                          = table_partition::mod);

/// Copies each dense shard of parameter server `ps` from `ps_buffer` (its
/// dense region) into its place in `model` (the flat model buffer).
void scatter_shards(const placement& pl, uint32_t ps, const float* ps_buffer,
                    float* model);

/// Copies the run [from, to) of parameter server `ps`'s dense region
/// (region offsets; `values` holds its to - from floats) into its places in
/// `model`. Any run: one may begin or end inside a shard.
void scatter_shards(const placement& pl, uint32_t ps, uint64_t from,
                    uint64_t to, const float* values, float* model);

/// The floats of parameter server `ps`'s dense region whose place in the
/// flat model buffer is below `model_end`. They are a prefix of the region
/// (both orders follow creation order), so a pull of the region's run
/// [0, region_prefix(...)) brings every value of [0, model_end) it holds.
uint64_t region_prefix(const placement& pl, uint32_t ps, uint64_t model_end);

/// Returns the dense region of parameter server `ps` (ps_sizes[ps] floats):
/// its dense shards copied out of the flat model buffer `model`, in region
/// order. Appends shard by shard, so no float is written twice (it runs for
/// every push).
float_vector gather_shards(const placement& pl, uint32_t ps,
                           const float* model);

/// The run [from, to) of parameter server `ps`'s dense region (region
/// offsets): the shards that start in it, copied out of `model`.
/// @pre from and to are shard boundaries of that region (or its end).
float_vector gather_shards(const placement& pl, uint32_t ps,
                           const float* model, uint64_t from, uint64_t to);

} // namespace actorps
