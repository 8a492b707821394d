// Change tracking in a table shard for delta checkpoints: what a change set
// holds, tombstones, and full + deltas replayed in order equal the live
// shard.

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "core/table_store.hpp"
#include "test/core/table_helpers.hpp"

using namespace actorps;
using namespace table_test;

namespace {

std::set<uint64_t> key_set(const std::vector<uint64_t>& keys) {
  return {keys.begin(), keys.end()};
}

void pull_keys(table_store& store, std::vector<uint64_t> keys) {
  std::vector<float> out(keys.size() * store.def().dim);
  store.pull(keys.data(), keys.size(), out.data(), true);
}

void push_keys(table_store& store, std::vector<uint64_t> keys) {
  std::vector<float> grads(keys.size() * store.def().dim, 0.5f);
  store.apply(keys.data(), keys.size(), grads.data());
}

} // namespace

TEST_CASE("before any mark the change set is every row and there are no "
          "tombstones",
          "[table][delta]") {
  auto def = make_def(3);
  table_store store{def, std::make_shared<counting_sgd>(0.1f)};
  pull_keys(store, {1, 2, 3});
  push_keys(store, {2});
  auto changed = store.export_changed();
  CHECK(same_rows(changed, store.export_rows(), def.dim));
  CHECK(changed.keys.size() == 3);
  CHECK(store.removed_since_mark().empty());
}

TEST_CASE("after a mark only created and updated rows are in the change "
          "set, and evicted keys are tombstones unless they came back",
          "[table][delta]") {
  auto def = make_def(3);
  table_policy p;
  p.max_rows = 4;
  p.evict_samples = 64;
  table_store store{def, std::make_shared<counting_sgd>(0.1f), p};
  for (uint64_t k : {1, 2, 3, 4})
    pull_keys(store, {k}); // one call each: 1 is the least recent
  auto bytes = store.memory_bytes();
  store.mark_clean();
  CHECK(store.memory_bytes() > bytes); // the change bits
  CHECK(store.export_changed().keys.empty());
  CHECK(store.removed_since_mark().empty());
  pull_keys(store, {1, 2}); // reads change nothing
  CHECK(store.export_changed().keys.empty());
  push_keys(store, {2});
  CHECK(store.export_changed().keys == std::vector<uint64_t>{2});
  pull_keys(store, {5}); // evicts the least recently used: 3
  CHECK(key_set(store.export_changed().keys) == std::set<uint64_t>{2, 5});
  CHECK(store.removed_since_mark() == std::vector<uint64_t>{3});
  pull_keys(store, {3}); // 3 comes back (evicting 4): changed, no tombstone
  CHECK(key_set(store.export_changed().keys)
        == std::set<uint64_t>{2, 3, 5});
  CHECK(store.removed_since_mark() == std::vector<uint64_t>{4});
  auto changed = store.export_changed();
  REQUIRE(changed.slots.size() == 1);
  CHECK(changed.values.size() == 3 * def.dim);
  CHECK(changed.slots[0].size() == 3 * def.dim);
  store.mark_clean();
  CHECK(store.export_changed().keys.empty());
  CHECK(store.removed_since_mark().empty());
}

TEST_CASE("a full export at the mark and every delta after it, replayed in "
          "order, give the live shard bit for bit",
          "[table][delta]") {
  auto def = make_def(4);
  auto rule = std::make_shared<counting_sgd>(0.125f);
  table_policy p;
  p.admit_after = 2;
  p.filter_counters = 8192;
  p.steps_to_live = 15;
  p.max_rows = 120;
  p.evict = GENERATE(eviction_order::lru, eviction_order::lfu);
  INFO(to_string(p.evict));
  table_store live{def, rule, p};
  std::mt19937_64 gen{33};
  std::uniform_int_distribution<uint64_t> pick{0, 299};
  std::normal_distribution<float> normal{0.0f, 0.1f};
  uint64_t t = 0;
  auto work = [&](int steps) {
    for (int i = 0; i < steps; ++i) {
      live.set_clock(++t);
      std::set<uint64_t> batch_set;
      while (batch_set.size() < 10)
        batch_set.insert(pick(gen));
      std::vector<uint64_t> batch(batch_set.begin(), batch_set.end());
      std::vector<float> out(batch.size() * def.dim);
      live.pull(batch.data(), batch.size(), out.data(), true);
      std::vector<float> grads(batch.size() * def.dim);
      for (auto& g : grads)
        g = normal(gen);
      live.apply(batch.data(), batch.size(), grads.data());
      if (t % 4 == 0)
        live.sweep(t, 25);
    }
  };
  work(30); // rows before the full export
  auto full = live.export_rows();
  live.mark_clean();
  std::vector<table_store::contents> deltas;
  std::vector<std::vector<uint64_t>> removals;
  std::vector<table_store::contents> snapshots;
  size_t tombstones = 0;
  for (int d = 0; d < 8; ++d) {
    work(d % 2 == 0 ? 7 : 23);
    deltas.push_back(live.export_changed());
    removals.push_back(live.removed_since_mark());
    tombstones += removals.back().size();
    live.mark_clean();
    snapshots.push_back(live.export_rows());
  }
  auto c = live.counts();
  INFO("ttl " << c.evicted_ttl << " budget " << c.evicted_budget
              << " tombstones " << tombstones);
  REQUIRE(c.evicted_ttl > 0);
  REQUIRE(c.evicted_budget > 0);
  REQUIRE(tombstones > 0);
  // Onto a store without a policy, and onto one with the same policy.
  for (bool same_policy : {false, true}) {
    INFO("same policy " << same_policy);
    table_store restored{def, rule, same_policy ? p : table_policy{}};
    restored.import_rows(full);
    for (size_t d = 0; d < deltas.size(); ++d) {
      INFO("delta " << d);
      restored.apply_delta(deltas[d], removals[d]);
      CHECK(same_rows(restored.export_rows(), snapshots[d], def.dim));
    }
    CHECK(restored.counts().evicted_budget == 0);
  }
  // A delta is much smaller than the shard when few rows change.
  CHECK(deltas[0].keys.size() < snapshots[0].keys.size());
}

TEST_CASE("import_rows after a mark records the keys that left as "
          "tombstones and every row as changed",
          "[table][delta]") {
  auto def = make_def(2);
  table_store store{def, nullptr};
  pull_keys(store, {1, 2, 3});
  store.mark_clean();
  table_store other{def, nullptr};
  pull_keys(other, {3, 4});
  store.import_rows(other.export_rows());
  CHECK(key_set(store.removed_since_mark()) == std::set<uint64_t>{1, 2});
  CHECK(key_set(store.export_changed().keys) == std::set<uint64_t>{3, 4});
}

TEST_CASE("apply_delta refuses contents that do not fit and changes nothing",
          "[table][delta]") {
  auto def = make_def(2, 0.05f, 100);
  auto rule = std::make_shared<counting_sgd>(0.1f);
  table_store store{def, rule};
  pull_keys(store, {1, 2});
  auto before = store.export_rows();
  table_store::contents good;
  good.keys = {7, 8};
  good.values.assign(4, 1.0f);
  good.slots.assign(1, std::vector<float>(4, 2.0f));
  good.steps = {1, 2};
  struct bad_case {
    const char* what;
    table_store::contents changed;
    std::vector<uint64_t> removed;
    const char* message;
  };
  auto spoil = [&](auto f) {
    auto c = good;
    f(c);
    return c;
  };
  std::vector<bad_case> cases{
    {"short values",
     spoil([](table_store::contents& c) { c.values.pop_back(); }),
     {},
     "value"},
    {"no slots", spoil([](table_store::contents& c) { c.slots.clear(); }),
     {},
     "slots"},
    {"a repeated key",
     spoil([](table_store::contents& c) { c.keys[1] = 7; }),
     {},
     "twice"},
    {"a changed key outside the vocabulary",
     spoil([](table_store::contents& c) { c.keys[0] = 100; }),
     {},
     "vocabulary"},
    {"a removed key outside the vocabulary", good, {1, 500}, "removed key 500"},
  };
  for (auto& bad : cases) {
    INFO(bad.what);
    CHECK_THROWS_WITH(store.apply_delta(bad.changed, bad.removed),
                      Catch::Contains(bad.message) && Catch::Contains("emb"));
    CHECK(same_rows(store.export_rows(), before, def.dim));
  }
  store.apply_delta(good, {1, 55}); // 55 has no row: nothing to remove
  CHECK(key_set(store.export_rows().keys) == std::set<uint64_t>{2, 7, 8});
  CHECK(row_of(store, 8) == std::vector<float>{1.0f, 1.0f});
}
