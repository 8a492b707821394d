#include "core/table_store.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/update_rule.hpp"

using namespace actorps;


namespace {

/// Plain SGD, no slots: w -= lr * g.
class test_sgd : public update_rule {
public:
  explicit test_sgd(float lr) : lr_(lr) {
  }

  const std::string& name() const override {
    return name_;
  }

  size_t slot_count() const override {
    return 0;
  }

  void apply(float* w, float* const*, const float* g, size_t n,
             uint64_t) const override {
    for (size_t j = 0; j < n; ++j)
      w[j] -= lr_ * g[j];
  }

  std::string describe() const override {
    return "test_sgd";
  }

private:
  std::string name_ = "test_sgd";
  float lr_;
};

/// Records what it is given: w[j] = t (the row's step number) and slot 0
/// counts the updates (starting at 0.5, to see slot_init at work).
class test_count : public update_rule {
public:
  const std::string& name() const override {
    return name_;
  }

  size_t slot_count() const override {
    return 1;
  }

  float slot_init(size_t) const override {
    return 0.5f;
  }

  void apply(float* w, float* const* slots, const float*, size_t n,
             uint64_t t) const override {
    for (size_t j = 0; j < n; ++j) {
      w[j] = static_cast<float>(t);
      slots[0][j] += 1.0f;
    }
  }

  std::string describe() const override {
    return "test_count";
  }

private:
  std::string name_ = "test_count";
};

table_shard_def make_def(uint64_t dim = 4, uint64_t vocabulary = 0,
                         float init_scale = 0.05f, uint64_t seed = 7,
                         std::string variable = "emb") {
  table_shard_def def;
  def.variable = std::move(variable);
  def.dim = dim;
  def.vocabulary = vocabulary;
  def.init_scale = init_scale;
  def.seed = seed;
  return def;
}

std::vector<float> initial(const table_shard_def& def, uint64_t key) {
  std::vector<float> row(def.dim);
  initial_row(def, key, row.data());
  return row;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size()
         && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool same_contents(const table_store::contents& a,
                   const table_store::contents& b) {
  if (a.slots.size() != b.slots.size())
    return false;
  for (size_t s = 0; s < a.slots.size(); ++s)
    if (!same_bits(a.slots[s], b.slots[s]))
      return false;
  return a.keys == b.keys && same_bits(a.values, b.values)
         && a.steps == b.steps;
}

} // namespace

TEST_CASE("a row created on two stores, by a pull on one and a push on the "
          "other, starts bit-identical",
          "[core][table_store]") {
  auto def = make_def(16);
  table_store pulled{def, std::make_shared<test_sgd>(0.1f)};
  table_store pushed{def, std::make_shared<test_sgd>(0.1f)};
  const std::vector<uint64_t> keys{0, 1, 42, 0xdeadbeefcafef00dULL,
                                   UINT64_MAX};
  std::vector<float> a(keys.size() * def.dim);
  pulled.pull(keys.data(), keys.size(), a.data(), true);
  // A zero gradient leaves SGD's weights as they are, bit for bit.
  std::vector<float> zeros(keys.size() * def.dim, 0.0f);
  pushed.apply(keys.data(), keys.size(), zeros.data());
  std::vector<float> b(keys.size() * def.dim);
  pushed.pull(keys.data(), keys.size(), b.data(), false);
  CHECK(same_bits(a, b));
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO("key " << keys[i]);
    std::vector<float> row(a.begin() + i * def.dim,
                           a.begin() + (i + 1) * def.dim);
    CHECK(same_bits(row, initial(def, keys[i])));
    for (uint64_t j = 0; j < def.dim; ++j)
      CHECK(initial_row_value(def, keys[i], j) == row[j]);
  }
}

// (No unbalanced bracket in a test name: CTest's Catch discovery reads the
// names as a CMake list, where one swallows the names after it.)
TEST_CASE("initial rows are uniform between -init_scale and init_scale and "
          "depend on seed, variable and key",
          "[core][table_store]") {
  auto def = make_def(16, 0, 0.25f);
  double sum = 0;
  double sum_sq = 0;
  float lo = 1, hi = -1;
  const uint64_t rows = 20000;
  for (uint64_t key = 0; key < rows; ++key)
    for (auto x : initial(def, key)) {
      sum += x;
      sum_sq += static_cast<double>(x) * x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  double n = rows * def.dim;
  CHECK(lo >= -0.25f);
  CHECK(hi < 0.25f);
  CHECK(lo < -0.249f);
  CHECK(hi > 0.249f);
  CHECK(std::abs(sum / n) < 0.002);
  // Var of U(-a, a) is a^2 / 3.
  CHECK(sum_sq / n == Approx(0.25 * 0.25 / 3).epsilon(0.01));
  auto base = initial(def, 5);
  CHECK(!same_bits(base, initial(def, 6)));
  CHECK(!same_bits(base, initial(make_def(16, 0, 0.25f, 8), 5)));
  CHECK(!same_bits(base, initial(make_def(16, 0, 0.25f, 7, "emb2"), 5)));
  // The scale multiplies the same draws.
  auto half = initial(make_def(16, 0, 0.125f), 5);
  for (size_t j = 0; j < base.size(); ++j)
    CHECK(half[j] == base[j] / 2);
}

TEST_CASE("an init_scale of 0 creates rows of positive zeros",
          "[core][table_store]") {
  auto def = make_def(8, 0, 0.0f);
  table_store store{def, nullptr};
  std::vector<uint64_t> keys{3, 9};
  std::vector<float> out(16, 1.0f);
  store.pull(keys.data(), keys.size(), out.data(), true);
  CHECK(same_bits(out, std::vector<float>(16, 0.0f)));
  CHECK(initial_row_value(def, 3, 0) == 0.0f);
  CHECK(!std::signbit(initial_row_value(def, 3, 0)));
}

TEST_CASE("a pull without create returns initial rows but inserts nothing",
          "[core][table_store]") {
  auto def = make_def(4);
  table_store store{def, nullptr};
  std::vector<uint64_t> keys{10, 20, 30};
  std::vector<float> out(12);
  auto bytes = store.memory_bytes();
  store.pull(keys.data(), keys.size(), out.data(), false);
  CHECK(store.size() == 0);
  CHECK(store.memory_bytes() == bytes);
  CHECK(store.export_rows().keys.empty());
  std::vector<float> expected;
  for (auto k : keys)
    for (auto x : initial(def, k))
      expected.push_back(x);
  CHECK(same_bits(out, expected));
  // Mixed: one existing row, one missing.
  uint64_t k20 = 20;
  std::vector<float> row(4);
  store.pull(&k20, 1, row.data(), true);
  CHECK(store.size() == 1);
  store.pull(keys.data(), keys.size(), out.data(), false);
  CHECK(store.size() == 1);
  CHECK(same_bits(out, expected));
  CHECK(store.memory_bytes() > bytes);
}

TEST_CASE("each row counts its own updates and only touched rows move",
          "[core][table_store]") {
  auto def = make_def(3);
  table_store store{def, std::make_shared<test_count>()};
  std::vector<float> grad(3 * def.dim, 1.0f);
  auto push = [&](std::vector<uint64_t> keys) {
    store.apply(keys.data(), keys.size(), grad.data());
  };
  push({1, 2});
  push({2, 3});
  push({2});
  // Key 4 is only read: it exists but never took a step.
  uint64_t k4 = 4;
  std::vector<float> row(def.dim);
  store.pull(&k4, 1, row.data(), true);
  auto c = store.export_rows();
  REQUIRE(c.keys == std::vector<uint64_t>{1, 2, 3, 4}); // insertion order
  CHECK(c.steps == std::vector<uint64_t>{1, 3, 1, 0});
  REQUIRE(c.slots.size() == 1);
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < def.dim; ++j) {
      // test_count writes t into the row and counts updates in its slot.
      CHECK(c.values[i * def.dim + j] == static_cast<float>(c.steps[i]));
      CHECK(c.slots[0][i * def.dim + j] == 0.5f + c.steps[i]);
    }
  CHECK(same_bits(std::vector<float>(c.values.begin() + 9, c.values.end()),
                  initial(def, 4)));
  CHECK(same_bits(std::vector<float>(c.slots[0].begin() + 9,
                                     c.slots[0].end()),
                  std::vector<float>(def.dim, 0.5f)));
}

TEST_CASE("apply scales the gradient before the rule sees it",
          "[core][table_store]") {
  auto def = make_def(5);
  const float lr = 0.1f;
  std::vector<uint64_t> keys{11, 12};
  std::vector<float> grad{1, 2, 3, 4, 5, -1, -2, -3, -4, -5};
  for (float scale : {1.0f, 0.25f, -3.0f}) {
    INFO("scale " << scale);
    table_store store{def, std::make_shared<test_sgd>(lr)};
    store.apply(keys.data(), keys.size(), grad.data(), scale);
    std::vector<float> out(10);
    store.pull(keys.data(), keys.size(), out.data(), false);
    for (size_t i = 0; i < 2; ++i) {
      auto init = initial(def, keys[i]);
      for (size_t j = 0; j < def.dim; ++j) {
        auto g = grad[i * def.dim + j] * scale;
        CHECK(out[i * def.dim + j] == init[j] - lr * g);
      }
    }
  }
}

TEST_CASE("a staleness-aware step moves each row by that share of the "
          "rule's step",
          "[core][table_store]") {
  auto def = make_def(5);
  const float lr = 0.1f;
  std::vector<uint64_t> keys{11, 12};
  std::vector<float> grad{1, 2, 3, 4, 5, -1, -2, -3, -4, -5};
  table_store store{def, std::make_shared<test_sgd>(lr)};
  store.apply(keys.data(), keys.size(), grad.data(), 2.0f, 0.25f);
  std::vector<float> out(10);
  store.pull(keys.data(), keys.size(), out.data(), false);
  for (size_t i = 0; i < 2; ++i) {
    auto init = initial(def, keys[i]);
    for (size_t j = 0; j < def.dim; ++j) {
      auto g = grad[i * def.dim + j] * 2.0f;
      CHECK(out[i * def.dim + j] == Approx(init[j] - 0.25f * lr * g));
    }
  }
}

TEST_CASE("rows keep their values while the store grows by many rows",
          "[core][table_store]") {
  auto def = make_def(16);
  table_store store{def, std::make_shared<test_sgd>(1.0f)};
  std::mt19937_64 rng{3};
  std::vector<uint64_t> keys(50000);
  for (auto& k : keys)
    k = rng();
  std::set<uint64_t> unique(keys.begin(), keys.end());
  REQUIRE(unique.size() == keys.size());
  std::vector<float> first(keys.size() * def.dim);
  for (size_t b = 0; b < keys.size(); b += 1000)
    store.pull(keys.data() + b, 1000, first.data() + b * def.dim, true);
  CHECK(store.size() == keys.size());
  std::vector<float> again(first.size());
  store.pull(keys.data(), keys.size(), again.data(), true);
  CHECK(store.size() == keys.size());
  CHECK(same_bits(first, again));
  size_t wrong = 0;
  for (size_t i = 0; i < keys.size(); i += 97)
    if (!same_bits(initial(def, keys[i]),
                   std::vector<float>(first.begin() + i * def.dim,
                                      first.begin() + (i + 1) * def.dim)))
      ++wrong;
  CHECK(wrong == 0);
  // Memory: at least the floats and keys, at most a few times that.
  auto floor = keys.size() * (def.dim * sizeof(float) + 16);
  CHECK(store.memory_bytes() >= floor);
  CHECK(store.memory_bytes() < 4 * floor);
}

TEST_CASE("first_invalid_key finds keys outside a fixed vocabulary",
          "[core][table_store]") {
  table_store fixed{make_def(2, 100), nullptr};
  std::vector<uint64_t> ok{0, 99, 50};
  std::vector<uint64_t> bad{0, 99, 100, 5, UINT64_MAX};
  CHECK(fixed.first_invalid_key(ok.data(), ok.size()) == 3);
  CHECK(fixed.first_invalid_key(bad.data(), bad.size()) == 2);
  CHECK(fixed.first_invalid_key(bad.data(), 0) == 0);
  table_store unbounded{make_def(2, 0), nullptr};
  CHECK(unbounded.first_invalid_key(bad.data(), bad.size()) == bad.size());
}

TEST_CASE("a store refuses a zero dimension and apply without a rule",
          "[core][table_store]") {
  CHECK_THROWS_AS((table_store{make_def(0), nullptr}), std::invalid_argument);
  table_store store{make_def(2), nullptr};
  uint64_t key = 1;
  float g[2] = {1, 1};
  CHECK_THROWS_AS(store.apply(&key, 1, g), std::logic_error);
  CHECK(store.size() == 0);
}

TEST_CASE("export then import restores every row, slot and step count",
          "[core][table_store]") {
  auto def = make_def(3, 1000);
  auto rule = std::make_shared<test_count>();
  table_store a{def, rule};
  std::vector<uint64_t> keys{5, 900, 17};
  std::vector<float> grad(9, 1.0f);
  a.apply(keys.data(), 3, grad.data());
  a.apply(keys.data() + 1, 1, grad.data());
  auto exported = a.export_rows();
  table_store b{def, rule};
  uint64_t other = 3; // replaced by the import
  std::vector<float> row(3);
  b.pull(&other, 1, row.data(), true);
  b.import_rows(exported);
  CHECK(same_contents(b.export_rows(), exported));
  CHECK(b.size() == 3);
  std::vector<float> va(9), vb(9);
  a.pull(keys.data(), 3, va.data(), false);
  b.pull(keys.data(), 3, vb.data(), false);
  CHECK(same_bits(va, vb));
  // The imported index works: a further step continues each row's count.
  b.apply(keys.data() + 1, 1, grad.data());
  CHECK(b.export_rows().steps == std::vector<uint64_t>{1, 3, 1});
  // A row that was replaced is gone, and creating it again gives its
  // initial value.
  b.pull(&other, 1, row.data(), false);
  CHECK(b.size() == 3);
  CHECK(same_bits(row, initial(def, other)));
  // A slotless store round-trips too.
  table_store plain{def, nullptr};
  plain.pull(keys.data(), 3, va.data(), true);
  table_store plain2{def, nullptr};
  plain2.import_rows(plain.export_rows());
  CHECK(same_contents(plain2.export_rows(), plain.export_rows()));
}

TEST_CASE("import refuses contents that do not fit and changes nothing",
          "[core][table_store]") {
  auto def = make_def(2, 100);
  auto rule = std::make_shared<test_count>();
  table_store store{def, rule};
  std::vector<uint64_t> keys{1, 2};
  std::vector<float> grad(4, 1.0f);
  store.apply(keys.data(), 2, grad.data());
  auto before = store.export_rows();
  table_store::contents good;
  good.keys = {7, 8, 9};
  good.values.assign(6, 1.0f);
  good.slots.assign(1, std::vector<float>(6, 2.0f));
  good.steps = {1, 2, 3};
  struct bad_case {
    const char* what;
    void (*spoil)(table_store::contents&);
    const char* message;
  };
  const std::vector<bad_case> cases{
    {"too few values", [](table_store::contents& c) { c.values.pop_back(); },
     "value"},
    {"too many values",
     [](table_store::contents& c) { c.values.resize(8); }, "value"},
    {"no slots", [](table_store::contents& c) { c.slots.clear(); }, "slots"},
    {"two slots",
     [](table_store::contents& c) { c.slots.push_back(c.slots[0]); },
     "slots"},
    {"a short slot", [](table_store::contents& c) { c.slots[0].resize(4); },
     "slot"},
    {"a missing step count",
     [](table_store::contents& c) { c.steps.pop_back(); }, "step"},
    {"a repeated key", [](table_store::contents& c) { c.keys[2] = 7; },
     "twice"},
    {"a key outside the vocabulary",
     [](table_store::contents& c) { c.keys[1] = 100; }, "vocabulary"},
  };
  for (auto& bad : cases) {
    INFO(bad.what);
    auto c = good;
    bad.spoil(c);
    CHECK_THROWS_AS(store.import_rows(c), std::invalid_argument);
    CHECK_THROWS_WITH(store.import_rows(c), Catch::Contains(bad.message)
                                              && Catch::Contains("emb"));
    CHECK(same_contents(store.export_rows(), before));
    std::vector<float> out(4);
    store.pull(keys.data(), 2, out.data(), false);
    CHECK(same_bits(out, before.values));
  }
  store.import_rows(good);
  CHECK(same_contents(store.export_rows(), good));
}
