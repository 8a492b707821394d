// A custom step function on the actorps library: a training step that clips
// the gradient to a global norm of 1 (Pascanu, Mikolov & Bengio, "On the
// difficulty of training recurrent neural networks", ICML 2013) before the
// workers push it. Registered at run time with register_step_function and
// scheduled by name by fit(); nothing in actorps is edited.
//
//   build/custom_step   # prints "loss EPOCH VALUE  clipped N of M steps"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <random>

#include "cluster/services/fit.hpp"
#include "cluster/topology/local_cluster.hpp" // fit in this process
#include "core/job_config.hpp"
#include "models/registry.hpp"
#include "models/step_function.hpp"

using namespace actorps;

namespace {

std::atomic<uint64_t> clipped{0};
std::atomic<uint64_t> steps{0};

/// The model's loss and gradient, with the dense gradient scaled down to a
/// norm of at most 1 (a step function must not keep state of its own beyond
/// counters: it runs on every worker).
double clipped_train_step(const model& net, const model_inputs& in,
                          const example_batch& batch, float* grad,
                          model_workspace& ws) {
  double loss = net.loss_and_gradient(in, batch, grad, ws);
  auto n = net.dense_parameters();
  double norm2 = 0;
  for (uint64_t i = 0; i < n; ++i)
    norm2 += double{grad[i]} * grad[i];
  ++steps;
  if (norm2 > 1.0) {
    ++clipped;
    auto scale = static_cast<float>(1.0 / std::sqrt(norm2));
    for (uint64_t i = 0; i < n; ++i)
      grad[i] *= scale;
  }
  return loss;
}

/// 8 uniform features; the class is the arg-max of the first four.
std::shared_ptr<dataset> argmax_data(uint64_t rows, uint32_t seed) {
  auto d = std::make_shared<dataset>();
  d->schema.dense_dim = 8;
  d->schema.classes = 4;
  d->examples.reset(8, 0);
  std::mt19937 rng{seed};
  std::uniform_real_distribution<float> u{0.0f, 1.0f};
  for (uint64_t i = 0; i < rows; ++i) {
    float best = -1;
    int32_t label = 0;
    for (int j = 0; j < 8; ++j) {
      auto x = u(rng);
      d->examples.dense.push_back(x);
      if (j < 4 && x > best)
        best = x, label = j;
    }
    d->examples.labels.push_back(label);
    ++d->examples.rows;
  }
  return d;
}

} // namespace

int main() {
  // 1. Register the step function: closures name it, every worker runs it.
  register_step_function({"clipped_train_step", /*pushes*/ true,
                          clipped_train_step});
  // 2. A built-in model (an MLP 8-32-4) trained with plain SGD.
  job_config cfg;
  cfg.layers = {8, 32, 4};
  cfg.workers = 2;
  cfg.optimizer = optimizer_config{"sgd", 0.5f, {}};
  std::shared_ptr<const dataset> train = argmax_data(4000, 1);
  auto net = make_model(cfg, train->schema);
  dataset_fn fn = [&](const input_context& ctx) {
    return std::make_shared<batch_iterator>(train, ctx, 32, /*seed*/ 7);
  };
  // 3. fit runs the custom step in every closure.
  auto print = std::make_shared<lambda_callback>();
  print->epoch_end = [](fit_state&, epoch_metrics& m) {
    std::printf("loss %u %.6f  clipped %llu of %llu steps\n", m.epoch,
                m.train_loss, static_cast<unsigned long long>(clipped.load()),
                static_cast<unsigned long long>(steps.load()));
  };
  fit_options opts;
  opts.epochs = 5;
  opts.steps_per_epoch = 40;
  opts.step_function = "clipped_train_step";
  opts.callbacks = {print};
  fit(cfg, net, fn, opts);
  return steps.load() == 5 * 40 * 2 ? 0 : 1;
}
