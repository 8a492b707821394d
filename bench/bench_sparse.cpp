#include "bench/bench_sparse.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <benchmark/benchmark.h>

#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"

#include "core/table_store.hpp"

namespace actorps::bench {

namespace {

/// The benchmark table as the ps defines it (create_table sends the same).
/// A short name: initial_row(), which the cold limit calls per row, hashes
/// the name each time, where the ps hashes it once per shard.
table_shard_def table_def() {
  return table_shard_def{"emb", sparse_dim, 0, 0.05f, 42};
}

/// n distinct random 64-bit keys from `seed`.
std::vector<uint64_t> random_keys(uint64_t n, uint64_t seed) {
  std::mt19937_64 gen{seed};
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(n);
  std::vector<uint64_t> keys;
  keys.reserve(n);
  while (keys.size() < n) {
    auto k = gen();
    if (seen.insert(k).second)
      keys.push_back(k);
  }
  return keys;
}

/// A pull of `keys` from table shard `shard`, creating missing rows.
pull_request table_pull(uint32_t shard, const std::vector<uint64_t>& keys) {
  pull_request req;
  req.dense = false;
  req.create = true;
  req.tables.push_back(table_rows{shard, key_buffer{keys}, {}});
  return req;
}

/// One pull; false on error or a reply that does not answer the request.
bool pull_once(caf::scoped_actor& self, const ps_actor& ps,
               pull_request req) {
  auto expected = req.tables.front().keys.keys.size() * sparse_dim;
  bool ok = false;
  self->request(ps, caf::infinite, pull_atom_v, std::move(req))
    .receive(
      [&](pull_reply& r) {
        ok = r.tables.size() == 1 && r.tables[0].values.values.size() == expected;
      },
      [](caf::error&) {});
  return ok;
}

bool push_once(caf::scoped_actor& self, const ps_actor& ps,
               push_request req) {
  bool ok = true;
  self->request(ps, caf::infinite, push_atom_v, std::move(req))
    .receive([](uint64_t) {}, [&](caf::error&) { ok = false; });
  return ok;
}

/// Prefetch distance in keys, as core/table_store.cpp's.
constexpr size_t ahead = 8;

/// The limit's table: key -> row number, rows in one arena.
struct arena_table {
  absl::flat_hash_map<uint64_t, uint32_t> index;
  std::vector<float> rows;
  std::vector<uint32_t> found; // scratch: each key's row

  /// Finds or inserts (with its initial row) every key, in order; fills
  /// `found`. One probe per key.
  void insert(const std::vector<uint64_t>& keys, const table_shard_def& def) {
    found.resize(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      auto [it, fresh] = index.try_emplace(keys[i], static_cast<uint32_t>(
                                                      rows.size() / sparse_dim));
      if (fresh) {
        rows.resize(rows.size() + sparse_dim);
        initial_row(def, keys[i], rows.data() + rows.size() - sparse_dim);
      }
      found[i] = it->second;
    }
  }

  /// Fills `found` with the row of every key (all present), prefetching the
  /// map ahead, as table_store does.
  void look_up(const std::vector<uint64_t>& keys) {
    auto n = keys.size();
    found.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (i + ahead < n)
        index.prefetch(keys[i + ahead]);
      found[i] = index.find(keys[i])->second;
    }
  }

  /// Copies the rows of `found` to `out`, prefetching rows ahead.
  void copy_out(float* out) const {
    auto n = found.size();
    const float* base = rows.data();
    for (size_t i = 0; i < n; ++i) {
      if (i + ahead < n)
        __builtin_prefetch(base + size_t{found[i + ahead]} * sparse_dim);
      std::memcpy(out + i * sparse_dim, base + size_t{found[i]} * sparse_dim,
                  sparse_dim * sizeof(float));
    }
  }

  /// Adds -lr * g to the rows of `found` (SGD), prefetching rows ahead.
  void add(const float* g, float lr) {
    auto n = found.size();
    float* base = rows.data();
    for (size_t i = 0; i < n; ++i) {
      if (i + ahead < n)
        __builtin_prefetch(base + size_t{found[i + ahead]} * sparse_dim, 1);
      float* w = base + size_t{found[i]} * sparse_dim;
      const float* gi = g + i * sparse_dim;
      for (size_t j = 0; j < sparse_dim; ++j)
        w[j] -= lr * gi[j];
    }
  }
};

/// The keys of cold iteration i of n keys (seeds apart from warm_keys').
std::vector<uint64_t> cold_keys(uint64_t n, int i) {
  return random_keys(n, 0xc01d0000u + static_cast<uint64_t>(i));
}

} // namespace

ps_options sparse_ps_options(uint32_t index) {
  ps_options opts;
  opts.index = index;
  opts.optimizer = optimizer_config{"sgd", 0.01f, {}};
  opts.table_optimizer = optimizer_config{"sgd", 0.01f, {}};
  return opts;
}

bool create_table(caf::actor_system& sys, const ps_actor& ps, uint32_t shard) {
  auto def = table_def();
  create_shard req;
  req.variable = def.variable;
  req.shard = shard;
  req.table = true;
  req.cols = def.dim;
  req.vocabulary = def.vocabulary;
  req.init_scale = def.init_scale;
  req.seed = def.seed;
  caf::scoped_actor self{sys};
  bool ok = false;
  self->request(ps, std::chrono::seconds(30), create_atom_v, std::move(req))
    .receive([&](uint64_t) { ok = true; }, [](caf::error&) {});
  return ok;
}

const key_set& warm_keys(uint64_t n) {
  static std::map<uint64_t, std::unique_ptr<key_set>> cache;
  auto& entry = cache[n];
  if (!entry) {
    entry = std::make_unique<key_set>();
    entry->keys = random_keys(n, n);
    entry->insert_order = entry->keys;
    std::shuffle(entry->insert_order.begin(), entry->insert_order.end(),
                 std::mt19937_64{n + 1});
  }
  return *entry;
}

point sparse_point(std::string kind, bool push, std::string where, uint64_t n,
                   std::string rows) {
  auto p = make_point(std::move(kind), push ? "push" : "pull",
                       std::move(where), n * sparse_dim);
  p.keys = n;
  p.rows = std::move(rows);
  auto row_bytes = n * sparse_dim * sizeof(float);
  p.bytes_out = n * sizeof(uint64_t) + (push ? row_bytes : 0);
  p.bytes_back = push ? sizeof(uint64_t) : row_bytes;
  return p;
}

void bm_sparse(benchmark::State& st, caf::actor_system* sys, ps_actor ps,
               std::string where, bool push, uint64_t n) {
  auto& ks = warm_keys(n);
  caf::scoped_actor self{*sys};
  if (!pull_once(self, ps, table_pull(0, ks.insert_order))) {
    st.SkipWithError("the warm-up pull failed");
    return;
  }
  std::vector<float> grad(n * sparse_dim, 1e-6f);
  auto p = sparse_point("sparse", push, std::move(where), n, "warm");
  for (auto _ : st) {
    // Requests are built before the timer starts: the worker's key routing
    // and gradient gather are part of its step, not of the transfer.
    bool ok = false;
    if (push) {
      push_request req;
      req.id = update_id{0, 0, next_closure()};
      req.tables.push_back(table_rows{
        0, key_buffer{ks.keys},
        float_buffer{float_vector(grad.begin(), grad.end())}});
      auto t0 = steady_clock::now();
      ok = push_once(self, ps, std::move(req));
      p.latencies.push_back(seconds_since(t0));
    } else {
      auto req = table_pull(0, ks.keys);
      auto t0 = steady_clock::now();
      ok = pull_once(self, ps, std::move(req));
      p.latencies.push_back(seconds_since(t0));
    }
    if (!ok) {
      st.SkipWithError("the ps failed");
      return;
    }
    st.SetIterationTime(p.latencies.back());
  }
  record(st, std::move(p));
}

void bm_sparse_cold(benchmark::State& st, caf::actor_system* sys, ps_actor ps,
                    std::string where, uint64_t n) {
  caf::scoped_actor self{*sys};
  auto p = sparse_point("sparse", false, std::move(where), n, "cold");
  uint32_t shard = 0;
  for (auto _ : st) {
    auto req = table_pull(shard, cold_keys(n, static_cast<int>(shard)));
    ++shard;
    auto t0 = steady_clock::now();
    if (!pull_once(self, ps, std::move(req))) {
      st.SkipWithError("the ps failed");
      return;
    }
    p.latencies.push_back(seconds_since(t0));
    st.SetIterationTime(p.latencies.back());
  }
  record(st, std::move(p));
}

void bm_sparse_limit(benchmark::State& st, bool push, uint64_t n) {
  auto& ks = warm_keys(n);
  arena_table table;
  table.insert(ks.insert_order, table_def());
  std::vector<float> buf(n * sparse_dim, 1e-6f); // pull: out; push: gradient
  auto p = sparse_point("sparse-limit", push, "in-process", n, "warm");
  for (auto _ : st) {
    auto t0 = steady_clock::now();
    table.look_up(ks.keys);
    if (push)
      table.add(buf.data(), 0.01f);
    else
      table.copy_out(buf.data());
    benchmark::DoNotOptimize(buf.data());
    benchmark::DoNotOptimize(table.rows.data());
    benchmark::ClobberMemory();
    p.latencies.push_back(seconds_since(t0));
    st.SetIterationTime(p.latencies.back());
  }
  record(st, std::move(p));
}

void bm_sparse_cold_limit(benchmark::State& st, uint64_t n) {
  auto def = table_def();
  std::vector<float> out(n * sparse_dim);
  auto p = sparse_point("sparse-limit", false, "in-process", n, "cold");
  int i = 0;
  for (auto _ : st) {
    auto keys = cold_keys(n, i++);
    arena_table table;
    auto t0 = steady_clock::now();
    table.insert(keys, def);
    table.copy_out(out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    p.latencies.push_back(seconds_since(t0));
    st.SetIterationTime(p.latencies.back());
  }
  record(st, std::move(p));
}

} // namespace actorps::bench
