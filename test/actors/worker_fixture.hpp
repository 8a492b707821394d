#pragma once

// What the worker tests share: a tiny data set, a worker's options on it,
// running one closure with a bounded wait, and a small job of servers and
// one worker.

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "actors/ps_actor.hpp"
#include "actors/worker_actor.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "core/dataset.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "models/model.hpp"
#include "models/registry.hpp"
#include "models/step_function.hpp"
#include "test/actor_fixture.hpp"

namespace actorps::test {

/// 64 examples of 4 uniform features (from `seed`), 2 classes alternating.
inline std::shared_ptr<const dataset> tiny_data(uint32_t seed = 3) {
  auto d = std::make_shared<dataset>();
  d->schema.dense_dim = 4;
  d->schema.classes = 2;
  d->examples.reset(4, 0);
  std::mt19937 rng{seed};
  std::uniform_real_distribution<float> u{0.0f, 1.0f};
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 4; ++j)
      d->examples.dense.push_back(u(rng));
    d->examples.labels.push_back(i % 2);
    ++d->examples.rows;
  }
  return d;
}

/// The options of worker 0 of 1 on `servers`: batches of 8 of `data`.
inline worker_options worker_options_on(std::vector<ps_actor> servers,
                                        std::shared_ptr<const model> net,
                                        std::shared_ptr<const dataset> data,
                                        std::shared_ptr<const placement> layout) {
  worker_options opts;
  opts.net = std::move(net);
  opts.data = std::make_shared<batch_iterator>(std::move(data),
                                               input_context{1, 0}, 8, 1);
  opts.layout = std::move(layout);
  opts.servers = std::move(servers);
  return opts;
}

/// Runs closure `c` (train_step) on `worker` and returns its result; a
/// failure or no answer within reply_timeout fails the test.
inline step_result run_closure(actor_fixture& t, const worker_actor& worker,
                               uint64_t c) {
  step_result out;
  t.self->request(worker, reply_timeout, run_atom_v,
                  closure_request{c, train_step_name})
    .receive([&](step_result& r) { out = r; },
             [&](caf::error& err) {
               FAIL("closure " << c << " failed: " << t.sys.render(err));
             });
  return out;
}

/// Async servers and one worker on them for an MLP 4-3-2 on tiny_data():
/// base.ps servers hold its variables (each split over all of them) under
/// base.optimizer; `tune` sets what a test varies in the worker's options.
struct small_job {
  job_config cfg;
  std::shared_ptr<const dataset> data = tiny_data();
  std::shared_ptr<const model> net;
  std::shared_ptr<const placement> layout;
  std::vector<ps_actor> servers;
  worker_actor worker;

  small_job(actor_fixture& t, job_config base,
            const std::function<void(worker_options&)>& tune)
    : cfg(std::move(base)) {
    cfg.layers = {4, 3, 2};
    cfg.workers = 1;
    net = make_model(cfg, data->schema);
    layout = std::make_shared<const placement>(job_placement(cfg, *net));
    for (uint32_t i = 0; i < cfg.ps; ++i)
      servers.push_back(t.keep(spawn_ps(t.sys, ps_options_of(cfg, i))));
    create_variables(t.sys, *layout, servers, cfg, *net);
    auto opts = worker_options_on(servers, net, data, layout);
    tune(opts);
    worker = t.keep(spawn_worker(t.sys, std::move(opts)));
  }

  step_result run(actor_fixture& t, uint64_t c) {
    return run_closure(t, worker, c);
  }

  /// Server `p`'s dense values.
  std::vector<float> values(actor_fixture& t, uint32_t p = 0) {
    return values_of(t, servers[p], p);
  }

  /// The dense values of group `p` on `server`.
  static std::vector<float> values_of(actor_fixture& t,
                                      const ps_actor& server, uint32_t p) {
    pull_request req;
    req.group = p;
    req.worker = no_worker;
    auto r = t.ask<pull_reply>(server, pull_atom_v, req);
    return {r.values.values.begin(), r.values.values.end()};
  }

  ps_stats stats(actor_fixture& t, uint32_t p = 0) {
    return t.ask<ps_stats>(servers[p], stats_atom_v, p);
  }
};

} // namespace actorps::test
