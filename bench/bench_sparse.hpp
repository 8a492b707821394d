#pragma once

// Sparse pull and push: the rows of N random 64-bit keys of one embedding
// table (dim 16, unbounded keys) on a ps that applies SGD to them, and the
// limit measured in the same run: one thread looking the same keys up in an
// absl::flat_hash_map<uint64_t, uint32_t> into a row arena and copying the
// rows out (pull) or adding a gradient row into them (push).
//
// Warm rows (the default): before its timed iterations a benchmark pulls its
// key set once, in another order, so the rows exist and the iterations
// measure lookups, not row creation; the limit inserts its rows in that same
// order, so in both a request's rows lie in the arena in no particular order
// (as rows created in the order of first touch do in training). Cold rows:
// each iteration pulls keys new to a fresh table shard (first touch: every
// row created); its limit inserts them into an empty map and arena.

#include <cstdint>
#include <string>
#include <vector>

#include "caf/fwd.hpp"

#include "actors/ps_actor.hpp"
#include "bench/bench_common.hpp"

namespace actorps::bench {

/// Floats per row of the benchmark table.
inline constexpr uint64_t sparse_dim = 16;

/// The options of a sparse benchmark server: SGD (learning rate 0.01) on
/// table rows, async, one worker.
ps_options sparse_ps_options(uint32_t index);

/// Creates table shard `shard` on `ps`: dim 16, unbounded keys, new rows
/// U(-0.05, 0.05) from seed 42. False on error.
bool create_table(caf::actor_system& sys, const ps_actor& ps, uint32_t shard);

/// The keys of the warm benchmarks of n keys: n distinct random 64-bit keys
/// (the same in every run) in request order, and the same keys in the order
/// the warm-up inserts their rows. Computed once per n, then cached.
struct key_set {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> insert_order;
};

const key_set& warm_keys(uint64_t n);

/// A sparse point without latencies: kind, op, where, keys, rows and the
/// payload bytes of its request (keys; for a push also the gradient rows)
/// and reply (for a pull the rows; a push's answer is its 8-byte clock).
point sparse_point(std::string kind, bool push, std::string where, uint64_t n,
                   std::string rows);

/// Pull or push of the rows of warm_keys(n) on table shard 0 of `ps`, by
/// worker 0 (see above: the rows exist first). A push's gradient rows are
/// filled before its timer starts.
void bm_sparse(benchmark::State& st, caf::actor_system* sys, ps_actor ps,
               std::string where, bool push, uint64_t n);

/// Cold pulls of n keys: iteration i pulls n keys no shard has seen from
/// table shard i of `ps` (created empty beforehand; run with as many
/// iterations as shards).
void bm_sparse_cold(benchmark::State& st, caf::actor_system* sys, ps_actor ps,
                    std::string where, uint64_t n);

/// The limit of bm_sparse, in this thread.
void bm_sparse_limit(benchmark::State& st, bool push, uint64_t n);

/// The limit of bm_sparse_cold, in this thread: the same keys inserted into
/// an empty map and arena with their initial rows, then copied out.
void bm_sparse_cold_limit(benchmark::State& st, uint64_t n);

} // namespace actorps::bench
