#include "models/evaluate.hpp"

#include <algorithm>
#include <cstring>
#include <future>
#include <thread>

#include <absl/container/flat_hash_map.h>

#include "core/error.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

/// Examples per evaluation batch.
constexpr uint64_t eval_rows = 256;

} // namespace

std::vector<table_lookup> keys_of(const model& net, const placement& layout,
                                  const dataset& data) {
  std::vector<table_lookup> all;
  for (auto v : layout.tables) {
    table_lookup t;
    t.variable = v;
    t.dim = layout.variables[v].cols;
    all.push_back(std::move(t));
  }
  if (all.empty())
    return all;
  net.collect_keys(data.examples, all);
  for (auto& t : all)
    t.deduplicate();
  return all;
}

namespace {

/// Runs `fn(batch, inputs, workspace, first_row, accumulator)` on every
/// batch of eval_rows examples of `data` (rows [first_row, first_row +
/// batch.rows)), the batches spread over up to `threads` threads, each with
/// its own workspace and accumulator; returns the accumulators merged.
template <class F>
eval_accumulator for_each_batch(const model& net, const float* dense,
                                const std::vector<table_lookup>& tables,
                                const dataset& data, unsigned threads, F fn) {
  // Where each key's row is, per table.
  std::vector<absl::flat_hash_map<uint64_t, uint32_t>> index(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    index[i].reserve(tables[i].keys.size());
    for (uint32_t u = 0; u < tables[i].keys.size(); ++u)
      index[i].emplace(tables[i].keys[u], u);
  }
  auto n = data.rows();
  auto chunks = (n + eval_rows - 1) / eval_rows;
  uint64_t cores = threads > 0 ? threads : std::thread::hardware_concurrency();
  auto workers = std::max<uint64_t>(1, std::min<uint64_t>(cores, chunks));
  std::vector<std::future<eval_accumulator>> parts;
  for (uint64_t th = 0; th < workers; ++th) {
    parts.push_back(std::async(std::launch::async, [&, th] {
      eval_accumulator acc;
      auto ws = net.make_workspace(eval_rows);
      example_batch batch;
      std::vector<table_lookup> lookups;
      for (auto& src : tables) {
        table_lookup t;
        t.variable = src.variable;
        t.dim = src.dim;
        lookups.push_back(std::move(t));
      }
      for (uint64_t c = th; c < chunks; c += workers) {
        auto first = c * eval_rows;
        auto last = std::min(n, first + eval_rows);
        batch.reset(data.examples.dense_dim, data.examples.fields.size());
        for (auto r = first; r < last; ++r)
          batch.append_row(data.examples, r);
        for (auto& t : lookups)
          t.occurrences.clear();
        net.collect_keys(batch, lookups);
        for (size_t i = 0; i < lookups.size(); ++i) {
          auto& t = lookups[i];
          auto& src = tables[i];
          t.deduplicate();
          for (size_t u = 0; u < t.keys.size(); ++u) {
            auto at = index[i].at(t.keys[u]);
            std::memcpy(t.rows.data() + u * t.dim,
                        src.rows.data() + uint64_t{at} * t.dim,
                        t.dim * sizeof(float));
          }
        }
        model_inputs in{dense, &lookups};
        fn(batch, in, *ws, first, acc);
      }
      return acc;
    }));
  }
  eval_accumulator total;
  for (auto& f : parts)
    total.merge(f.get());
  return total;
}

} // namespace

metric_list evaluate_model(const model& net, const float* dense,
                           const std::vector<table_lookup>& tables,
                           const dataset& data, unsigned threads) {
  auto total = for_each_batch(
    net, dense, tables, data, threads,
    [&](const example_batch& batch, const model_inputs& in,
        model_workspace& ws, uint64_t, eval_accumulator& acc) {
      net.evaluate(in, batch, acc, ws);
    });
  return net.metrics(total);
}

std::vector<float> predict_model(const model& net, const float* dense,
                                 const std::vector<table_lookup>& tables,
                                 const dataset& data, unsigned threads) {
  auto width = net.prediction_width();
  if (width == 0)
    throw input_error("model.type: this model does not give predictions "
                      "(model::predict)");
  std::vector<float> out(data.rows() * width);
  for_each_batch(net, dense, tables, data, threads,
                 [&](const example_batch& batch, const model_inputs& in,
                     model_workspace& ws, uint64_t first, eval_accumulator&) {
                   net.predict(in, batch, out.data() + first * width, ws);
                 });
  return out;
}

} // namespace actorps
