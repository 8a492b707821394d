#include "bench/bench_transfer.hpp"

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"

namespace actorps::bench {

namespace {

/// The push of worker `w`: its gradient buffer, filled (a worker's gather).
push_request make_push(uint32_t w, const std::vector<float>& grad) {
  push_request req;
  req.id = update_id{w, 0, next_closure()};
  req.gradient.values.assign(grad.begin(), grad.end());
  return req;
}

/// A pull of the whole dense region, no tables.
pull_request dense_pull(uint32_t w) {
  return pull_request{0, 0, w, true, {}, true};
}

/// One pull, or the push `req`, by worker `w`; false on error.
bool transfer_once(caf::scoped_actor& self, const ps_actor& ps, bool push,
                   uint32_t w, push_request req) {
  bool ok = true;
  if (push)
    self->request(ps, caf::infinite, push_atom_v, std::move(req))
      .receive([](uint64_t) {}, [&](caf::error&) { ok = false; });
  else
    self->request(ps, caf::infinite, pull_atom_v, dense_pull(w))
      .receive([](pull_reply&) {}, [&](caf::error&) { ok = false; });
  return ok;
}

} // namespace

ps_options dense_ps_options(uint32_t index) {
  ps_options opts;
  opts.index = index;
  opts.optimizer = optimizer_config{"sgd", 0.01f, {}};
  opts.workers = 2;
  return opts;
}

bool create_dense(caf::actor_system& sys, const ps_actor& ps, uint64_t n) {
  caf::scoped_actor self{sys};
  create_shard shard;
  shard.variable = "x";
  shard.row_end = n;
  shard.cols = 1;
  shard.values.values.assign(n, 0.5f);
  bool ok = false;
  self->request(ps, std::chrono::seconds(30), create_atom_v, std::move(shard))
    .receive([&](uint64_t) { ok = true; }, [](caf::error&) {});
  return ok;
}

void bm_memcpy(benchmark::State& st, uint64_t n) {
  std::vector<float> a(n, 1.0f);
  std::vector<float> b(n, 0.0f);
  auto p = make_point("limit", "memcpy", "in-process", n);
  for (auto _ : st) {
    auto t0 = steady_clock::now();
    std::memcpy(b.data(), a.data(), n * sizeof(float));
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
    auto dt = seconds_since(t0);
    st.SetIterationTime(dt);
    p.latencies.push_back(dt);
  }
  record(st, std::move(p));
}

void bm_axpy(benchmark::State& st, uint64_t n) {
  std::vector<float> x(n, 1e-6f);
  std::vector<float> y(n, 0.5f);
  auto p = make_point("limit", "axpy", "in-process", n);
  for (auto _ : st) {
    auto t0 = steady_clock::now();
    auto* yp = y.data();
    auto* xp = x.data();
    for (uint64_t i = 0; i < n; ++i)
      yp[i] -= 0.01f * xp[i];
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    auto dt = seconds_since(t0);
    st.SetIterationTime(dt);
    p.latencies.push_back(dt);
  }
  record(st, std::move(p));
}

void bm_transfer(benchmark::State& st, caf::actor_system* sys, ps_actor ps,
                 std::string where, bool push, uint64_t n, int workers) {
  std::vector<float> grad(n, 1e-6f);
  // The second worker runs the same operation in a loop while this one is
  // measured.
  std::atomic<bool> stop{false};
  std::thread other;
  if (workers == 2)
    other = std::thread([&] {
      caf::scoped_actor self{*sys};
      while (!stop.load())
        if (!transfer_once(self, ps, push, 1,
                           push ? make_push(1, grad) : push_request{}))
          break;
    });
  caf::scoped_actor self{*sys};
  auto p = make_point("transfer", push ? "push" : "pull", std::move(where),
                       n, workers);
  for (auto _ : st) {
    auto req = push ? make_push(0, grad) : push_request{};
    auto t0 = steady_clock::now();
    if (!transfer_once(self, ps, push, 0, std::move(req))) {
      st.SkipWithError("the ps failed");
      break;
    }
    auto dt = seconds_since(t0);
    st.SetIterationTime(dt);
    p.latencies.push_back(dt);
  }
  stop = true;
  if (other.joinable())
    other.join();
  if (!p.latencies.empty())
    record(st, std::move(p));
}

} // namespace actorps::bench
