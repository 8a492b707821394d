#pragma once

// Dense pull and push of N floats (a ps holding one dense shard), and their
// in-process limits memcpy and axpy.

#include <cstdint>
#include <string>

#include "caf/fwd.hpp"

#include "actors/ps_actor.hpp"
#include "bench/bench_common.hpp"

namespace actorps::bench {

/// The options of a dense benchmark server: SGD on the dense region, async,
/// 2 workers.
ps_options dense_ps_options(uint32_t index);

/// Creates one dense shard of n floats (all 0.5) on `ps`; false on error.
bool create_dense(caf::actor_system& sys, const ps_actor& ps, uint64_t n);

/// memcpy of n floats: the limit of an in-process pull.
void bm_memcpy(benchmark::State& st, uint64_t n);

/// y -= 0.01 x over n floats: the limit of an in-process push (the SGD
/// apply).
void bm_axpy(benchmark::State& st, uint64_t n);

/// Pull (the dense region) or push (a gradient of n floats, empty tables)
/// of the variable of n floats on `ps`, by worker 0; with `workers` 2, a
/// second thread runs the same operation as worker 1 meanwhile. A push's
/// gradient is filled before its timer starts (a worker's gather is part of
/// its step, not of the transfer).
void bm_transfer(benchmark::State& st, caf::actor_system* sys, ps_actor ps,
                 std::string where, bool push, uint64_t n, int workers);

} // namespace actorps::bench
