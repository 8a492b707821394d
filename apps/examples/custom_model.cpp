// A custom model on the actorps library: softmax regression (a linear
// classifier) written against models/model.hpp, registered at run time with
// register_model and trained with fit() as Keras' model.fit; actorps itself
// is not edited.    build/custom_model   # "loss EPOCH VALUE  test_accuracy X"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "cluster/services/fit.hpp"
#include "cluster/services/fit_callbacks.hpp"
#include "cluster/topology/local_cluster.hpp" // fit in this process
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "models/registry.hpp"

using namespace actorps;

namespace {

/// p = softmax(x W + b), loss = mean cross-entropy of the labels. Dense
/// variables: softmax/kernel (dim x classes, row-major) and softmax/bias
/// (1 x classes), one after another in the flat buffer.
class softmax_regression final : public model {
public:
  softmax_regression(uint64_t dim, uint64_t classes)
    : dim_(dim), classes_(classes) {}

  std::vector<variable_def> variables() const override {
    return {variable_def::dense("softmax/kernel", dim_, classes_),
            variable_def::dense("softmax/bias", 1, classes_)};
  }

  void check_schema(const data_schema& s) const override {
    if (s.dense_dim != dim_ || s.classes != classes_)
      throw input_error("model.type: softmax_regression: other data");
  }

  void initialize(float* w, uint64_t seed) const override {
    std::mt19937_64 rng{seed};
    std::normal_distribution<float> normal{0.0f, 0.01f};
    std::generate(w, w + dim_ * classes_, [&] { return normal(rng); });
    std::fill(w + dim_ * classes_, w + (dim_ + 1) * classes_, 0.0f);
  }

  std::unique_ptr<model_workspace> make_workspace(uint64_t) const override {
    return std::make_unique<model_workspace>(); // needs no scratch memory
  }

  double loss_and_gradient(const model_inputs& in, const example_batch& b,
                           float* grad, model_workspace&) const override {
    std::fill(grad, grad + (dim_ + 1) * classes_, 0.0f);
    std::vector<float> p(classes_);
    double loss = 0, scale = 1.0 / double(b.rows);
    for (uint64_t r = 0; r < b.rows; ++r) {
      loss += forward(in.dense, b, r, p);
      p[b.labels[r]] -= 1.0f; // d loss / d logits = p - onehot
      const float* x = b.dense.data() + r * dim_;
      for (uint64_t c = 0; c < classes_; ++c) {
        for (uint64_t j = 0; j < dim_; ++j)
          grad[j * classes_ + c] += float(scale * x[j] * p[c]);
        grad[dim_ * classes_ + c] += float(scale * p[c]);
      }
    }
    return loss * scale;
  }

  void evaluate(const model_inputs& in, const example_batch& b,
                eval_accumulator& acc, model_workspace&) const override {
    std::vector<float> p(classes_);
    for (uint64_t r = 0; r < b.rows; ++r) {
      acc.loss_sum += forward(in.dense, b, r, p);
      auto best = std::max_element(p.begin(), p.end()) - p.begin();
      acc.correct += best == b.labels[r] ? 1 : 0;
    }
    acc.count += b.rows;
  }

  metric_list metrics(const eval_accumulator& acc) const override {
    return multiclass_metrics(acc); // test_loss, test_accuracy
  }

private:
  /// Softmax probabilities of row r into p; returns its cross-entropy.
  double forward(const float* w, const example_batch& b, uint64_t r,
                 std::vector<float>& p) const {
    const float* x = b.dense.data() + r * dim_;
    for (uint64_t c = 0; c < classes_; ++c) {
      p[c] = w[dim_ * classes_ + c];
      for (uint64_t j = 0; j < dim_; ++j)
        p[c] += x[j] * w[j * classes_ + c];
    }
    float mx = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (auto& z : p)
      sum += (z = std::exp(z - mx));
    for (auto& z : p)
      z = float(z / sum);
    return -std::log(std::max(double{p[b.labels[r]]}, 1e-12));
  }

  uint64_t dim_, classes_;
};

/// Four Gaussian blobs in 8 dimensions, one per class.
std::shared_ptr<const dataset> blobs(uint64_t rows, uint32_t seed) {
  auto d = std::make_shared<dataset>();
  d->schema = data_schema{8, {}, label_kind::multiclass, 4};
  d->examples.reset(8, 0);
  std::mt19937 rng{seed};
  std::normal_distribution<float> noise{0.0f, 0.7f};
  for (; d->examples.rows < rows; ++d->examples.rows) {
    auto label = static_cast<int32_t>(d->examples.rows % 4);
    for (int j = 0; j < 8; ++j)
      d->examples.dense.push_back((j % 4 == label ? 1.0f : 0.0f) + noise(rng));
    d->examples.labels.push_back(label);
  }
  return d;
}

} // namespace

int main() {
  // 1. Register the model under a name, as a built-in one is.
  register_model("softmax_regression", [](auto&, const data_schema& s) {
    return std::make_shared<softmax_regression>(s.dense_dim, s.classes);
  });
  // 2. The job: 2 workers, 2 parameter servers with Adam, the model by name.
  job_config cfg; // defaults: 2 workers, 2 ps
  cfg.model = "softmax_regression";
  cfg.optimizer = optimizer_config{"adam", 0.01f, {}};
  auto train = blobs(4000, 1), test = blobs(1000, 2);
  auto net = make_model(cfg, train->schema);
  dataset_fn fn = [&](const input_context& ctx) {
    return std::make_shared<batch_iterator>(train, ctx, 32, /*seed*/ 7);
  };
  // 3. fit, with a callback per epoch and early stopping on the test loss.
  auto print = std::make_shared<lambda_callback>();
  print->epoch_end = [](auto&, epoch_metrics& m) {
    std::printf("loss %u %.6f  test_accuracy %.4f\n", m.epoch, m.train_loss,
                m.test_accuracy);
  };
  fit_options opts; // 6 epochs of 30 steps per worker
  opts.epochs = 6, opts.steps_per_epoch = 30;
  opts.validation_data = test;
  opts.callbacks = {print, std::make_shared<early_stopping>("test_loss", 2)};
  return fit(cfg, net, fn, opts).epochs.empty() ? 1 : 0;
}
