#pragma once

#include <cstdint>
#include <string>

namespace actorps {

/// What defines the rows of one table shard.
struct table_shard_def {
  /// Variable name (part of every row's initial value, and of messages).
  std::string variable;
  /// Floats per row (>= 1).
  uint64_t dim = 1;
  /// Fixed vocabulary: keys must be < vocabulary; 0 = unbounded 64-bit keys.
  uint64_t vocabulary = 0;
  /// New rows start U(-init_scale, init_scale) per element; 0 = zeros.
  float init_scale = 0.0f;
  /// The job's init seed (model.seed).
  uint64_t seed = 0;
};

/// The initial value of element `j` of the row of `key` in table `variable`:
/// U(-init_scale, init_scale) from a counter-based generator keyed by (seed,
/// variable name, key, j) alone, so that any parameter server, any
/// incarnation, and the worker that checks it all compute the same bits.
///
/// Algorithm: state = f(f(f(seed ^ G) ^ fnv1a64(variable)) ^ key), then
/// element j = the top 24 bits of f(state + (j + 1) G) as a float in [-1, 1)
/// (exact), times init_scale (one rounding, so the value stays in
/// [-init_scale, init_scale)); f is splitmix64's finaliser and G its golden
/// gamma (Steele, Lea & Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014), i.e. element j is the j-th splitmix64 output
/// seeded with the row's state. init_scale 0 gives +0.0f exactly.
/// These bits are a format: changing them changes every new row.
float initial_row_value(const table_shard_def& def, uint64_t key, uint64_t j);

/// Writes the initial row of `key` (def.dim floats) into `out`.
void initial_row(const table_shard_def& def, uint64_t key, float* out);

namespace detail {

/// 64-bit FNV-1a of a variable name (Fowler, Noll & Vo): the name's part of
/// every row's initial value.
uint64_t table_name_hash(const std::string& variable) noexcept;

/// initial_row() with the name already hashed (a shard hashes it once).
void write_initial_row(uint64_t seed, uint64_t name_hash, float scale,
                       uint64_t dim, uint64_t key, float* out) noexcept;

} // namespace detail

} // namespace actorps
