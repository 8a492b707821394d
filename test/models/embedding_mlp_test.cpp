#include "models/embedding_mlp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

using namespace actorps;

namespace {

/// Fields "user" (vocabulary 10) and "tags" (unbounded keys, weighted), two
/// dense features, 0/1 labels.
data_schema ctr_schema() {
  data_schema s;
  s.dense_dim = 2;
  s.fields = {{"user", 10, false}, {"tags", 0, true}};
  s.labels = label_kind::binary;
  return s;
}

/// Four examples of ctr_schema with random dense features, in CSR form:
///   users {3}, tags {7: 0.5, 9: 2}, label 1
///   users {3}, no tags, label 0
///   users {4}, tags {7: 1.5, 7: -1, 100: 0.75}, label 0
///   no user, tags {9: 1}, label 1
/// User 3 and tag 9 are in two examples, tag 7 in two and twice in one.
example_batch ctr_batch(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> unit{-1.0f, 1.0f};
  example_batch b;
  b.reset(2, 2);
  b.rows = 4;
  b.fields[0].keys = {3, 3, 4};
  b.fields[0].offsets = {0, 1, 2, 3, 3};
  b.fields[1].keys = {7, 9, 7, 7, 100, 9};
  b.fields[1].values = {0.5f, 2.0f, 1.5f, -1.0f, 0.75f, 1.0f};
  b.fields[1].offsets = {0, 2, 2, 5, 6};
  for (int i = 0; i < 8; ++i)
    b.dense.push_back(unit(rng));
  b.labels = {1, 0, 0, 1};
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

/// A random embedding_mlp problem on ctr_batch: rows U(-0.5, 0.5), Glorot
/// kernels and random biases; with a `kink_margin`, drawn again until every
/// hidden pre-activation is at least that far from the ReLU's kink.
struct problem {
  std::vector<uint64_t> layers;
  uint64_t dim = 3;
  bool mean;
  embedding_mlp net;
  example_batch batch;
  table_values store;
  std::vector<float> params;
  std::vector<table_lookup> tables;
  int draws = 0;

  problem(std::vector<uint64_t> widths, bool use_mean, uint64_t seed,
          double kink_margin = 0);
};

/// An independent forward pass in double from the documented layout: each
/// field's rows (found by key in `keys`, not through `inverse`) combined by
/// value (/ the sum of the example's values for mean), then the dense features, then
/// the tower with ReLU between layers.
struct reference_pass {
  std::vector<double> logits;
  std::vector<char> pattern; // hidden units, all examples: pre-activation > 0
  double min_abs_pre_activation = std::numeric_limits<double>::infinity();

  double mean_loss(const std::vector<int32_t>& labels) const {
    double sum = 0;
    for (size_t r = 0; r < logits.size(); ++r) {
      double z = logits[r];
      sum += std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z)))
             - labels[r] * z;
    }
    return sum / static_cast<double>(logits.size());
  }
};

reference_pass reference_forward(const problem& pr) {
  reference_pass result;
  auto& b = pr.batch;
  auto nf = b.fields.size();
  for (uint64_t r = 0; r < b.rows; ++r) {
    std::vector<double> a(pr.layers[0], 0.0);
    for (size_t f = 0; f < nf; ++f) {
      auto& field = b.fields[f];
      auto& t = pr.tables[f];
      // Mean: TensorFlow's embedding_lookup_sparse, a weighted mean (divided
      // by the sum of the values, not by the key count).
      double total = 0;
      for (auto i = field.offsets[r]; i < field.offsets[r + 1]; ++i)
        total += field.values.empty() ? 1.0 : field.values[i];
      for (auto i = field.offsets[r]; i < field.offsets[r + 1]; ++i) {
        double w = field.values.empty() ? 1.0 : field.values[i];
        if (pr.mean)
          w = total == 0 ? 0.0 : w / total;
        auto p = std::find(t.keys.begin(), t.keys.end(), field.keys[i])
                 - t.keys.begin();
        for (uint64_t j = 0; j < pr.dim; ++j)
          a[f * pr.dim + j] += w * t.rows[p * pr.dim + j];
      }
    }
    for (uint64_t j = 0; j < b.dense_dim; ++j)
      a[nf * pr.dim + j] = b.dense[r * b.dense_dim + j];
    const float* p = pr.params.data();
    for (size_t i = 0; i + 1 < pr.layers.size(); ++i) {
      auto in = pr.layers[i];
      auto out = pr.layers[i + 1];
      std::vector<double> z(out);
      for (uint64_t j = 0; j < out; ++j) {
        z[j] = p[in * out + j];
        for (uint64_t k = 0; k < in; ++k)
          z[j] += a[k] * double{p[k * out + j]};
      }
      p += in * out + out;
      if (i + 2 < pr.layers.size())
        for (auto& v : z) {
          result.pattern.push_back(v > 0);
          result.min_abs_pre_activation
            = std::min(result.min_abs_pre_activation, std::abs(v));
          v = std::max(v, 0.0);
        }
      a = std::move(z);
    }
    result.logits.push_back(a[0]);
  }
  return result;
}

problem::problem(std::vector<uint64_t> widths, bool use_mean, uint64_t seed,
                 double kink_margin)
  : layers(widths), mean(use_mean), net(ctr_schema(), widths, 3, use_mean,
                                        0.05f) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<float> unit{-1.0f, 1.0f};
  params.resize(net.dense_parameters());
  net.initialize(params.data(), seed);
  do {
    ++draws;
    batch = ctr_batch(rng);
    store.assign(2, {});
    for (uint64_t key : {3, 4})
      for (uint64_t j = 0; j < dim; ++j)
        store[0][key].push_back(0.5f * unit(rng));
    for (uint64_t key : {7, 9, 100})
      for (uint64_t j = 0; j < dim; ++j)
        store[1][key].push_back(0.5f * unit(rng));
    float* p = params.data();
    for (size_t i = 0; i + 1 < layers.size(); ++i) {
      p += layers[i] * layers[i + 1];
      for (uint64_t j = 0; j < layers[i + 1]; ++j)
        *p++ = 0.5f * unit(rng);
    }
    tables = pull(net, batch, store);
  } while (draws < 10000
           && reference_forward(*this).min_abs_pre_activation < kink_margin);
}

// Central differences on the model's own float32 loss, as in mlp_test.cpp.
constexpr float h = 1e-2f;
constexpr double abs_tolerance = 2e-4;
constexpr double rel_tolerance = 1e-2;

bool within_tolerance(double analytic, double numeric) {
  double err = std::abs(analytic - numeric);
  return err <= abs_tolerance || err <= rel_tolerance * std::abs(numeric);
}

} // namespace

TEST_CASE("embedding_mlp has a table per field, then the tower's kernels "
          "and biases",
          "[models][embedding_mlp]") {
  embedding_mlp net{ctr_schema(), {8, 5, 1}, 3, true, 0.25f};
  auto vars = net.variables();
  REQUIRE(vars.size() == 6);
  CHECK(vars[0].name == "embedding/user");
  CHECK(vars[0].kind == variable_kind::table);
  CHECK(vars[0].rows == 10);
  CHECK(vars[0].cols == 3);
  CHECK(vars[0].init_scale == 0.25f);
  CHECK(vars[1].name == "embedding/tags");
  CHECK(vars[1].rows == 0);
  CHECK(vars[2].name == "dense_0/kernel");
  CHECK(vars[2].rows == 8);
  CHECK(vars[5].name == "dense_1/bias");
  CHECK(net.dense_parameters() == 8 * 5 + 5 + 5 + 1);
  std::vector<float> a(net.dense_parameters()), b(a.size()), c(a.size());
  net.initialize(a.data(), 1);
  net.initialize(b.data(), 1);
  net.initialize(c.data(), 2);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(std::all_of(a.begin() + 40, a.begin() + 45,
                    [](float v) { return v == 0.0f; }));
}

TEST_CASE("embedding_mlp's collect_keys lists every key of every "
          "example in CSR order, and deduplicate maps them to unique keys",
          "[models][embedding_mlp]") {
  problem pr{{8, 5, 1}, true, 1};
  auto& users = pr.tables[0];
  auto& tags = pr.tables[1];
  CHECK(users.variable == 0);
  CHECK(tags.variable == 1);
  CHECK(users.occurrences == std::vector<uint64_t>{3, 3, 4});
  CHECK(users.keys == std::vector<uint64_t>{3, 4});
  CHECK(users.inverse == std::vector<uint32_t>{0, 0, 1});
  CHECK(tags.occurrences == std::vector<uint64_t>{7, 9, 7, 7, 100, 9});
  CHECK(tags.keys == std::vector<uint64_t>{7, 9, 100});
  CHECK(tags.inverse == std::vector<uint32_t>{0, 1, 0, 0, 2, 1});
  CHECK(tags.rows.size() == 3 * 3);
}

TEST_CASE("embedding_mlp combines the pulled rows by mean or sum into the "
          "logit of a hand-computed case",
          "[models][embedding_mlp]") {
  // One field, embedding_dim 2, no dense features, tower 2 -> 1 with kernel
  // (0.5, 0.25) and bias 0.1. Rows e5 = (1, 2), e8 = (3, -1). Examples:
  // keys {5, 8}; none (zeros: the logit is the bias); {5, 5} (mean: e5,
  // sum: 2 e5).
  data_schema schema;
  schema.fields = {{"item", 0, false}};
  schema.labels = label_kind::binary;
  example_batch b;
  b.reset(0, 1);
  b.fields[0].keys = {5, 8, 5, 5};
  b.fields[0].offsets = {0, 2, 2, 4};
  b.labels = {1, 1, 0};
  b.rows = 3;
  b.check("test batch");
  table_values store{{{5, {1.0f, 2.0f}}, {8, {3.0f, -1.0f}}}};
  std::vector<float> dense{0.5f, 0.25f, 0.1f};
  struct combiner_case {
    bool mean;
    std::vector<double> logits;
  };
  for (auto& c : {combiner_case{true, {1.225, 0.1, 1.1}},
                  combiner_case{false, {2.35, 0.1, 2.1}}}) {
    INFO("mean " << c.mean);
    embedding_mlp net{schema, {2, 1}, 2, c.mean, 0.05f};
    auto tables = pull(net, b, store);
    auto ws = net.make_workspace(3);
    eval_accumulator acc;
    net.evaluate({dense.data(), &tables}, b, acc, *ws);
    REQUIRE(acc.scores.size() == 3);
    double loss = 0;
    for (size_t r = 0; r < 3; ++r) {
      CHECK(acc.scores[r] == Approx(c.logits[r]));
      loss += std::log1p(std::exp(c.logits[r])) - b.labels[r] * c.logits[r];
    }
    CHECK(acc.count == 3);
    CHECK(acc.correct == 2); // the third example's logit says 1, wrongly
    CHECK(acc.loss_sum == Approx(loss));
    std::vector<float> grad(dense.size());
    CHECK(net.loss_and_gradient({dense.data(), &tables}, b, grad.data(), *ws)
          == Approx(loss / 3));
    auto m = net.metrics(acc);
    REQUIRE(m.size() == 3);
    CHECK(m[1].first == "test_auc");
    // The negative's logit lies between the positives' (0.1 and 1.225, or
    // 0.1 and 2.35): one of two pairs is ordered right.
    CHECK(m[1].second == 0.5);
  }
}

TEST_CASE("embedding_mlp's loss is that of an independent forward pass and "
          "its gradient matches central finite differences, for shared rows "
          "too",
          "[models][embedding_mlp]") {
  struct net_case {
    std::vector<uint64_t> layers;
    bool mean;
    uint64_t seed;
  };
  const std::vector<net_case> cases{
    {{8, 5, 1}, true, 1},
    {{8, 5, 1}, false, 2},
    {{8, 6, 4, 1}, true, 3},
    {{8, 6, 4, 1}, false, 4},
  };
  for (auto& c : cases) {
    // No hidden pre-activation within 2h of 0 (as in mlp_test.cpp); below,
    // a central difference across a kink is detected and counted.
    problem pr{c.layers, c.mean, c.seed, 2.0 * h};
    INFO("layers " << Catch::Detail::stringify(c.layers) << ", mean "
                   << c.mean << ", drawn " << pr.draws << " times");
    REQUIRE(reference_forward(pr).min_abs_pre_activation >= 2.0 * h);
    auto ws = pr.net.make_workspace(pr.batch.rows);
    std::vector<float> dense_grad(pr.params.size(),
                                  std::numeric_limits<float>::quiet_NaN());
    auto base = reference_forward(pr);
    CHECK(pr.net.loss_and_gradient({pr.params.data(), &pr.tables}, pr.batch,
                                   dense_grad.data(), *ws)
          == Approx(base.mean_loss(pr.batch.labels)).epsilon(1e-5));
    std::vector<float> scratch(pr.params.size());
    auto loss_at = [&] {
      for (auto& t : pr.tables)
        std::fill(t.grad.begin(), t.grad.end(), 0.0f);
      return pr.net.loss_and_gradient({pr.params.data(), &pr.tables},
                                       pr.batch, scratch.data(), *ws);
    };
    // Every parameter: the pulled rows (user 3, tag 7 and tag 9 are shared
    // by examples), then the tower's.
    struct parameter {
      float* value;
      double analytic;
    };
    std::vector<parameter> params;
    for (auto& t : pr.tables)
      for (size_t i = 0; i < t.rows.size(); ++i)
        params.push_back({&t.rows[i], t.grad[i]});
    for (size_t i = 0; i < pr.params.size(); ++i)
      params.push_back({&pr.params[i], dense_grad[i]});
    REQUIRE(params.size() == (2 + 3) * 3 + pr.params.size());
    size_t skipped = 0, failed = 0, failed_10 = 0;
    double max_abs_grad = 0, shared_row_grad = 0;
    for (size_t k = 0; k < params.size(); ++k) {
      auto& p = params[k];
      REQUIRE(std::isfinite(p.analytic));
      float w = *p.value;
      *p.value = w + h;
      double plus = loss_at();
      bool kink = reference_forward(pr).pattern != base.pattern;
      *p.value = w - h;
      double minus = loss_at();
      kink = kink || reference_forward(pr).pattern != base.pattern;
      *p.value = w;
      if (kink) {
        ++skipped;
        continue;
      }
      double numeric = (plus - minus) / (2.0 * double{h});
      max_abs_grad = std::max(max_abs_grad, std::abs(p.analytic));
      if (k < 3 || (k >= 6 && k < 9)) // user 3's row, tag 7's row
        shared_row_grad = std::max(shared_row_grad, std::abs(p.analytic));
      if (!within_tolerance(p.analytic, numeric)) {
        ++failed;
        UNSCOPED_INFO("parameter " << k << ": analytic " << p.analytic
                                   << ", numeric " << numeric);
      }
      if (!within_tolerance(1.1 * p.analytic, numeric))
        ++failed_10;
    }
    CHECK(failed == 0);
    CHECK(skipped == 0);
    CHECK(max_abs_grad > 20 * abs_tolerance);
    CHECK(shared_row_grad > 20 * abs_tolerance);
    CHECK(failed_10 > 0); // sharp enough to see a 10% error
  }
}

TEST_CASE("a row gradient of a batch is the mean of its examples' row "
          "gradients, summed over duplicate keys",
          "[models][embedding_mlp]") {
  problem pr{{8, 5, 1}, false, 9};
  auto ws = pr.net.make_workspace(pr.batch.rows);
  std::vector<float> grad(pr.params.size());
  pr.net.loss_and_gradient({pr.params.data(), &pr.tables}, pr.batch,
                           grad.data(), *ws);
  // key -> summed row gradient of the one-example batches, per table.
  std::vector<std::map<uint64_t, std::vector<double>>> sum(2);
  for (uint64_t r = 0; r < pr.batch.rows; ++r) {
    example_batch one;
    one.reset(pr.batch.dense_dim, 2);
    one.append_row(pr.batch, r);
    auto tables = pull(pr.net, one, pr.store);
    std::vector<float> g(pr.params.size());
    pr.net.loss_and_gradient({pr.params.data(), &tables}, one, g.data(), *ws);
    for (size_t t = 0; t < 2; ++t)
      for (size_t p = 0; p < tables[t].keys.size(); ++p) {
        auto& acc = sum[t][tables[t].keys[p]];
        acc.resize(pr.dim);
        for (uint64_t j = 0; j < pr.dim; ++j)
          acc[j] += tables[t].grad[p * pr.dim + j];
      }
  }
  for (size_t t = 0; t < 2; ++t) {
    auto& lookup = pr.tables[t];
    REQUIRE(sum[t].size() == lookup.keys.size());
    for (size_t p = 0; p < lookup.keys.size(); ++p)
      for (uint64_t j = 0; j < pr.dim; ++j) {
        INFO("table " << t << ", key " << lookup.keys[p] << ", column " << j);
        CHECK(lookup.grad[p * pr.dim + j]
              == Approx(sum[t][lookup.keys[p]][j] / 4).margin(1e-7));
      }
  }
}

TEST_CASE("embedding_mlp's forward pass in stages, one per tower layer, "
          "gives the loss and the dense and row gradients of the whole pass",
          "[models][embedding_mlp][stages]") {
  problem pr{{8, 6, 4, 1}, true, 5};
  auto stages = pr.net.forward_stages();
  REQUIRE(stages == std::vector<uint64_t>{8 * 6 + 6, 54 + 6 * 4 + 4,
                                          82 + 4 * 1 + 1});
  REQUIRE(stages.back() == pr.params.size());
  auto run = [&](uint32_t done) {
    auto ws = pr.net.make_workspace(pr.batch.rows);
    for (auto& t : pr.tables)
      std::fill(t.grad.begin(), t.grad.end(), 0.0f);
    // What lies after a stage's prefix is garbage until the stages that
    // read it.
    std::vector<float> partial(pr.params.size(), std::nanf(""));
    for (uint32_t s = 0; s < done; ++s) {
      std::copy(pr.params.begin(), pr.params.begin() + stages[s],
                partial.begin());
      pr.net.forward_stage({partial.data(), &pr.tables, 0}, pr.batch, s, *ws);
    }
    partial = pr.params;
    std::vector<float> grad(pr.params.size());
    auto loss = pr.net.loss_and_gradient({partial.data(), &pr.tables, done},
                                         pr.batch, grad.data(), *ws);
    std::vector<float> rows;
    for (auto& t : pr.tables)
      rows.insert(rows.end(), t.grad.begin(), t.grad.end());
    return std::make_tuple(loss, grad, rows);
  };
  auto whole = run(0);
  for (uint32_t done = 1; done <= 3; ++done) {
    INFO(done << " stages run before");
    CHECK(run(done) == whole);
  }
}

