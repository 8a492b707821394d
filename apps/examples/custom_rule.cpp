// A custom update rule on the actorps library: RMSprop (Tieleman & Hinton,
// "Lecture 6.5 - rmsprop", COURSERA: Neural Networks for Machine Learning,
// 2012), in Keras' form, registered at run time with register_update_rule
// and named in the job config like a built-in rule; the parameter servers
// apply it. Nothing in actorps is edited.
//
//   build/custom_rule   # prints "loss EPOCH VALUE"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "cluster/services/fit.hpp"
#include "cluster/topology/local_cluster.hpp" // fit in this process
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/update_rule.hpp"
#include "models/registry.hpp"

using namespace actorps;

namespace {

/// ms = rho ms + (1 - rho) g^2;  w -= lr g / (sqrt(ms) + epsilon).
/// One slot per parameter: the mean square `ms`, starting at 0.
class rmsprop final : public update_rule {
public:
  rmsprop(float lr, float rho, float epsilon)
    : lr_(lr), rho_(rho), epsilon_(epsilon) {
  }

  const std::string& name() const override {
    static const std::string str = "rmsprop";
    return str;
  }

  size_t slot_count() const override {
    return 1;
  }

  void apply(float* w, float* const* slots, const float* g, size_t n,
             uint64_t) const override {
    flush_denormals(); // as the built-in rules: ms decays towards 0
    float* ms = slots[0];
    for (size_t i = 0; i < n; ++i) {
      ms[i] = rho_ * ms[i] + (1.0f - rho_) * g[i] * g[i];
      w[i] -= lr_ * g[i] / (std::sqrt(ms[i]) + epsilon_);
    }
  }

  std::string describe() const override {
    return "rmsprop learning_rate " + std::to_string(lr_) + " rho "
           + std::to_string(rho_) + " epsilon " + std::to_string(epsilon_);
  }

private:
  float lr_, rho_, epsilon_;
};

/// Reads the section's settings (rho in [0, 1), epsilon in [0, 1]) and
/// refuses any other field, naming it, as the built-in rules do.
std::unique_ptr<update_rule> make_rmsprop(const optimizer_config& cfg,
                                          const std::string& section) {
  double rho = 0.9, epsilon = 1e-7;
  for (auto& [field, x] : cfg.params) {
    if (field == "rho" && x >= 0 && x < 1)
      rho = x;
    else if (field == "epsilon" && x >= 0 && x <= 1)
      epsilon = x;
    else
      throw input_error(section + "." + field + ": "
                        + (field == "rho" || field == "epsilon"
                             ? std::to_string(x) + " is out of range"
                             : std::string{"unknown field for rmsprop"}));
  }
  return std::make_unique<rmsprop>(cfg.learning_rate, float(rho),
                                   float(epsilon));
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
  // 1. Register the rule; from now on "rmsprop" is a valid optimizer.type.
  register_update_rule("rmsprop", make_rmsprop);
  // 2. The job names it, with a setting, as the JSON config would.
  job_config cfg;
  cfg.layers = {8, 32, 4};
  cfg.workers = 2;
  cfg.optimizer = optimizer_config{"rmsprop", 0.003f, {{"rho", 0.9}}};
  std::shared_ptr<const dataset> train = argmax_data(4000, 1);
  auto net = make_model(cfg, train->schema);
  dataset_fn fn = [&](const input_context& ctx) {
    return std::make_shared<batch_iterator>(train, ctx, 32, /*seed*/ 7);
  };
  auto print = std::make_shared<lambda_callback>();
  print->epoch_end = [](fit_state&, epoch_metrics& m) {
    std::printf("loss %u %.6f\n", m.epoch, m.train_loss);
  };
  fit_options opts;
  opts.epochs = 5;
  opts.steps_per_epoch = 40;
  opts.callbacks = {print};
  fit(cfg, net, fn, opts); // validate(cfg) accepts "rmsprop" now
  return 0;
}
