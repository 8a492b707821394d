// A model's results must not depend on where the caller's buffers lie. The
// parameters and the dense gradient are raw pointers (a worker's pulled
// values, its gradient buffer), so malloc decides their address modulo the
// vector width; before the fix, dense_tower summed the bias gradient with
// Eigen's colwise().sum() straight into the caller's buffer, whose columns
// in whole packets were summed as a tree and the rest row after row, and a
// simulated run changed with the length of an unrelated argument.

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "core/example_batch.hpp"
#include "models/embedding_mlp.hpp"
#include "models/mlp.hpp"
#include "models/sparse_logreg.hpp"

using namespace actorps;

namespace {

/// Float offsets into a buffer: 16 of them give every address modulo 64
/// bytes (an AVX-512 vector, two AVX ones) that a float can have.
constexpr size_t offsets = 16;

/// What one loss_and_gradient() and one evaluate() give.
struct outcome {
  double loss = 0;
  std::vector<float> dense_grad;
  std::vector<std::vector<float>> table_grads;
  double eval_loss = 0;
  uint64_t eval_correct = 0;
  std::vector<float> eval_scores;
};

/// Bit for bit: memcmp, not ==, so that -0 and 0 differ too.
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size()
         && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

/// Runs `net` on `batch` with the parameters copied to float `param_at` of
/// a larger buffer and the gradient written at float `grad_at` of another.
outcome run_at(const model& net, const std::vector<float>& params,
               const example_batch& batch,
               const std::vector<table_lookup>& pulled, size_t param_at,
               size_t grad_at) {
  auto n = params.size();
  std::vector<float> pbuf(n + offsets), gbuf(n + offsets, -1.0f);
  std::copy(params.begin(), params.end(), pbuf.begin() + param_at);
  auto tables = pulled;
  model_inputs in{pbuf.data() + param_at, &tables};
  auto ws = net.make_workspace(batch.rows);
  outcome out;
  out.loss = net.loss_and_gradient(in, batch, gbuf.data() + grad_at, *ws);
  out.dense_grad.assign(gbuf.begin() + grad_at, gbuf.begin() + grad_at + n);
  for (auto& t : tables)
    out.table_grads.push_back(t.grad);
  eval_accumulator acc;
  net.evaluate(in, batch, acc, *ws);
  out.eval_loss = acc.loss_sum;
  out.eval_correct = acc.correct;
  out.eval_scores = acc.scores;
  return out;
}

/// Checks that every placement of parameters and gradient gives the result
/// of placement (0, 0), bit for bit.
void check_placement_free(const model& net, const std::vector<float>& params,
                          const example_batch& batch,
                          const std::vector<table_lookup>& tables) {
  auto ref = run_at(net, params, batch, tables, 0, 0);
  for (size_t p = 0; p < offsets; ++p) {
    for (size_t g = 0; g < offsets; ++g) {
      INFO("parameters at float " << p << ", gradient at float " << g);
      auto got = run_at(net, params, batch, tables, p, g);
      CHECK(same_bits(got.loss, ref.loss));
      CHECK(same_bits(got.dense_grad, ref.dense_grad));
      REQUIRE(got.table_grads.size() == ref.table_grads.size());
      for (size_t t = 0; t < ref.table_grads.size(); ++t)
        CHECK(same_bits(got.table_grads[t], ref.table_grads[t]));
      CHECK(same_bits(got.eval_loss, ref.eval_loss));
      CHECK(got.eval_correct == ref.eval_correct);
      CHECK(same_bits(got.eval_scores, ref.eval_scores));
    }
  }
}

std::vector<float> uniform(size_t n, float scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d{-scale, scale};
  std::vector<float> v(n);
  for (auto& x : v)
    x = d(rng);
  return v;
}

/// `rows` examples of `dense_dim` dense features and `classes` classes (no
/// fields).
example_batch dense_batch(uint64_t rows, uint64_t dense_dim, int32_t classes,
                          std::mt19937_64& rng) {
  example_batch b;
  b.reset(dense_dim, 0);
  b.rows = rows;
  b.dense = uniform(rows * dense_dim, 1.0f, rng);
  for (uint64_t r = 0; r < rows; ++r)
    b.labels.push_back(static_cast<int32_t>(r % classes));
  b.check("test batch");
  return b;
}

/// Two sparse fields ("user": one key per row, "tags": weighted, 0-3 keys),
/// three dense features, 0/1 labels.
data_schema ctr_schema() {
  data_schema s;
  s.dense_dim = 3;
  s.fields = {{"user", 20, false}, {"tags", 0, true}};
  s.labels = label_kind::binary;
  return s;
}

example_batch ctr_batch(uint64_t rows, std::mt19937_64& rng) {
  std::uniform_int_distribution<uint64_t> user{0, 19}, tag{100, 110};
  std::uniform_real_distribution<float> value{0.25f, 2.0f};
  example_batch b;
  b.reset(3, 2);
  b.rows = rows;
  for (uint64_t r = 0; r < rows; ++r) {
    b.fields[0].keys.push_back(user(rng));
    b.fields[0].offsets.push_back(b.fields[0].keys.size());
    for (uint64_t k = 0; k < r % 4; ++k) {
      b.fields[1].keys.push_back(tag(rng));
      b.fields[1].values.push_back(value(rng));
    }
    b.fields[1].offsets.push_back(b.fields[1].keys.size());
    b.labels.push_back(static_cast<int32_t>(r % 3 == 0));
  }
  b.dense = uniform(rows * 3, 1.0f, rng);
  b.check("test batch");
  return b;
}

/// What a worker pulls for `batch`: one table_lookup per table variable,
/// deduplicated, rows U(-0.5, 0.5).
std::vector<table_lookup> pulled_tables(const model& net,
                                        const example_batch& batch,
                                        std::mt19937_64& rng) {
  std::vector<table_lookup> tables;
  auto vars = net.variables();
  for (uint32_t i = 0; i < vars.size(); ++i)
    if (vars[i].kind == variable_kind::table) {
      tables.emplace_back();
      tables.back().variable = i;
      tables.back().dim = vars[i].cols;
    }
  net.collect_keys(batch, tables);
  for (auto& t : tables) {
    t.deduplicate();
    t.rows = uniform(t.rows.size(), 0.5f, rng);
  }
  return tables;
}

} // namespace

TEST_CASE("the mlp's loss, gradient and evaluation are bit for bit the same "
          "wherever its parameters and gradient buffer lie",
          "[models][alignment]") {
  // Widths that are no multiple of the vector width, so that every offset
  // splits each bias differently into packets and single floats; more than
  // 4 rows, so that a packet-wise column sum (a tree over 4 rows at a time)
  // differs from a row-after-row one.
  std::mt19937_64 rng{11};
  mlp net{{29, 37, 19, 10}};
  std::vector<float> params(net.dense_parameters());
  net.initialize(params.data(), 3);
  // Random biases: initialize() leaves them at zero.
  for (auto& x : params)
    if (x == 0.0f)
      x = uniform(1, 0.1f, rng)[0];
  for (uint64_t rows : {9u, 33u}) {
    INFO(rows << " rows");
    auto batch = dense_batch(rows, 29, 10, rng);
    check_placement_free(net, params, batch, {});
  }
}

TEST_CASE("embedding_mlp's and sparse logistic regression's loss, gradients "
          "and evaluation are bit for bit the same wherever their parameters "
          "and gradient buffer lie",
          "[models][alignment]") {
  std::mt19937_64 rng{12};
  auto schema = ctr_schema();
  auto batch = ctr_batch(13, rng);
  SECTION("embedding_mlp") {
    embedding_mlp net{schema, {2 * 5 + 3, 21, 11, 1}, 5, true, 0.05f};
    std::vector<float> params(net.dense_parameters());
    net.initialize(params.data(), 4);
    for (auto& x : params)
      if (x == 0.0f)
        x = uniform(1, 0.1f, rng)[0];
    check_placement_free(net, params, batch, pulled_tables(net, batch, rng));
  }
  SECTION("sparse_logistic_regression") {
    sparse_logreg net{schema};
    auto params = uniform(net.dense_parameters(), 0.5f, rng);
    check_placement_free(net, params, batch, pulled_tables(net, batch, rng));
  }
}
