// A custom training loop on the actorps library: the same parameter servers,
// workers and coordinator as `actorps train`, driven by hand with schedule /
// remote_value / join, on a synthetic problem.
//
//   build/custom_loop   # prints "loss ROUND VALUE": the mean loss of every
//                       # 100 closures

#include <cstdio>
#include <random>

#include "caf/actor_system.hpp"

#include "actors/cluster_coordinator.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "core/job_config.hpp"
#include "models/mlp.hpp"

int main() {
  using namespace actorps;
  // 1. The job: a small MLP, 3 workers, 2 parameter servers, momentum SGD.
  job_config cfg;
  cfg.layers = {8, 16, 4};
  cfg.workers = 3;
  cfg.ps = 2;
  cfg.batch_size = 16;
  cfg.optimizer = optimizer_config{"momentum", 0.05f, {{"momentum", 0.9}}};
  // 2. Data: the class is the arg-max of the first four features.
  auto data = std::make_shared<dataset>();
  data->schema.dense_dim = 8;
  data->schema.labels = label_kind::multiclass;
  data->schema.classes = 4;
  auto& ex = data->examples;
  ex.reset(8, 0);
  std::mt19937 rng{1};
  std::uniform_real_distribution<float> u{0.0f, 1.0f};
  for (uint64_t i = 0; i < 3000; ++i) {
    float best = -1;
    int32_t label = 0;
    for (int j = 0; j < 8; ++j) {
      auto x = u(rng);
      ex.dense.push_back(x);
      if (j < 4 && x > best)
        best = x, label = j;
    }
    ex.labels.push_back(label);
    ++ex.rows;
  }
  std::shared_ptr<const dataset> shared = data;
  // 3. dataset_fn: each worker reads its own shard (TF's input_context).
  dataset_fn fn = [&](const input_context& ctx) {
    return std::make_shared<batch_iterator>(shared, ctx, cfg.batch_size,
                                            /*seed*/ 7);
  };
  // 4. The cluster and the loop.
  system_config sys_cfg;
  caf::actor_system sys{sys_cfg};
  local_cluster cluster{sys, cfg, std::make_shared<mlp>(cfg.layers), fn};
  auto& coord = cluster.coordinator();
  for (int round = 0; round < 5; ++round) {
    std::vector<remote_value> results;
    for (int i = 0; i < 100; ++i)
      results.push_back(coord.schedule(train_step_name));
    coord.join();
    double loss = 0;
    for (auto& rv : results)
      loss += rv.fetch().loss;
    std::printf("loss %d %.6f  (closures %d-%d)\n", round + 1, loss / 100,
                round * 100 + 1, round * 100 + 100);
  }
  return 0;
}
