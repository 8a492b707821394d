#include "cluster/job/evaluation.hpp"

#include <algorithm>
#include <cstring>
#include <future>
#include <thread>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "caf/actor_system.hpp"

#include "actors/key_routes.hpp"
#include "cluster/job/ask.hpp"
#include "core/error.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

constexpr auto answer_timeout = std::chrono::seconds(60);

/// Examples per evaluation batch.
constexpr uint64_t eval_rows = 256;

/// The rows of one table for every key the test set uses.
struct row_table {
  absl::flat_hash_map<uint64_t, uint32_t> index;
  table_lookup lookup;
};

} // namespace

group_puller blocking_puller(caf::actor_system& sys,
                             const std::vector<server_route>& routes) {
  return [&sys, routes](uint32_t g, pull_request req) {
    req.view = routes.at(g).view;
    auto what = fmt::format("{} group {} from ps {}",
                            req.dense ? "pulling" : "reading rows of", g,
                            routes[g].index);
    return detail::ask<pull_reply>(sys, routes[g].ps, what, answer_timeout,
                                   pull_atom_v, std::move(req));
  };
}

std::vector<float> pull_dense(caf::actor_system& sys, const placement& layout,
                              const std::vector<server_route>& routes) {
  return pull_dense(layout, blocking_puller(sys, routes));
}

std::vector<float> pull_dense(const placement& layout,
                              const group_puller& pull) {
  std::vector<float> result(layout.model_size);
  for (uint32_t p = 0; p < layout.ps_sizes.size(); ++p) {
    if (layout.ps_sizes[p] == 0)
      continue;
    auto what = fmt::format("pulling group {}", p);
    pull_request req;
    req.group = p;
    req.worker = no_worker;
    req.create = false;
    auto r = pull(p, std::move(req));
    if (r.values.values.size() != layout.ps_sizes[p])
      throw runtime_failure(fmt::format("{}: expected {} floats, got {}", what,
                                        layout.ps_sizes[p],
                                        r.values.values.size()));
    scatter_shards(layout, p, r.values.values.data(), result.data());
  }
  return result;
}

void pull_rows(caf::actor_system& sys, const placement& layout,
               const std::vector<server_route>& servers,
               std::vector<table_lookup>& tables) {
  pull_rows(layout, blocking_puller(sys, servers), tables);
}

void pull_rows(const placement& layout, const group_puller& pull,
               std::vector<table_lookup>& tables) {
  auto groups = static_cast<uint32_t>(layout.ps_sizes.size());
  key_routes routes{layout, groups};
  routes.route(layout, tables);
  for (uint32_t p = 0; p < groups; ++p) {
    pull_request req;
    req.group = p;
    req.worker = no_worker;
    req.dense = false;
    req.create = false;
    routes.fill_pull(p, req.tables);
    if (req.tables.empty())
      continue;
    auto r = pull(p, std::move(req));
    if (auto err = routes.scatter_pull(p, r.tables, tables))
      throw runtime_failure(fmt::format("reading rows of group {}: {}", p,
                                        to_string(err)));
  }
}

metric_list evaluate_on_servers(caf::actor_system& sys,
                                const placement& layout,
                                const std::vector<server_route>& servers,
                                const model& net, const dataset& data) {
  return evaluate_on_servers(layout, blocking_puller(sys, servers), net,
                             data);
}

metric_list evaluate_on_servers(const placement& layout,
                                const group_puller& pull, const model& net,
                                const dataset& data) {
  auto dense = pull_dense(layout, pull);
  // Every key of the test set, once per table.
  std::vector<table_lookup> all;
  for (auto v : layout.tables) {
    table_lookup t;
    t.variable = v;
    t.dim = layout.variables[v].cols;
    all.push_back(std::move(t));
  }
  std::vector<row_table> rows(all.size());
  if (!all.empty()) {
    net.collect_keys(data.examples, all);
    for (auto& t : all)
      t.deduplicate();
    pull_rows(layout, pull, all);
    for (size_t i = 0; i < all.size(); ++i) {
      auto& r = rows[i];
      r.lookup = std::move(all[i]);
      r.index.reserve(r.lookup.keys.size());
      for (uint32_t u = 0; u < r.lookup.keys.size(); ++u)
        r.index.emplace(r.lookup.keys[u], u);
    }
  }
  auto n = data.rows();
  auto chunks = (n + eval_rows - 1) / eval_rows;
  auto threads = std::max<uint64_t>(
    1, std::min<uint64_t>(std::thread::hardware_concurrency(), chunks));
  std::vector<std::future<eval_accumulator>> parts;
  for (uint64_t th = 0; th < threads; ++th) {
    parts.push_back(std::async(std::launch::async, [&, th] {
      eval_accumulator acc;
      auto ws = net.make_workspace(eval_rows);
      example_batch batch;
      std::vector<table_lookup> lookups;
      for (auto& r : rows) {
        table_lookup t;
        t.variable = r.lookup.variable;
        t.dim = r.lookup.dim;
        lookups.push_back(std::move(t));
      }
      for (uint64_t c = th; c < chunks; c += threads) {
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
          auto& src = rows[i];
          t.deduplicate();
          for (size_t u = 0; u < t.keys.size(); ++u) {
            auto at = src.index.at(t.keys[u]);
            std::memcpy(t.rows.data() + u * t.dim,
                        src.lookup.rows.data() + uint64_t{at} * t.dim,
                        t.dim * sizeof(float));
          }
        }
        model_inputs in{dense.data(), &lookups};
        net.evaluate(in, batch, acc, *ws);
      }
      return acc;
    }));
  }
  eval_accumulator total;
  for (auto& f : parts)
    total.merge(f.get());
  return net.metrics(total);
}

} // namespace actorps
