#pragma once

// What the tests of table shards' policies share (admission, eviction,
// delta checkpoints): a plain SGD rule, a table definition, bit-level
// comparison of rows, contents sorted by key.

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/table_store.hpp"
#include "core/update_rule.hpp"

namespace table_test {

using namespace actorps;

/// Plain SGD with one slot that counts updates: w -= lr * g, slot += 1
/// (the slot makes the tests see that slots move with their rows).
class counting_sgd : public update_rule {
public:
  explicit counting_sgd(float lr) : lr_(lr) {
  }

  const std::string& name() const override {
    return name_;
  }

  size_t slot_count() const override {
    return 1;
  }

  float slot_init(size_t) const override {
    return 0.25f;
  }

  void apply(float* w, float* const* slots, const float* g, size_t n,
             uint64_t) const override {
    for (size_t j = 0; j < n; ++j) {
      w[j] -= lr_ * g[j];
      slots[0][j] += 1.0f;
    }
  }

  std::string describe() const override {
    return name_;
  }

private:
  std::string name_ = "counting_sgd";
  float lr_;
};

inline table_shard_def make_def(uint64_t dim = 4, float init_scale = 0.05f,
                                uint64_t vocabulary = 0) {
  table_shard_def def;
  def.variable = "emb";
  def.dim = dim;
  def.vocabulary = vocabulary;
  def.init_scale = init_scale;
  def.seed = 11;
  return def;
}

inline std::vector<float> initial(const table_shard_def& def, uint64_t key) {
  std::vector<float> row(def.dim);
  initial_row(def, key, row.data());
  return row;
}

inline bool same_bits(const std::vector<float>& a,
                      const std::vector<float>& b) {
  return a.size() == b.size()
         && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The rows of `c` ordered by key (export order is row order, which
/// eviction permutes).
inline table_store::contents sorted_by_key(const table_store::contents& c,
                                           uint64_t dim) {
  std::vector<size_t> order(c.keys.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return c.keys[a] < c.keys[b]; });
  table_store::contents result;
  result.slots.resize(c.slots.size());
  for (auto i : order) {
    result.keys.push_back(c.keys[i]);
    result.steps.push_back(c.steps[i]);
    result.values.insert(result.values.end(), c.values.begin() + i * dim,
                         c.values.begin() + (i + 1) * dim);
    for (size_t s = 0; s < c.slots.size(); ++s)
      result.slots[s].insert(result.slots[s].end(),
                             c.slots[s].begin() + i * dim,
                             c.slots[s].begin() + (i + 1) * dim);
  }
  return result;
}

/// Whether two contents hold the same rows, bit for bit, in any row order.
inline bool same_rows(const table_store::contents& a,
                      const table_store::contents& b, uint64_t dim) {
  auto x = sorted_by_key(a, dim);
  auto y = sorted_by_key(b, dim);
  if (x.keys != y.keys || x.steps != y.steps || !same_bits(x.values, y.values)
      || x.slots.size() != y.slots.size())
    return false;
  for (size_t s = 0; s < x.slots.size(); ++s)
    if (!same_bits(x.slots[s], y.slots[s]))
      return false;
  return true;
}

/// The row of `key` as a pull without create reads it.
inline std::vector<float> row_of(table_store& store, uint64_t key) {
  std::vector<float> row(store.def().dim);
  store.pull(&key, 1, row.data(), false);
  return row;
}

/// Whether the store holds a row for `key`.
inline bool holds(const table_store& store, uint64_t key) {
  auto keys = store.export_rows().keys;
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

} // namespace table_test
