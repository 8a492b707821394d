#include "core/synthetic_ctr.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/options.hpp"

using namespace actorps;

namespace {

/// A small log: 3 dense features, fields of 10^7, 1000 and 10 keys.
synthetic_ctr_config small_config(uint64_t seed = 1) {
  synthetic_ctr_config cfg;
  cfg.dense_features = 3;
  cfg.cardinalities = {10'000'000, 1000, 10};
  cfg.rows_per_epoch = 100;
  cfg.test_rows = 50;
  cfg.seed = seed;
  return cfg;
}

std::shared_ptr<const synthetic_ctr> make(const synthetic_ctr_config& cfg) {
  return std::make_shared<const synthetic_ctr>(cfg);
}

/// `n` batches of `src`, one after another.
std::vector<example_batch> take(batch_source& src, size_t n) {
  std::vector<example_batch> result(n);
  for (auto& b : result)
    src.next(b);
  return result;
}

bool same(const example_batch& a, const example_batch& b) {
  if (a.rows != b.rows || a.dense != b.dense || a.labels != b.labels
      || a.fields.size() != b.fields.size())
    return false;
  for (size_t f = 0; f < a.fields.size(); ++f)
    if (a.fields[f].keys != b.fields[f].keys
        || a.fields[f].offsets != b.fields[f].offsets)
      return false;
  return true;
}

bool same(const std::vector<example_batch>& a,
          const std::vector<example_batch>& b) {
  return a.size() == b.size()
         && std::equal(a.begin(), a.end(), b.begin(),
                       [](auto& x, auto& y) { return same(x, y); });
}

/// Area under the ROC curve of `scores` for binary `labels` (no ties in
/// the scores expected: they are doubles of continuous values).
double auc(const std::vector<double>& scores,
           const std::vector<int32_t>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double rank_sum = 0, pos = 0;
  for (size_t i = 0; i < order.size(); ++i)
    if (labels[order[i]] == 1) {
      rank_sum += static_cast<double>(i + 1);
      pos += 1;
    }
  double neg = static_cast<double>(scores.size()) - pos;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

} // namespace

TEST_CASE("the same seed gives the same batches and another seed others",
          "[core][synthetic_ctr]") {
  auto gen = make(small_config());
  synthetic_ctr_source a{gen, input_context{2, 0}, 16, 7};
  synthetic_ctr_source b{make(small_config()), input_context{2, 0}, 16, 7};
  auto ra = take(a, 10);
  auto rb = take(b, 10);
  CHECK(same(ra, rb));
  synthetic_ctr_source c{make(small_config(2)), input_context{2, 0}, 16, 7};
  CHECK_FALSE(same(ra, take(c, 10)));
  // The shuffle seed picks another stream of the same log.
  synthetic_ctr_source d{gen, input_context{2, 0}, 16, 8};
  CHECK_FALSE(same(ra, take(d, 10)));
}

TEST_CASE("different workers read different examples", "[core][synthetic_ctr]") {
  auto gen = make(small_config());
  synthetic_ctr_source w0{gen, input_context{2, 0}, 10, 1};
  synthetic_ctr_source w1{gen, input_context{2, 1}, 10, 1};
  auto r0 = take(w0, 3);
  auto r1 = take(w1, 3);
  for (size_t k = 0; k < 3; ++k) {
    CHECK(r0[k].fields[0].keys != r1[k].fields[0].keys);
    CHECK(r0[k].dense != r1[k].dense);
  }
}

TEST_CASE("the rows of an epoch are split over the workers as shards are",
          "[core][synthetic_ctr]") {
  auto cfg = small_config();
  cfg.rows_per_epoch = 10;
  auto gen = make(cfg);
  CHECK(synthetic_ctr_source(gen, input_context{3, 0}, 1, 1).shard_rows() == 4);
  CHECK(synthetic_ctr_source(gen, input_context{3, 1}, 1, 1).shard_rows() == 3);
  CHECK(synthetic_ctr_source(gen, input_context{3, 2}, 1, 1).shard_rows() == 3);
  CHECK_THROWS_WITH(synthetic_ctr_source(gen, input_context{3, 2}, 4, 1),
                    Catch::Contains("data.batch_size")
                      && Catch::Contains("3 rows"));
  CHECK_THROWS_AS(synthetic_ctr_source(gen, input_context{3, 2}, 0, 1),
                  input_error);
}

TEST_CASE("batches run across epochs, each epoch with new examples",
          "[core][synthetic_ctr]") {
  auto cfg = small_config();
  cfg.rows_per_epoch = 8; // 4 per worker
  auto gen = make(cfg);
  synthetic_ctr_source src{gen, input_context{2, 1}, 3, 5};
  example_batch b;
  src.next(b); // rows 0..2 of epoch 0
  CHECK(src.position().epoch == 0);
  CHECK(src.position().offset == 3);
  src.next(b); // row 3 of epoch 0, rows 0..1 of epoch 1
  CHECK(b.rows == 3);
  CHECK(src.position().epoch == 1);
  CHECK(src.position().offset == 2);
  // Row k of the batch is a pure function of (worker, epoch, offset).
  example_batch one;
  one.reset(3, 3);
  gen->append_train(one, 5, 1, 0, 3);
  gen->append_train(one, 5, 1, 1, 0);
  CHECK(std::vector<float>(b.dense.begin(), b.dense.begin() + 6) == one.dense);
  CHECK(b.fields[0].keys[0] == one.fields[0].keys[0]);
  CHECK(b.fields[0].keys[1] == one.fields[0].keys[1]);
  // Epoch 1 is not epoch 0 again.
  example_batch e0;
  e0.reset(3, 3);
  gen->append_train(e0, 5, 1, 0, 0);
  CHECK(std::vector<float>(e0.dense.begin(), e0.dense.end())
        != std::vector<float>(one.dense.begin() + 3, one.dense.end()));
}

TEST_CASE("seeking to a saved position reproduces the batches that followed",
          "[core][synthetic_ctr]") {
  auto gen = make(small_config()); // 50 rows per worker
  for (size_t skip : {0, 1, 3, 7}) {
    INFO("position after " << skip << " batches");
    synthetic_ctr_source src{gen, input_context{2, 1}, 16, 3};
    take(src, skip);
    auto pos = src.position();
    auto expected = take(src, 6);
    src.seek(pos);
    CHECK(same(take(src, 6), expected));
    synthetic_ctr_source fresh{gen, input_context{2, 1}, 16, 3};
    fresh.seek(pos);
    CHECK(fresh.position().epoch == pos.epoch);
    CHECK(fresh.position().offset == pos.offset);
    CHECK(same(take(fresh, 6), expected));
  }
  synthetic_ctr_source src{gen, input_context{2, 1}, 16, 3};
  CHECK_NOTHROW(src.seek(data_position{4, 50}));
  CHECK_THROWS_AS(src.seek(data_position{0, 51}), input_error);
}

TEST_CASE("synthetic examples fit the schema and keys stay within each "
          "field's cardinality",
          "[core][synthetic_ctr]") {
  auto gen = make(small_config());
  const auto& s = gen->schema();
  CHECK(s.dense_dim == 3);
  REQUIRE(s.fields.size() == 3);
  CHECK(s.fields[0].name == "C1");
  CHECK(s.fields[2].name == "C3");
  CHECK(s.fields[0].vocabulary == 10'000'000);
  CHECK(s.fields[2].vocabulary == 10);
  CHECK_FALSE(s.fields[0].weighted);
  CHECK(s.labels == label_kind::binary);
  synthetic_ctr_source src{gen, input_context{1, 0}, 64, 1};
  example_batch b;
  for (int k = 0; k < 20; ++k) {
    src.next(b);
    REQUIRE_NOTHROW(b.check("batch"));
    REQUIRE(b.rows == 64);
    for (size_t f = 0; f < 3; ++f) {
      REQUIRE(b.fields[f].keys.size() == 64); // one key per example
      for (auto key : b.fields[f].keys)
        REQUIRE(key < s.fields[f].vocabulary);
    }
    for (auto d : b.dense)
      REQUIRE((std::isfinite(d) && d >= 0.0f && d < 40.0f));
    for (auto y : b.labels)
      REQUIRE((y == 0 || y == 1));
  }
  auto test = gen->make_test_set(gen->config().test_rows);
  CHECK(test.rows() == 50);
  CHECK_NOTHROW(test.examples.check("test"));
  CHECK(test.schema.fields.size() == 3);
}

TEST_CASE("a batch refilled from a synthetic source keeps its memory",
          "[core][synthetic_ctr]") {
  auto gen = make(small_config());
  synthetic_ctr_source src{gen, input_context{1, 0}, 32, 1};
  example_batch b;
  src.next(b);
  const auto* dense = b.dense.data();
  const auto* keys = b.fields[1].keys.data();
  const auto* labels = b.labels.data();
  for (int k = 0; k < 20; ++k) {
    src.next(b);
    REQUIRE(b.dense.data() == dense);
    REQUIRE(b.fields[1].keys.data() == keys);
    REQUIRE(b.labels.data() == labels);
  }
}

TEST_CASE("zipf_sampler draws each value with its Zipf probability",
          "[core][synthetic_ctr]") {
  struct uniform {
    uint64_t state;
    double operator()() {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<double>(state >> 11) * 0x1.0p-53;
    }
  };
  for (double s : {0.0, 0.5, 1.0, 1.05, 2.0}) {
    INFO("exponent " << s);
    const uint64_t n = 10;
    zipf_sampler zipf{n, s};
    uniform u{42};
    const int draws = 200'000;
    std::vector<double> count(n + 1, 0);
    int out_of_range = 0;
    for (int i = 0; i < draws; ++i) {
      auto k = zipf(u);
      if (k >= 1 && k <= n)
        count[k] += 1;
      else
        ++out_of_range;
    }
    CHECK(out_of_range == 0);
    double norm = 0;
    for (uint64_t k = 1; k <= n; ++k)
      norm += std::pow(static_cast<double>(k), -s);
    for (uint64_t k = 1; k <= n; ++k) {
      double p = std::pow(static_cast<double>(k), -s) / norm;
      double sd = std::sqrt(p * (1 - p) / draws);
      INFO("k = " << k << ": expected " << p << ", got " << count[k] / draws);
      CHECK(std::abs(count[k] / draws - p) < 5 * sd);
    }
  }
  // n = 1 has one value.
  zipf_sampler one{1, 1.05};
  uniform u{1};
  for (int i = 0; i < 100; ++i)
    REQUIRE(one(u) == 1);
}

TEST_CASE("the keys of a field of 10^7 values are skewed: a few are hot",
          "[core][synthetic_ctr]") {
  auto gen = make(small_config());
  auto test = gen->make_test_set(20'000);
  const auto& keys = test.examples.fields[0].keys;
  auto hottest = std::count(keys.begin(), keys.end(), uint64_t{0});
  // Zipf(10^7, 1.05): P(key 0) = 1 / H(10^7, 1.05) = 8.6%, against 1e-7
  // for uniform keys.
  double share = static_cast<double>(hottest) / keys.size();
  CHECK(share > 0.07);
  CHECK(share < 0.10);
  // ... while most keys are seen once or never.
  auto sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  auto distinct = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
  CHECK(distinct > 5'000);
}

TEST_CASE("the default log clicks 20-30% of the time and its labels are "
          "learnable (Bayes AUC about 0.79)",
          "[core][synthetic_ctr]") {
  synthetic_ctr_config cfg; // the defaults: 13 dense, 26 fields
  synthetic_ctr gen{cfg};
  CHECK(gen.schema().dense_dim == 13);
  CHECK(gen.schema().fields.size() == 26);
  CHECK(gen.schema().fields[0].vocabulary == 10'000'000);
  std::vector<double> logits;
  auto test = gen.make_test_set(20'000, &logits);
  double clicks = std::accumulate(test.examples.labels.begin(),
                                  test.examples.labels.end(), 0.0);
  double rate = clicks / test.rows();
  CHECK(rate > 0.20);
  CHECK(rate < 0.30);
  // Scoring by the true logit is the best any model can do.
  double bayes = auc(logits, test.examples.labels);
  INFO("click rate " << rate << ", Bayes AUC " << bayes);
  CHECK(bayes > 0.74);
  CHECK(bayes < 0.84);
  // The mean predicted probability matches the click rate (calibration).
  double mean_p = 0;
  for (auto t : logits)
    mean_p += 1 / (1 + std::exp(-t));
  CHECK(mean_p / test.rows() == Approx(rate).margin(0.015));
}

TEST_CASE("synthetic_ctr options are read with defaults and checked",
          "[core][synthetic_ctr]") {
  {
    option_map none;
    option_reader opts{none, "data", "synthetic_ctr"};
    auto cfg = read_synthetic_ctr_config(opts);
    CHECK(cfg.dense_features == 13);
    CHECK(cfg.cardinalities.size() == 26);
    CHECK(*std::max_element(cfg.cardinalities.begin(), cfg.cardinalities.end())
          == 10'000'000);
    CHECK(cfg.zipf == 1.05);
    CHECK(cfg.rows_per_epoch == 1'000'000);
    CHECK(cfg.test_rows == 20'000);
  }
  {
    option_map some{{"dense_features", "0"},
                    {"cardinalities", "[5, 1e3]"},
                    {"zipf", "0.8"},
                    {"rows_per_epoch", "1000"},
                    {"test_rows", "10"},
                    {"seed", "99"}};
    option_reader opts{some, "data", "synthetic_ctr"};
    auto cfg = read_synthetic_ctr_config(opts);
    CHECK_NOTHROW(opts.finish());
    CHECK(cfg.dense_features == 0);
    CHECK(cfg.cardinalities == std::vector<uint64_t>{5, 1000});
    CHECK(cfg.zipf == 0.8);
    CHECK(cfg.seed == 99);
    synthetic_ctr gen{cfg}; // no dense features is fine
    CHECK(gen.make_test_set(10).examples.dense.empty());
  }
  struct bad_case {
    const char* field;
    const char* text;
    const char* message;
  };
  const std::vector<bad_case> cases{
    {"cardinalities", "[]", "data.cardinalities: needs 1 to 1024 fields"},
    {"cardinalities", "[10, 0]", "data.cardinalities: element 1 (0) is out "
                                 "of range"},
    {"cardinalities", "10", "data.cardinalities: must be an array"},
    {"zipf", "-1", "data.zipf: -1 is out of range"},
    {"zipf", "\"high\"", "data.zipf: must be a number"},
    {"rows_per_epoch", "0", "data.rows_per_epoch: 0 is out of range"},
    {"dense_features", "2.5", "data.dense_features: must be a whole number"},
  };
  for (auto& c : cases) {
    INFO(c.field << " = " << c.text);
    option_map bad{{c.field, c.text}};
    option_reader opts{bad, "data", "synthetic_ctr"};
    CHECK_THROWS_WITH(read_synthetic_ctr_config(opts),
                      Catch::StartsWith(c.message));
  }
}
