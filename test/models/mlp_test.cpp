#include "models/mlp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/example_batch.hpp"

using namespace actorps;

namespace {

/// An independent forward pass in double: the logits of every example and
/// the ReLU pattern (pre-activation > 0) of every hidden unit, from the flat
/// parameter layout mlp.hpp documents (kernel in x out row-major, then bias).
struct reference_pass {
  std::vector<std::vector<double>> logits; // per example
  std::vector<char> pattern;               // all hidden units, all examples
  double min_abs_pre_activation = std::numeric_limits<double>::infinity();

  double loss(size_t r, int32_t label) const {
    auto& z = logits[r];
    double mx = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (auto v : z)
      sum += std::exp(v - mx);
    return std::log(sum) + mx - z[static_cast<size_t>(label)];
  }

  size_t argmax(size_t r) const {
    auto& z = logits[r];
    return static_cast<size_t>(std::max_element(z.begin(), z.end())
                               - z.begin());
  }
};

reference_pass reference_forward(const std::vector<uint64_t>& layers,
                                 const std::vector<float>& params,
                                 const float* x, uint64_t rows) {
  reference_pass result;
  for (uint64_t r = 0; r < rows; ++r) {
    std::vector<double> a(x + r * layers[0], x + (r + 1) * layers[0]);
    const float* p = params.data();
    for (size_t i = 0; i + 1 < layers.size(); ++i) {
      auto in = layers[i];
      auto out = layers[i + 1];
      const float* w = p;
      const float* b = p + in * out;
      p = b + out;
      std::vector<double> z(out);
      for (uint64_t j = 0; j < out; ++j) {
        double sum = b[j];
        for (uint64_t k = 0; k < in; ++k)
          sum += a[k] * double{w[k * out + j]};
        z[j] = sum;
      }
      if (i + 2 < layers.size()) {
        for (auto& v : z) {
          result.pattern.push_back(v > 0);
          result.min_abs_pre_activation
            = std::min(result.min_abs_pre_activation, std::abs(v));
          v = std::max(v, 0.0);
        }
      }
      a = std::move(z);
    }
    result.logits.push_back(std::move(a));
  }
  return result;
}

/// A batch of dense examples: rows x dim features, one label each.
example_batch make_batch(std::vector<float> x, std::vector<int32_t> y,
                         uint64_t dim) {
  example_batch b;
  b.rows = y.size();
  b.dense_dim = dim;
  b.dense = std::move(x);
  b.labels = std::move(y);
  return b;
}

/// Rows [begin, end) of `src`.
example_batch slice(const example_batch& src, uint64_t begin, uint64_t end) {
  example_batch b;
  b.reset(src.dense_dim, src.fields.size());
  for (auto r = begin; r < end; ++r)
    b.append_row(src, r);
  return b;
}

/// What an mlp computes with: its dense parameters and no tables.
model_inputs inputs(const std::vector<float>& params) {
  static std::vector<table_lookup> no_tables;
  return model_inputs{params.data(), &no_tables};
}

/// Random inputs in [-1, 1], random labels, Glorot kernels and (unlike a fresh
/// model) random biases, so that bias gradients are checked away from 0.
/// With a `kink_margin`, inputs and biases are drawn again until every hidden
/// pre-activation of the batch is at least that far from the ReLU's kink.
struct problem {
  std::vector<uint64_t> layers;
  mlp net;
  std::vector<float> params;
  std::vector<float> x;
  std::vector<int32_t> y;
  uint64_t rows;
  int draws = 0;

  problem(std::vector<uint64_t> widths, uint64_t batch, uint64_t seed,
          double kink_margin = 0)
    : layers(widths), net(widths), rows(batch) {
    params.resize(net.dense_parameters());
    net.initialize(params.data(), seed);
    std::mt19937_64 rng{seed + 1000};
    std::uniform_real_distribution<float> unit{-1.0f, 1.0f};
    std::uniform_int_distribution<int32_t> label{
      0, static_cast<int32_t>(layers.back()) - 1};
    do {
      ++draws;
      float* p = params.data();
      for (size_t i = 0; i + 1 < layers.size(); ++i) {
        p += layers[i] * layers[i + 1];
        for (uint64_t j = 0; j < layers[i + 1]; ++j)
          *p++ = 0.5f * unit(rng);
      }
      x.resize(batch * layers.front());
      for (auto& v : x)
        v = unit(rng);
      y.clear();
      for (uint64_t r = 0; r < batch; ++r)
        y.push_back(label(rng));
    } while (draws < 10000
             && reference_forward(layers, params, x.data(), rows)
                    .min_abs_pre_activation
                  < kink_margin);
  }

  example_batch batch() const {
    return make_batch(x, y, layers.front());
  }
};

struct gradient_report {
  size_t checked = 0;
  size_t skipped = 0;    // the ReLU pattern changes within [w - h, w + h]
  size_t failed = 0;     // |analytic - numeric| beyond the tolerance
  size_t failed_10 = 0;  // ... for the analytic gradient scaled by 1.1
  double max_abs_error = 0;
  double max_abs_grad = 0;
};

// Central differences on the model's own float32 loss. With h = 1e-2 the
// truncation error (h^2 / 6 times the third derivative) and the float
// rounding of the loss (~1e-7 / 2h) are both ~1e-5 (the largest error seen is
// below 1e-5), 20x inside the absolute tolerance; a gradient entry larger than
// 2e-3 that is off by 10% fails it.
constexpr float h = 1e-2f;
constexpr double abs_tolerance = 2e-4;
constexpr double rel_tolerance = 1e-2;

bool within_tolerance(double analytic, double numeric) {
  double err = std::abs(analytic - numeric);
  return err <= abs_tolerance || err <= rel_tolerance * std::abs(numeric);
}

gradient_report check_gradient(problem& pr) {
  auto ws = pr.net.make_workspace(pr.rows);
  auto batch = pr.batch();
  std::vector<float> grad(pr.params.size(),
                          std::numeric_limits<float>::quiet_NaN());
  pr.net.loss_and_gradient(inputs(pr.params), batch, grad.data(), *ws);
  auto base = reference_forward(pr.layers, pr.params, pr.x.data(), pr.rows);
  gradient_report report;
  std::vector<float> scratch(pr.params.size());
  for (size_t k = 0; k < pr.params.size(); ++k) {
    INFO("parameter " << k);
    REQUIRE(std::isfinite(grad[k])); // every entry was written
    auto w = pr.params[k];
    pr.params[k] = w + h;
    auto plus_ref = reference_forward(pr.layers, pr.params, pr.x.data(),
                                      pr.rows);
    double plus = pr.net.loss_and_gradient(inputs(pr.params), batch,
                                           scratch.data(), *ws);
    pr.params[k] = w - h;
    auto minus_ref = reference_forward(pr.layers, pr.params, pr.x.data(),
                                       pr.rows);
    double minus = pr.net.loss_and_gradient(inputs(pr.params), batch,
                                            scratch.data(), *ws);
    pr.params[k] = w;
    // Along one parameter every pre-activation is piecewise linear, with
    // kinks only where an earlier unit changes sign; if no unit's sign
    // differs at w - h, w and w + h, none crosses 0 in between and the loss is
    // smooth there. Otherwise the central difference straddles a kink.
    if (plus_ref.pattern != base.pattern || minus_ref.pattern != base.pattern) {
      ++report.skipped;
      continue;
    }
    double numeric = (plus - minus) / (2.0 * double{h});
    double analytic = grad[k];
    ++report.checked;
    report.max_abs_error = std::max(report.max_abs_error,
                                    std::abs(analytic - numeric));
    report.max_abs_grad = std::max(report.max_abs_grad, std::abs(analytic));
    if (!within_tolerance(analytic, numeric)) {
      ++report.failed;
      UNSCOPED_INFO("parameter " << k << ": analytic " << analytic
                                 << ", numeric " << numeric);
    }
    if (!within_tolerance(1.1 * analytic, numeric))
      ++report.failed_10;
  }
  return report;
}

} // namespace

TEST_CASE("the mlp's gradient matches central finite differences of its "
          "loss",
          "[models][mlp]") {
  struct net_case {
    std::vector<uint64_t> layers;
    uint64_t batch;
    uint64_t seed;
  };
  const std::vector<net_case> cases{
    {{5, 3}, 4, 1},          // softmax regression, no ReLU
    {{5, 4, 3}, 4, 2},       // one hidden layer
    {{6, 5, 4, 3}, 4, 3},    // two hidden layers
    {{12, 10, 8, 6, 4}, 4, 4}, // three hidden layers
    {{5, 4, 3}, 1, 5},       // a batch of one
  };
  for (auto& c : cases) {
    // No hidden pre-activation within 2h of 0: a perturbation of h moves one
    // by at most h |x| (first layer) or h times a product of Glorot weights
    // (deeper), so every central difference below lies on one linear piece of
    // each ReLU. check_gradient verifies this and skips any that does not.
    problem pr{c.layers, c.batch, c.seed, 2.0 * h};
    INFO("layers " << Catch::Detail::stringify(c.layers) << ", batch "
                   << c.batch << ", drawn " << pr.draws << " times");
    REQUIRE(reference_forward(pr.layers, pr.params, pr.x.data(), pr.rows)
              .min_abs_pre_activation
            >= 2.0 * h);
    auto report = check_gradient(pr);
    INFO("checked " << report.checked << ", skipped at ReLU kinks "
                    << report.skipped << ", max |error| "
                    << report.max_abs_error << ", max |gradient| "
                    << report.max_abs_grad);
    CHECK(report.failed == 0);
    // Every parameter was compared ...
    CHECK(report.checked + report.skipped == pr.params.size());
    CHECK(report.skipped == 0);
    // ... the gradient is not trivially small ...
    CHECK(report.max_abs_grad > 20 * abs_tolerance);
    // ... and the check is sharp enough to see a 10% error.
    CHECK(report.failed_10 > 0);
  }
}

TEST_CASE("the mlp's loss is the mean softmax cross-entropy of an "
          "independent forward pass",
          "[models][mlp]") {
  problem pr{{6, 5, 4, 3}, 8, 11};
  auto ws = pr.net.make_workspace(pr.rows);
  std::vector<float> grad(pr.params.size());
  double loss = pr.net.loss_and_gradient(inputs(pr.params), pr.batch(),
                                         grad.data(), *ws);
  auto ref = reference_forward(pr.layers, pr.params, pr.x.data(), pr.rows);
  double expected = 0;
  for (uint64_t r = 0; r < pr.rows; ++r)
    expected += ref.loss(r, pr.y[r]);
  expected /= static_cast<double>(pr.rows);
  CHECK(loss == Approx(expected).epsilon(1e-5));
  // A workspace larger than the batch gives the same numbers.
  auto big = pr.net.make_workspace(3 * pr.rows);
  std::vector<float> grad2(pr.params.size());
  CHECK(pr.net.loss_and_gradient(inputs(pr.params), pr.batch(), grad2.data(),
                                 *big)
        == loss);
  CHECK(grad2 == grad);
}

TEST_CASE("the loss of a confidently wrong prediction is finite",
          "[models][mlp]") {
  // One dense layer 2 -> 2 with zero kernel and bias (0, 200): logits (0, 200)
  // for every input. For label 0 the loss is log(1 + e^200) = 200 nats, far
  // past where e^-200 underflows in float.
  mlp net{{2, 2}};
  std::vector<float> params{0, 0, 0, 0, 0.0f, 200.0f};
  auto batch = make_batch({0.5f, -0.5f}, {0}, 2);
  auto ws = net.make_workspace(1);
  std::vector<float> grad(params.size());
  double loss = net.loss_and_gradient(inputs(params), batch, grad.data(), *ws);
  CHECK(loss == Approx(200.0));
  // d loss / d bias = softmax - onehot = (-1, 1).
  CHECK(grad[4] == Approx(-1.0));
  CHECK(grad[5] == Approx(1.0));
  eval_accumulator acc;
  net.evaluate(inputs(params), batch, acc, *ws);
  CHECK(acc.loss_sum == Approx(200.0));
  CHECK(acc.count == 1);
  CHECK(acc.correct == 0);
}

TEST_CASE("the mlp names and shapes its variables as Keras' Dense layers",
          "[models][mlp]") {
  mlp net{{784, 256, 128, 10}};
  auto vars = net.variables();
  struct expected_var {
    const char* name;
    uint64_t rows, cols;
  };
  const std::vector<expected_var> expected{
    {"dense_0/kernel", 784, 256}, {"dense_0/bias", 256, 1},
    {"dense_1/kernel", 256, 128}, {"dense_1/bias", 128, 1},
    {"dense_2/kernel", 128, 10},  {"dense_2/bias", 10, 1},
  };
  REQUIRE(vars.size() == expected.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    INFO("variable " << i);
    CHECK(vars[i].name == expected[i].name);
    CHECK(vars[i].rows == expected[i].rows);
    CHECK(vars[i].cols == expected[i].cols);
  }
  CHECK(net.input_dim() == 784);
  CHECK(net.classes() == 10);
  CHECK(net.dense_parameters()
        == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
}

TEST_CASE("an mlp needs at least two widths, none of them 0", "[models][mlp]") {
  CHECK_THROWS_AS(mlp({784}), input_error);
  CHECK_THROWS_AS(mlp({}), input_error);
  CHECK_THROWS_AS(mlp({784, 0, 10}), input_error);
  CHECK_THROWS_WITH(mlp({784, 0, 10}), Catch::Contains("model.layers[1]"));
}

TEST_CASE("initialize is deterministic per seed, Glorot-uniform for kernels "
          "and zero for biases",
          "[models][mlp]") {
  const std::vector<uint64_t> layers{784, 256, 128, 10};
  mlp net{layers};
  std::vector<float> a(net.dense_parameters()), b(a.size()), c(a.size());
  net.initialize(a.data(), 42);
  net.initialize(b.data(), 42);
  net.initialize(c.data(), 43);
  CHECK(a == b);
  CHECK(a != c);
  const float* p = a.data();
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    INFO("layer " << i);
    auto in = layers[i];
    auto out = layers[i + 1];
    double limit = std::sqrt(6.0 / double(in + out));
    double sum = 0, sum_sq = 0, max_abs = 0;
    for (uint64_t k = 0; k < in * out; ++k) {
      double v = p[k];
      sum += v;
      sum_sq += v * v;
      max_abs = std::max(max_abs, std::abs(v));
    }
    auto n = double(in * out);
    CHECK(max_abs <= limit);
    // U(-l, l): mean 0, standard deviation l / sqrt(3).
    CHECK(max_abs > 0.95 * limit);
    CHECK(std::abs(sum / n) < 0.05 * limit);
    CHECK(std::sqrt(sum_sq / n) == Approx(limit / std::sqrt(3.0)).epsilon(0.05));
    p += in * out;
    CHECK(std::all_of(p, p + out, [](float v) { return v == 0.0f; }));
    p += out;
  }
  CHECK(p == a.data() + a.size());
}

TEST_CASE("evaluate counts the examples and the arg-max hits of a manual "
          "forward pass",
          "[models][mlp]") {
  const std::vector<uint64_t> layers{5, 4, 3};
  mlp net{layers};
  std::vector<float> params(net.dense_parameters());
  net.initialize(params.data(), 7);
  std::mt19937 rng{8};
  std::uniform_real_distribution<float> unit{0.0f, 1.0f};
  std::vector<float> x;
  for (uint64_t i = 0; i < 7 * 5; ++i)
    x.push_back(unit(rng));
  auto ref = reference_forward(layers, params, x.data(), 7);
  // Even rows labelled with their arg-max class, odd rows with another:
  // 4 of 7 right.
  std::vector<int32_t> y;
  for (uint64_t r = 0; r < 7; ++r) {
    auto best = static_cast<int32_t>(ref.argmax(r));
    y.push_back(r % 2 == 0 ? best : (best + 1) % 3);
  }
  auto data = make_batch(x, y, 5);
  double expected_loss = 0;
  for (uint64_t r = 0; r < data.rows; ++r)
    expected_loss += ref.loss(r, data.labels[r]);
  // A workspace of 3 rows: batches of 3, 3 and 1 into one accumulator.
  auto ws = net.make_workspace(3);
  eval_accumulator all;
  for (uint64_t begin = 0; begin < data.rows; begin += 3)
    net.evaluate(inputs(params), slice(data, begin, std::min(begin + 3, 7ul)),
                 all, *ws);
  CHECK(all.count == 7);
  CHECK(all.correct == 4);
  CHECK(all.accuracy() == Approx(4.0 / 7.0));
  CHECK(all.loss_sum == Approx(expected_loss).epsilon(1e-5));
  CHECK(all.mean_loss() == Approx(expected_loss / 7).epsilon(1e-5));
  // The mlp reports them as multiclass metrics, the loss first.
  auto metrics = net.metrics(all);
  REQUIRE(metrics.size() == 2);
  CHECK(metrics[0].first == "test_loss");
  CHECK(metrics[0].second == Approx(expected_loss / 7).epsilon(1e-5));
  CHECK(metrics[1].first == "test_accuracy");
  CHECK(metrics[1].second == Approx(4.0 / 7.0));
  // Rows [1, 5): odd rows 1 and 3 wrong, even rows 2 and 4 right.
  eval_accumulator part;
  net.evaluate(inputs(params), slice(data, 1, 4), part, *ws);
  net.evaluate(inputs(params), slice(data, 4, 5), part, *ws);
  CHECK(part.count == 4);
  CHECK(part.correct == 2);
  // Nothing to evaluate.
  eval_accumulator none;
  net.evaluate(inputs(params), slice(data, 3, 3), none, *ws);
  CHECK(none.count == 0);
  CHECK(none.accuracy() == 0.0);
}

TEST_CASE("the mlp's forward pass in stages, one per layer, gives the loss "
          "and gradient of the whole pass",
          "[models][mlp][stages]") {
  problem pr{{6, 5, 4, 3}, 4, 7};
  auto stages = pr.net.forward_stages();
  // One stage per layer, each ending with its layer's kernel and bias.
  REQUIRE(stages == std::vector<uint64_t>{6 * 5 + 5, 35 + 5 * 4 + 4,
                                          59 + 4 * 3 + 3});
  REQUIRE(stages.back() == pr.params.size());
  auto batch = pr.batch();
  auto ws = pr.net.make_workspace(pr.rows);
  std::vector<float> grad(pr.params.size());
  auto loss = pr.net.loss_and_gradient({pr.params.data(), nullptr, 0}, batch,
                                       grad.data(), *ws);
  for (uint32_t done = 1; done <= 3; ++done) {
    INFO(done << " stages run before");
    // Stages read only their prefix: what lies after it is garbage until
    // the stages that read it.
    std::vector<float> partial(pr.params.size(), std::nanf(""));
    auto ws2 = pr.net.make_workspace(pr.rows);
    for (uint32_t s = 0; s < done; ++s) {
      std::copy(pr.params.begin(), pr.params.begin() + stages[s],
                partial.begin());
      pr.net.forward_stage({partial.data(), nullptr, 0}, batch, s, *ws2);
    }
    partial = pr.params;
    std::vector<float> grad2(pr.params.size());
    auto loss2 = pr.net.loss_and_gradient({partial.data(), nullptr, done},
                                          batch, grad2.data(), *ws2);
    CHECK(loss2 == loss);
    CHECK(grad2 == grad);
  }
  CHECK_THROWS_AS(pr.net.forward_stage({pr.params.data(), nullptr, 0}, batch,
                                       3, *ws),
                  std::logic_error);
}

