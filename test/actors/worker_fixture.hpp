#pragma once

// What the worker tests share: a tiny data set, a worker's options on it,
// and running one closure with a bounded wait.

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "actors/ps_actor.hpp"
#include "actors/worker_actor.hpp"
#include "core/dataset.hpp"
#include "core/placement.hpp"
#include "models/model.hpp"
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

} // namespace actorps::test
