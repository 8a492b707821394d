// fit on a built-in dataset and model named by a job config file, as Keras'
// model.fit: what `actorps train --config FILE` runs, as a program of your
// own. README ("fit") shows this file whole; test/docs_test.sh checks that
// the two agree and runs the command below.
//    build/fit_config configs/a9a.json   # "loss EPOCH VALUE  test_loss X"

#include <cstdio>
#include <exception>
#include <memory>

#include "cluster/services/fit.hpp"
#include "cluster/services/fit_callbacks.hpp"
#include "cluster/topology/local_cluster.hpp" // fit in this process
#include "core/data_registry.hpp"
#include "core/job_config.hpp"
#include "models/registry.hpp"

using namespace actorps;

int main(int argc, char** argv) try {
  job_config cfg = load_job_config(argc > 1 ? argv[1] : "configs/a9a.json");
  auto data = open_dataset(cfg);              // fashion_mnist, a9a, ...
  auto net = make_model(cfg, data->schema()); // mlp, embedding_mlp, ...
  dataset_fn fn = [&](const input_context& ctx) { // one source per worker
    return data->train_source(ctx, cfg.batch_size, cfg.shuffle_seed);
  };
  auto print = std::make_shared<lambda_callback>();
  print->epoch_end = [](fit_state&, epoch_metrics& m) {
    std::printf("loss %u %.6f  test_loss %.4f\n", m.epoch, m.train_loss,
                m.test_loss);
  };
  fit_options opts;
  opts.epochs = cfg.epochs;
  opts.steps_per_epoch = effective_steps_per_epoch(cfg, data->train_rows());
  opts.validation_data = data->test_set(); // evaluated after each epoch
  opts.callbacks = {print,
                    std::make_shared<early_stopping>("test_loss", 2, 0.001)};
  fit_history h = fit(cfg, net, fn, opts); // in this process
  return h.epochs.empty() ? 1 : 0;
} catch (const std::exception& e) { // input_error: a bad config or data
  std::fprintf(stderr, "fit_config: %s\n", e.what());
  return 2;
}
