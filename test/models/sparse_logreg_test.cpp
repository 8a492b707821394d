#include "models/sparse_logreg.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"

using namespace actorps;

namespace {

/// Two sparse fields, "ad" (vocabulary 10, multi-hot) and "words" (unbounded
/// keys, weighted), and `dense_dim` dense features; 0/1 labels.
data_schema ctr_schema(uint64_t dense_dim) {
  data_schema s;
  s.dense_dim = dense_dim;
  s.fields = {{"ad", 10, false}, {"words", 0, true}};
  s.labels = label_kind::binary;
  return s;
}

/// One example of ctr_schema: its ad keys, its (word, value) pairs, its dense
/// features and its label.
struct example {
  std::vector<uint64_t> ad;
  std::vector<std::pair<uint64_t, float>> words;
  std::vector<float> dense;
  int32_t label;
};

example_batch make_batch(const std::vector<example>& xs, uint64_t dense_dim) {
  example_batch b;
  b.reset(dense_dim, 2);
  for (auto& x : xs) {
    auto& ad = b.fields[0];
    auto& words = b.fields[1];
    ad.keys.insert(ad.keys.end(), x.ad.begin(), x.ad.end());
    ad.offsets.push_back(ad.keys.size());
    for (auto [key, value] : x.words) {
      words.keys.push_back(key);
      words.values.push_back(value);
    }
    words.offsets.push_back(words.keys.size());
    b.dense.insert(b.dense.end(), x.dense.begin(), x.dense.end());
    b.labels.push_back(x.label);
    ++b.rows;
  }
  b.check("test batch");
  return b;
}

/// The rows of every table as the parameter servers hold them: key -> row.
using table_values = std::vector<std::map<uint64_t, std::vector<float>>>;

/// What a worker does before a step: one table_lookup per table variable,
/// the keys the model names, deduplicated, and their rows pulled from
/// `store`.
std::vector<table_lookup> pull(const model& net, const example_batch& b,
                               const table_values& store) {
  std::vector<table_lookup> tables;
  auto vars = net.variables();
  for (uint32_t i = 0; i < vars.size(); ++i)
    if (vars[i].kind == variable_kind::table) {
      tables.emplace_back();
      tables.back().variable = i;
      tables.back().dim = vars[i].cols;
    }
  net.collect_keys(b, tables);
  for (size_t t = 0; t < tables.size(); ++t) {
    auto& lookup = tables[t];
    lookup.deduplicate();
    for (size_t p = 0; p < lookup.keys.size(); ++p) {
      auto& row = store.at(t).at(lookup.keys[p]);
      REQUIRE(row.size() == lookup.dim);
      std::copy(row.begin(), row.end(), lookup.rows.begin() + p * lookup.dim);
    }
  }
  return tables;
}

/// The row gradient of `key` in `t`.
float grad_of_key(const table_lookup& t, uint64_t key) {
  auto p = std::find(t.keys.begin(), t.keys.end(), key) - t.keys.begin();
  REQUIRE(static_cast<size_t>(p) < t.keys.size());
  return t.grad[static_cast<size_t>(p) * t.dim];
}

double sigmoid_of(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

double log_loss(double z, int32_t y) {
  return std::log1p(std::exp(z)) - y * z;
}

// Central differences on the model's own loss, as in mlp_test.cpp: with
// h = 1e-2 truncation (h^2 / 6 f''') and float rounding (~1e-7 / 2h) are
// both ~1e-5, 20x inside the absolute tolerance.
constexpr float h = 1e-2f;
constexpr double abs_tolerance = 2e-4;
constexpr double rel_tolerance = 1e-2;

bool within_tolerance(double analytic, double numeric) {
  double err = std::abs(analytic - numeric);
  return err <= abs_tolerance || err <= rel_tolerance * std::abs(numeric);
}

} // namespace

TEST_CASE("sparse logistic regression has a weight table per field, dense "
          "weights and a bias, all starting at zero",
          "[models][sparse_logreg]") {
  sparse_logreg net{ctr_schema(3)};
  auto vars = net.variables();
  REQUIRE(vars.size() == 4);
  CHECK(vars[0].name == "weights/ad");
  CHECK(vars[0].kind == variable_kind::table);
  CHECK(vars[0].rows == 10);
  CHECK(vars[0].cols == 1);
  CHECK(vars[0].init_scale == 0.0f);
  CHECK(vars[1].name == "weights/words");
  CHECK(vars[1].kind == variable_kind::table);
  CHECK(vars[1].rows == 0);
  CHECK(vars[2].name == "dense_weights");
  CHECK(vars[2].kind == variable_kind::dense);
  CHECK(vars[2].rows == 3);
  CHECK(vars[3].name == "bias");
  CHECK(vars[3].size() == 1);
  REQUIRE(net.dense_parameters() == 4);
  std::vector<float> dense(4, std::numeric_limits<float>::quiet_NaN());
  net.initialize(dense.data(), 42);
  CHECK(dense == std::vector<float>(4, 0.0f));
  // Without dense features: the tables and the bias.
  sparse_logreg sparse_only{ctr_schema(0)};
  auto names = sparse_only.variables();
  REQUIRE(names.size() == 3);
  CHECK(names[2].name == "bias");
  CHECK(sparse_only.dense_parameters() == 1);
}

TEST_CASE("sparse logistic regression refuses data it cannot use",
          "[models][sparse_logreg]") {
  auto multiclass = ctr_schema(3);
  multiclass.labels = label_kind::multiclass;
  multiclass.classes = 10;
  CHECK_THROWS_WITH(sparse_logreg{multiclass},
                    Catch::Contains("model.type")
                      && Catch::Contains("binary labels"));
  data_schema empty;
  empty.labels = label_kind::binary;
  CHECK_THROWS_WITH(sparse_logreg{empty}, Catch::Contains("model.type"));
  sparse_logreg net{ctr_schema(3)};
  CHECK_NOTHROW(net.check_schema(ctr_schema(3)));
  CHECK_THROWS_WITH(net.check_schema(ctr_schema(4)),
                    Catch::Contains("4 dense features"));
  auto one_field = ctr_schema(3);
  one_field.fields.pop_back();
  CHECK_THROWS_AS(net.check_schema(one_field), input_error);
}

TEST_CASE("sparse logistic regression's collect_keys lists every key of every "
          "example in CSR order, and deduplicate maps them to unique keys",
          "[models][sparse_logreg]") {
  sparse_logreg net{ctr_schema(0)};
  auto b = make_batch({{{1, 2}, {{7, 1.0f}}, {}, 1},
                       {{2}, {}, {}, 0},
                       {{1, 1}, {{7, 2.0f}, {9, 1.0f}, {7, 3.0f}}, {}, 0}},
                      0);
  std::vector<table_lookup> tables(2);
  tables[0].dim = tables[1].dim = 1;
  tables[1].variable = 1;
  net.collect_keys(b, tables);
  CHECK(tables[0].occurrences == std::vector<uint64_t>{1, 2, 2, 1, 1});
  CHECK(tables[1].occurrences == std::vector<uint64_t>{7, 7, 9, 7});
  for (auto& t : tables)
    t.deduplicate();
  CHECK(tables[0].keys == std::vector<uint64_t>{1, 2});
  CHECK(tables[0].inverse == std::vector<uint32_t>{0, 1, 1, 0, 0});
  CHECK(tables[1].keys == std::vector<uint64_t>{7, 9});
  CHECK(tables[1].inverse == std::vector<uint32_t>{0, 0, 1, 0});
  CHECK(tables[1].rows.size() == 2);
  CHECK(tables[1].grad == std::vector<float>(2, 0.0f));
}

TEST_CASE("sparse logistic regression computes logits, loss, metrics and "
          "summed row gradients of a hand-computed batch",
          "[models][sparse_logreg]") {
  sparse_logreg net{ctr_schema(1)};
  // w_ad = {1: 0.5, 2: -1}, w_words = {3: 2, 4: 0.25}, dense weight 0.5,
  // bias -0.5. Logits: 1.5, -2 and -2.5 (ad key 2 twice in one example).
  table_values store{{{1, {0.5f}}, {2, {-1.0f}}},
                     {{3, {2.0f}}, {4, {0.25f}}}};
  std::vector<float> dense{0.5f, -0.5f};
  auto b = make_batch({{{1}, {{3, 0.5f}}, {1.0f}, 1},
                       {{2}, {{4, 2.0f}, {3, -0.25f}}, {-1.0f}, 1},
                       {{2, 2}, {}, {0.0f}, 0}},
                      1);
  const std::vector<double> z{1.5, -2.0, -2.5};
  auto tables = pull(net, b, store);
  auto ws = net.make_workspace(3);
  eval_accumulator acc;
  net.evaluate({dense.data(), &tables}, b, acc, *ws);
  REQUIRE(acc.scores.size() == 3);
  for (size_t r = 0; r < 3; ++r)
    CHECK(acc.scores[r] == Approx(z[r]));
  CHECK(acc.labels == b.labels);
  double loss = log_loss(z[0], 1) + log_loss(z[1], 1) + log_loss(z[2], 0);
  CHECK(acc.count == 3);
  CHECK(acc.correct == 2); // the second example's logit is below 0
  CHECK(acc.loss_sum == Approx(loss));
  auto m = net.metrics(acc);
  REQUIRE(m.size() == 3);
  CHECK(m[0].first == "test_loss");
  CHECK(m[0].second == Approx(loss / 3));
  CHECK(m[1].first == "test_auc");
  CHECK(m[1].second == 1.0); // both positives score above the negative
  CHECK(m[2].first == "test_accuracy");
  CHECK(m[2].second == Approx(2.0 / 3.0));
  // Gradients: d_r = (sigmoid(z_r) - y_r) / 3, times each occurrence's value,
  // summed over the occurrences of a key.
  std::vector<float> grad(2, std::numeric_limits<float>::quiet_NaN());
  CHECK(net.loss_and_gradient({dense.data(), &tables}, b, grad.data(), *ws)
        == Approx(loss / 3));
  double d0 = (sigmoid_of(z[0]) - 1) / 3;
  double d1 = (sigmoid_of(z[1]) - 1) / 3;
  double d2 = sigmoid_of(z[2]) / 3;
  CHECK(grad_of_key(tables[0], 1) == Approx(d0));
  CHECK(grad_of_key(tables[0], 2) == Approx(d1 + 2 * d2));
  CHECK(grad_of_key(tables[1], 3) == Approx(0.5 * d0 - 0.25 * d1));
  CHECK(grad_of_key(tables[1], 4) == Approx(2 * d1));
  CHECK(grad[0] == Approx(d0 - d1));
  CHECK(grad[1] == Approx(d0 + d1 + d2));
}

TEST_CASE("sparse logistic regression's gradient matches central finite "
          "differences of its loss",
          "[models][sparse_logreg]") {
  sparse_logreg net{ctr_schema(3)};
  std::mt19937_64 rng{7};
  std::uniform_real_distribution<float> unit{-1.0f, 1.0f};
  auto dense_row = [&] {
    return std::vector<float>{unit(rng), unit(rng), unit(rng)};
  };
  // Multi-hot ad keys, weighted words; ad 3 and word 7 in several examples
  // and twice in one; an example without words.
  auto b = make_batch({{{3}, {{7, 0.5f}, {9, 2.0f}}, dense_row(), 1},
                       {{3, 5}, {}, dense_row(), 0},
                       {{3, 3}, {{7, 1.5f}, {7, -1.0f}, {8, 0.75f}},
                        dense_row(), 0},
                       {{5}, {{9, -0.5f}}, dense_row(), 1},
                       {{6, 3}, {{8, 1.25f}}, dense_row(), 1}},
                      3);
  table_values store(2);
  for (auto k : {3, 5, 6})
    store[0][k] = {unit(rng)};
  for (auto k : {7, 8, 9})
    store[1][k] = {unit(rng)};
  std::vector<float> dense{unit(rng), unit(rng), unit(rng), unit(rng)};
  auto tables = pull(net, b, store);
  REQUIRE(tables[0].keys.size() < tables[0].occurrences.size());
  REQUIRE(tables[1].keys.size() < tables[1].occurrences.size());
  auto ws = net.make_workspace(b.rows);
  std::vector<float> scratch(dense.size());
  auto loss_at = [&] {
    for (auto& t : tables)
      std::fill(t.grad.begin(), t.grad.end(), 0.0f);
    return net.loss_and_gradient({dense.data(), &tables}, b, scratch.data(),
                                 *ws);
  };
  std::vector<float> dense_grad(dense.size(),
                                std::numeric_limits<float>::quiet_NaN());
  net.loss_and_gradient({dense.data(), &tables}, b, dense_grad.data(), *ws);
  // Every parameter the batch touches: the pulled rows, then the dense ones.
  struct parameter {
    float* value;
    double analytic;
  };
  std::vector<parameter> params;
  for (auto& t : tables)
    for (size_t i = 0; i < t.rows.size(); ++i)
      params.push_back({&t.rows[i], t.grad[i]});
  for (size_t i = 0; i < dense.size(); ++i)
    params.push_back({&dense[i], dense_grad[i]});
  REQUIRE(params.size() == 3 + 3 + 4);
  size_t failed = 0, failed_10 = 0;
  double max_abs_grad = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    auto& p = params[k];
    REQUIRE(std::isfinite(p.analytic));
    float w = *p.value;
    *p.value = w + h;
    double plus = loss_at();
    *p.value = w - h;
    double minus = loss_at();
    *p.value = w;
    double numeric = (plus - minus) / (2.0 * double{h});
    max_abs_grad = std::max(max_abs_grad, std::abs(p.analytic));
    if (!within_tolerance(p.analytic, numeric)) {
      ++failed;
      UNSCOPED_INFO("parameter " << k << ": analytic " << p.analytic
                                 << ", numeric " << numeric);
    }
    if (!within_tolerance(1.1 * p.analytic, numeric))
      ++failed_10;
  }
  CHECK(failed == 0);
  CHECK(max_abs_grad > 20 * abs_tolerance);
  CHECK(failed_10 > 0); // sharp enough to see a 10% error
}
