#pragma once

// What the parameter-server tests share (ps_actor_test.cpp, ps_table_test.cpp):
// a deterministic actor system (test/actor_fixture.hpp) and builders of the
// messages. Send, run, assert: a reply is already queued when run() returns,
// so no receive here ever waits.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/after.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "test/actor_fixture.hpp"

namespace actorps::test {

inline std::vector<float> as_vector(const float_vector& v) {
  return {v.begin(), v.end()};
}

inline float_buffer floats(std::vector<float> xs) {
  return float_buffer{float_vector(xs.begin(), xs.end())};
}

/// A dense shard of `rows` x `cols` floats with initial `values`.
inline create_shard dense_shard(std::string name, uint64_t rows, uint64_t cols,
                                std::vector<float> values) {
  create_shard s;
  s.variable = std::move(name);
  s.row_begin = 0;
  s.row_end = rows;
  s.cols = cols;
  s.values = floats(std::move(values));
  return s;
}

/// Shard `shard` of table `name`: rows of `dim` floats, keys below
/// `vocabulary` (0: any), new rows U(-init_scale, init_scale) from `seed`.
inline create_shard table_shard(std::string name, uint32_t shard, uint64_t dim,
                                uint64_t vocabulary = 0,
                                float init_scale = 0.5f, uint64_t seed = 42) {
  create_shard s;
  s.variable = std::move(name);
  s.shard = shard;
  s.table = true;
  s.cols = dim;
  s.vocabulary = vocabulary;
  s.init_scale = init_scale;
  s.seed = seed;
  return s;
}

/// Keys of shard `shard` and (in a push) their row gradients.
inline table_rows rows_of(uint32_t shard, std::vector<uint64_t> keys,
                          std::vector<float> values = {}) {
  return table_rows{shard, key_buffer{std::move(keys)},
                    floats(std::move(values))};
}

/// A pull of the dense region only (group 0, view 0: a server's own
/// shards as the primary it is created as).
inline pull_request dense_pull(uint32_t worker = no_worker) {
  return pull_request{0, 0, worker, true, {}, true};
}

/// A pull of table rows only (`create`: store missing rows).
inline pull_request key_pull(std::vector<table_rows> tables,
                             uint32_t worker = no_worker, bool create = true) {
  return pull_request{0, 0, worker, false, std::move(tables), create};
}

inline push_request make_push(uint64_t read_clock, uint64_t closure,
                              std::vector<float> grad, uint32_t worker = 0,
                              std::vector<table_rows> tables = {}) {
  push_request req;
  req.read_clock = read_clock;
  req.id = update_id{worker, 0, closure};
  req.gradient = floats(std::move(grad));
  req.tables = std::move(tables);
  return req;
}

inline ps_options options(optimizer_config dense, optimizer_config table,
                          consistency mode = consistency::async,
                          uint32_t workers = 1, uint64_t staleness = 0) {
  ps_options opts;
  opts.optimizer = std::move(dense);
  opts.mode = mode;
  opts.workers = workers;
  opts.staleness = staleness;
  opts.table_optimizer = std::move(table);
  return opts;
}

/// A deterministic actor system (test/actor_fixture.hpp) with parameter
/// servers; the servers spawned through it are stopped when the test ends.
struct deterministic : actor_fixture {
  deterministic() : actor_fixture(true) {
    // nop
  }

  ps_actor spawn(ps_options opts) {
    auto ps = keep(spawn_ps(sys, std::move(opts)));
    run();
    return ps;
  }

  /// Whether no ack, pull reply or error is queued for the test (e.g. a
  /// push not acknowledged yet, a pull held back).
  bool nothing_received() {
    bool empty = true;
    self->receive([&](uint64_t) { empty = false; },
                  [&](pull_reply&) { empty = false; },
                  [&](caf::error&) { empty = false; },
                  caf::after(std::chrono::seconds(0)) >> [] {});
    return empty;
  }

  void create(const ps_actor& ps, create_shard shard) {
    ask<uint64_t>(ps, create_atom_v, std::move(shard));
  }

  pull_reply pull(const ps_actor& ps, pull_request req) {
    return ask<pull_reply>(ps, pull_atom_v, std::move(req));
  }

  uint64_t push(const ps_actor& ps, push_request req) {
    return ask<uint64_t>(ps, push_atom_v, std::move(req));
  }

  ps_stats stats(const ps_actor& ps) {
    return ask<ps_stats>(ps, stats_atom_v, uint32_t{0});
  }

  ps_snapshot save(const ps_actor& ps) {
    return ask<ps_snapshot>(ps, save_atom_v, uint32_t{0});
  }
};

} // namespace actorps::test
