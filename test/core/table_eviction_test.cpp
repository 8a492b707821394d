// Eviction from a table shard: time to live and L2 norm by bounded sweeps,
// LRU and LFU under a row or byte budget, and sweeps and budgets racing
// pushes (interleaved calls) checked against a reference computation.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
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

void pull_one(table_store& store, uint64_t key) {
  std::vector<float> out(store.def().dim);
  store.pull(&key, 1, out.data(), true);
}

void push_one(table_store& store, uint64_t key, float g = 1.0f) {
  std::vector<float> grad(store.def().dim, g);
  store.apply(&key, 1, grad.data());
}

std::set<uint64_t> keys_of(const table_store& store) {
  auto keys = store.export_rows().keys;
  return {keys.begin(), keys.end()};
}

} // namespace

TEST_CASE("a row not updated for more than steps_to_live goes at the next "
          "sweep, and reads do not keep it",
          "[table][eviction]") {
  table_policy p;
  p.steps_to_live = 5;
  table_store store{make_def(2), std::make_shared<counting_sgd>(0.1f), p};
  store.set_clock(0);
  for (uint64_t k : {1, 2, 3})
    pull_one(store, k); // created at 0
  store.set_clock(3);
  push_one(store, 2);
  store.set_clock(4);
  push_one(store, 3);
  store.set_clock(8);
  pull_one(store, 3); // a read: not an update
  CHECK(store.sweep(5, 100).evicted == 0); // 5 - 0 = 5: not more than 5
  CHECK(store.sweep(6, 100).evicted == 1);
  CHECK(keys_of(store) == std::set<uint64_t>{2, 3});
  CHECK(store.sweep(9, 100).evicted == 1);
  CHECK(keys_of(store) == std::set<uint64_t>{3});
  CHECK(store.sweep(9, 100).evicted == 0);
  CHECK(store.sweep(10, 100).evicted == 1);
  CHECK(store.size() == 0);
  auto c = store.counts();
  CHECK(c.evicted_ttl == 3);
  CHECK(c.evicted_l2 == 0);
  CHECK(c.evicted_budget == 0);
  CHECK(c.rows == 0);
  // A clock behind a row's stamp (after a restore) evicts nothing.
  store.set_clock(100);
  pull_one(store, 7);
  CHECK(store.sweep(3, 10).evicted == 0);
}

TEST_CASE("a row whose L2 norm is below l2_threshold goes at the next sweep",
          "[table][eviction]") {
  table_policy p;
  p.l2_threshold = 1.0;
  // Zero initial rows; SGD with rate 1 makes each row -g.
  table_store store{make_def(2, 0.0f), std::make_shared<counting_sgd>(1.0f),
                    p};
  std::vector<uint64_t> keys{1, 2, 3, 4};
  std::vector<float> grads{0.5f, 0.5f, 1, 0, 0, 2, 0, 0};
  store.apply(keys.data(), 4, grads.data());
  auto swept = store.sweep(0, 100);
  CHECK(swept.evicted == 2); // norms 0.71 and 0 go; 1 and 2 stay
  CHECK(keys_of(store) == std::set<uint64_t>{2, 3});
  CHECK(store.counts().evicted_l2 == 2);
  CHECK(store.sweep(0, 100).evicted == 0);
}

TEST_CASE("a sweep visits at most its bound and resumes where it stopped",
          "[table][eviction]") {
  table_policy p;
  p.steps_to_live = 1;
  table_store store{make_def(2), std::make_shared<counting_sgd>(0.1f), p};
  store.set_clock(0);
  for (uint64_t k = 0; k < 10; ++k)
    pull_one(store, k);
  store.set_clock(5);
  for (uint64_t k = 0; k < 10; k += 2)
    push_one(store, k); // even keys updated at 5
  size_t evicted = 0;
  size_t visits = 0;
  for (int i = 0; i < 4; ++i) {
    auto s = store.sweep(6, 4);
    CHECK(s.visited == 4);
    evicted += s.evicted;
    visits += s.visited;
  }
  // 16 visits cover the 10 rows (each eviction visits the moved row again).
  CHECK(evicted == 5);
  CHECK(keys_of(store) == std::set<uint64_t>{0, 2, 4, 6, 8});
  // Nothing left to evict: a sweep just walks.
  CHECK(store.sweep(6, 7).visited == 7);
  // Without a time to live or a threshold, sweeping does nothing.
  table_store plain{make_def(2), nullptr};
  pull_one(plain, 1);
  CHECK(plain.sweep(1000, 10).visited == 0);
}

TEST_CASE("a full shard under lru evicts the least recently used row",
          "[table][eviction]") {
  table_policy p;
  p.max_rows = 3;
  p.evict_samples = 64; // about every row of a tiny shard: exact LRU
  table_store store{make_def(2), std::make_shared<counting_sgd>(0.1f), p};
  for (uint64_t k : {1, 2, 3})
    pull_one(store, k);
  pull_one(store, 1); // 1 is used again
  push_one(store, 2); // then 2
  pull_one(store, 4); // 3 is the oldest
  CHECK(keys_of(store) == std::set<uint64_t>{1, 2, 4});
  pull_one(store, 5); // then 1
  CHECK(keys_of(store) == std::set<uint64_t>{2, 4, 5});
  push_one(store, 6); // a push creates too; then 2
  CHECK(keys_of(store) == std::set<uint64_t>{4, 5, 6});
  CHECK(store.counts().evicted_budget == 3);
  CHECK(store.counts().admitted == 6);
}

TEST_CASE("a full shard under lfu evicts the least used row, and decay "
          "forgets old use",
          "[table][eviction]") {
  // One access pattern, two half-lives: key 1 is used 8 times first, then
  // keys 2 and 3 twice each; key 4 comes.
  auto run = [](int64_t half_life) {
    table_policy p;
    p.max_rows = 3;
    p.evict = eviction_order::lfu;
    p.evict_samples = 64;
    p.lfu_half_life = half_life;
    table_store store{make_def(2), nullptr, p};
    for (int i = 0; i < 8; ++i)
      pull_one(store, 1);
    for (uint64_t k : {2, 2, 3, 3})
      pull_one(store, k);
    pull_one(store, 4);
    return keys_of(store);
  };
  // Without decay (in effect) 2 and 3 have 2 uses each; 2's are older.
  CHECK(run(int64_t{1} << 40) == std::set<uint64_t>{1, 3, 4});
  // Halving every call: 1's 8 uses are worth 0.06 when 4 comes, 2's 0.19.
  CHECK(run(1) == std::set<uint64_t>{2, 3, 4});
}

TEST_CASE("max_bytes limits the rows to the budget over the row's bytes",
          "[table][eviction]") {
  table_policy p;
  auto def = make_def(16);
  // 64 + 8 + 8 + 1 + 20 + 8 = 109 bytes a row: room for 10.
  p.max_bytes = 109 * 10 + 50;
  table_store store{def, nullptr, p};
  std::vector<uint64_t> keys(25);
  for (uint64_t k = 0; k < 25; ++k)
    keys[k] = k;
  std::vector<float> out(25 * 16);
  for (uint64_t k = 0; k < 25; ++k)
    store.pull(&keys[k], 1, out.data(), true);
  CHECK(store.size() == 10);
  CHECK(store.counts().evicted_budget == 15);
  // The arrays stop growing at the limit: 10 rows of 88 bytes (values, key,
  // step and last access) and an index of 15 buckets of 17 bytes, where
  // doubling would have made room for 16 rows (1,663 bytes).
  CHECK(store.memory_bytes() <= 10 * 88 + 16 * 17);
}

TEST_CASE("a call never evicts the rows it uses, and keys it has no room "
          "for read their initial rows",
          "[table][eviction]") {
  table_policy p;
  p.max_rows = 4;
  auto def = make_def(3);
  table_store store{def, std::make_shared<counting_sgd>(0.5f), p};
  std::vector<uint64_t> first{1, 2, 3, 4};
  std::vector<float> out(6 * 3);
  store.pull(first.data(), 4, out.data(), true);
  // 1 and 2 are used by the call that brings 5 and 6: 3 and 4 go.
  std::vector<uint64_t> second{1, 2, 5, 6};
  store.pull(second.data(), 4, out.data(), true);
  CHECK(keys_of(store) == std::set<uint64_t>{1, 2, 5, 6});
  for (size_t i = 0; i < 4; ++i)
    CHECK(same_bits({out.begin() + i * 3, out.begin() + (i + 1) * 3},
                    initial(def, second[i])));
  // Six new keys in one call: four get the rows, two read initial rows.
  std::vector<uint64_t> third{7, 8, 9, 10, 11, 12};
  store.pull(third.data(), 6, out.data(), true);
  CHECK(keys_of(store) == std::set<uint64_t>{7, 8, 9, 10});
  for (size_t i = 0; i < 6; ++i)
    CHECK(same_bits({out.begin() + i * 3, out.begin() + (i + 1) * 3},
                    initial(def, third[i])));
  CHECK(store.counts().pull_rejected == 2);
  // A push whose used row is the last one, moved into the victim's place:
  // its update still lands on its own row.
  std::vector<uint64_t> push_keys{10, 13};
  std::vector<float> grads{2, 2, 2, 4, 4, 4};
  store.apply(push_keys.data(), 2, grads.data());
  CHECK(store.size() == 4);
  CHECK(holds(store, 10));
  CHECK(holds(store, 13));
  auto init10 = initial(def, 10);
  auto init13 = initial(def, 13);
  auto row10 = row_of(store, 10);
  auto row13 = row_of(store, 13);
  for (size_t j = 0; j < 3; ++j) {
    CHECK(row10[j] == init10[j] - 0.5f * 2);
    CHECK(row13[j] == init13[j] - 0.5f * 4);
  }
}

namespace {

/// What a row should hold, computed beside the store.
struct reference_row {
  std::vector<float> values;
  float slot = 0.25f; // counting_sgd's slot_init, the same in every element
  uint64_t steps = 0;
  uint64_t updated = 0; // clock of creation or last update
};

} // namespace

TEST_CASE("sweeps and budget evictions interleaved with pulls and pushes "
          "lose no update of a live row",
          "[table][eviction]") {
  // Each step: set the clock, pull a batch (sightings, admissions, budget
  // evictions), push it, and every third step sweep a few rows. A reference
  // map follows every row the store keeps: created rows start at their
  // initial values, pushes apply the same float operations, and a row the
  // store drops must have been allowed to go: by time to live only if it
  // had expired, by the budget only if the call did not use it.
  auto def = make_def(4);
  const float lr = 0.25f;
  table_policy p;
  p.admit_after = 2;
  p.filter_counters = 4096; // a sketch remembers evicted keys: pushes
                            // re-create some rows
  p.steps_to_live = 20;
  p.l2_threshold = 0.01; // rows start at norm ~0.05: few go this way
  p.max_rows = 150;
  p.evict = GENERATE(eviction_order::lru, eviction_order::lfu);
  INFO(to_string(p.evict));
  table_store store{def, std::make_shared<counting_sgd>(lr), p};
  std::map<uint64_t, reference_row> ref;
  std::mt19937_64 gen{21};
  std::uniform_int_distribution<uint64_t> pick{0, 399};
  std::normal_distribution<float> normal{0.0f, 0.05f};
  auto check_same = [&]() {
    auto c = store.export_rows();
    REQUIRE(c.keys.size() == ref.size());
    size_t wrong = 0;
    for (size_t i = 0; i < c.keys.size(); ++i) {
      auto it = ref.find(c.keys[i]);
      REQUIRE(it != ref.end());
      std::vector<float> values(c.values.begin() + i * def.dim,
                                c.values.begin() + (i + 1) * def.dim);
      bool slot_ok = std::all_of(
        c.slots[0].begin() + i * def.dim,
        c.slots[0].begin() + (i + 1) * def.dim,
        [&](float s) { return s == it->second.slot; });
      if (!same_bits(values, it->second.values) || !slot_ok
          || c.steps[i] != it->second.steps)
        ++wrong;
    }
    CHECK(wrong == 0);
  };
  // Rows the store dropped since `before`; drops must satisfy `allowed`.
  auto follow_drops = [&](const std::set<uint64_t>& now_held,
                          auto&& allowed) {
    for (auto it = ref.begin(); it != ref.end();) {
      if (now_held.count(it->first) == 0) {
        CHECK(allowed(it->first, it->second));
        it = ref.erase(it);
      } else {
        ++it;
      }
    }
  };
  size_t created_by_push = 0;
  for (uint64_t t = 1; t <= 600; ++t) {
    store.set_clock(t);
    std::set<uint64_t> batch_set;
    while (batch_set.size() < 12)
      batch_set.insert(pick(gen));
    std::vector<uint64_t> batch(batch_set.begin(), batch_set.end());
    std::shuffle(batch.begin(), batch.end(), gen);
    std::vector<float> out(batch.size() * def.dim);
    store.pull(batch.data(), batch.size(), out.data(), true);
    auto held = keys_of(store);
    follow_drops(held, [&](uint64_t k, const reference_row&) {
      return batch_set.count(k) == 0; // a budget victim outside the call
    });
    for (size_t i = 0; i < batch.size(); ++i) {
      auto k = batch[i];
      std::vector<float> got(out.begin() + i * def.dim,
                             out.begin() + (i + 1) * def.dim);
      if (held.count(k) != 0 && ref.count(k) == 0)
        ref[k] = reference_row{initial(def, k), 0.25f, 0, t};
      CHECK(same_bits(got, ref.count(k) ? ref[k].values : initial(def, k)));
    }
    // Push the batch, and a few keys it did not pull (pushes create rows
    // only for admitted keys).
    std::vector<uint64_t> push_keys = batch;
    for (int extra = 0; extra < 2; ++extra) {
      auto k = pick(gen);
      if (batch_set.insert(k).second)
        push_keys.push_back(k);
    }
    std::vector<float> grads(push_keys.size() * def.dim);
    for (auto& g : grads)
      g = normal(gen);
    store.apply(push_keys.data(), push_keys.size(), grads.data());
    held = keys_of(store);
    follow_drops(held, [&](uint64_t k, const reference_row&) {
      return batch_set.count(k) == 0;
    });
    for (size_t i = 0; i < push_keys.size(); ++i) {
      auto k = push_keys[i];
      if (held.count(k) == 0)
        continue; // dropped: not admitted
      if (ref.count(k) == 0) {
        ref[k] = reference_row{initial(def, k), 0.25f, 0, t};
        ++created_by_push;
      }
      auto& r = ref[k];
      for (size_t j = 0; j < def.dim; ++j)
        r.values[j] -= lr * grads[i * def.dim + j];
      r.slot += 1.0f;
      ++r.steps;
      r.updated = t;
    }
    if (t % 3 == 0) {
      store.sweep(t, 37);
      follow_drops(keys_of(store), [&](uint64_t, const reference_row& r) {
        double norm = 0;
        for (auto v : r.values)
          norm += static_cast<double>(v) * v;
        return t - r.updated > 20 || norm < 0.01 * 0.01;
      });
    }
    if (t % 50 == 0)
      check_same();
  }
  check_same();
  auto c = store.counts();
  INFO("ttl " << c.evicted_ttl << " l2 " << c.evicted_l2 << " budget "
              << c.evicted_budget << " dropped " << c.gradients_dropped
              << " rejected " << c.pull_rejected);
  // Every mechanism was exercised.
  CHECK(c.evicted_ttl > 0);
  CHECK(c.evicted_budget > 0);
  CHECK(c.gradients_dropped > 0);
  CHECK(c.pull_rejected > 0);
  CHECK(created_by_push > 0);
  CHECK(c.rows <= 150);
}

TEST_CASE("sweep pauses on a large shard", "[.bench]") {
  // Not a test: prints the longest and the mean pause of sweep(now, 4096) on
  // 1M rows of 16 floats, half of them expired, and of a pull + push of
  // 4096 new keys into a full shard (budget evictions).
  using clock = std::chrono::steady_clock;
  auto def = make_def(16);
  const uint64_t rows = 1000000;
  const size_t batch = 4096;
  table_policy p;
  p.steps_to_live = 10;
  table_store store{def, std::make_shared<counting_sgd>(0.1f), p};
  std::vector<uint64_t> keys(rows);
  std::mt19937_64 gen{1};
  for (auto& k : keys)
    k = gen();
  std::vector<float> out(batch * def.dim);
  std::vector<float> grads(batch * def.dim, 0.1f);
  store.set_clock(0);
  for (size_t b = 0; b < rows; b += batch)
    store.pull(keys.data() + b, std::min<size_t>(batch, rows - b), out.data(),
               true);
  store.set_clock(100); // every other key updated late: lives on
  std::vector<uint64_t> odd;
  for (size_t i = 1; i < rows; i += 2)
    odd.push_back(keys[i]);
  for (size_t b = 0; b < odd.size(); b += batch)
    store.apply(odd.data() + b, std::min<size_t>(batch, odd.size() - b),
                grads.data());
  double worst = 0, total = 0;
  size_t sweeps = 0, evicted = 0;
  std::vector<double> pauses;
  while (evicted < rows / 2) {
    auto t0 = clock::now();
    auto s = store.sweep(105, batch);
    auto dt = std::chrono::duration<double>(clock::now() - t0).count();
    worst = std::max(worst, dt);
    total += dt;
    pauses.push_back(dt);
    ++sweeps;
    evicted += s.evicted;
  }
  // The worst of a few hundred pauses on a shared machine is often a
  // preemption: the 99th percentile shows the work.
  std::sort(pauses.begin(), pauses.end());
  std::printf("sweep(now, %zu) over %llu rows dim %llu, half expired: %zu "
              "sweeps, median %.3f ms, p99 %.3f ms, worst %.3f ms, mean "
              "%.3f ms, %zu evicted\n",
              batch, static_cast<unsigned long long>(rows),
              static_cast<unsigned long long>(def.dim), sweeps,
              pauses[pauses.size() / 2] * 1e3,
              pauses[pauses.size() * 99 / 100] * 1e3, worst * 1e3,
              total / sweeps * 1e3, evicted);
  worst = total = 0;
  sweeps = 0;
  for (int i = 0; i < 50; ++i) {
    auto t0 = clock::now();
    store.sweep(105, batch);
    auto dt = std::chrono::duration<double>(clock::now() - t0).count();
    worst = std::max(worst, dt);
    total += dt;
    ++sweeps;
  }
  std::printf("sweep(now, %zu) over %zu live rows, none expired: worst %.3f "
              "ms, mean %.3f ms\n",
              batch, store.size(), worst * 1e3, total / sweeps * 1e3);
  // A full shard under a budget: each batch of new keys evicts as many;
  // beside it, the same keys into a shard without a budget (it grows).
  for (int order = 0; order < 3; ++order) {
    table_policy b;
    if (order > 0)
      b.max_rows = 500000;
    b.evict = order == 2 ? eviction_order::lfu : eviction_order::lru;
    table_store full{def, std::make_shared<counting_sgd>(0.1f), b};
    for (size_t i = 0; i < 500000; i += batch)
      full.pull(keys.data() + i, batch, out.data(), true);
    worst = total = 0;
    size_t calls = 0;
    for (size_t i = 500000; i + batch <= rows; i += batch) {
      auto t0 = clock::now();
      full.pull(keys.data() + i, batch, out.data(), true);
      full.apply(keys.data() + i, batch, grads.data());
      auto dt = std::chrono::duration<double>(clock::now() - t0).count();
      worst = std::max(worst, dt);
      total += dt;
      ++calls;
    }
    std::printf("%s: pull + push of %zu new keys into a %s shard of "
                "500000 rows: worst %.3f ms, mean %.3f ms (%.1f ns a key), "
                "%llu evicted\n",
                order == 0 ? "no budget" : to_string(b.evict), batch,
                order == 0 ? "growing" : "full", worst * 1e3,
                total / calls * 1e3,
                total / calls / batch * 1e9,
                static_cast<unsigned long long>(
                  full.counts().evicted_budget));
  }
}

TEST_CASE("pull and push cost under each policy", "[.bench]") {
  // Not a test: ns a row of pull(create) + apply() of existing keys (100k
  // rows of 16 floats, batches of 4096, best of 5 rounds of 1M rows), with
  // each policy on but no row created or evicted in the timed part.
  using clock = std::chrono::steady_clock;
  auto def = make_def(16);
  const size_t rows = 100000, batch = 4096;
  std::vector<uint64_t> keys(rows);
  std::mt19937_64 gen{2};
  for (auto& k : keys)
    k = gen();
  struct variant {
    const char* name;
    table_policy policy;
    bool track;
  };
  std::vector<variant> variants(6);
  variants[0].name = "no policy";
  variants[1].name = "change tracking";
  variants[1].track = true;
  variants[2].name = "steps_to_live + tracking";
  variants[2].policy.steps_to_live = 1000;
  variants[2].track = true;
  variants[3].name = "sketch admit_after 2";
  variants[3].policy.admit_after = 2;
  variants[4].name = "max_rows lru";
  variants[4].policy.max_rows = 2 * rows;
  variants[5].name = "max_rows lfu";
  variants[5].policy.max_rows = 2 * rows;
  variants[5].policy.evict = eviction_order::lfu;
  std::vector<float> out(batch * def.dim), grads(batch * def.dim, 0.01f);
  std::vector<table_store> stores;
  for (auto& v : variants) {
    stores.emplace_back(def, std::make_shared<counting_sgd>(0.1f), v.policy);
    for (int seen = 0; seen < 2; ++seen)
      for (size_t b = 0; b + batch <= rows; b += batch)
        stores.back().pull(keys.data() + b, batch, out.data(), true);
    if (v.track)
      stores.back().mark_clean();
  }
  // Rounds interleave the variants, so that a busy moment of the machine
  // does not fall on one variant only; the best round counts.
  std::vector<double> best_pull(variants.size(), 1e9);
  std::vector<double> best_apply(variants.size(), 1e9);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(keys.begin(), keys.end(), gen);
    for (size_t v = 0; v < variants.size(); ++v) {
      double pull_s = 0, apply_s = 0;
      size_t done = 0;
      for (size_t b = 0; done < 1000000;
           b = b + 2 * batch > rows ? 0 : b + batch) {
        auto t0 = clock::now();
        stores[v].pull(keys.data() + b, batch, out.data(), true);
        auto t1 = clock::now();
        stores[v].apply(keys.data() + b, batch, grads.data());
        auto t2 = clock::now();
        pull_s += std::chrono::duration<double>(t1 - t0).count();
        apply_s += std::chrono::duration<double>(t2 - t1).count();
        done += batch;
      }
      best_pull[v] = std::min(best_pull[v], pull_s / done * 1e9);
      best_apply[v] = std::min(best_apply[v], apply_s / done * 1e9);
    }
  }
  for (size_t v = 0; v < variants.size(); ++v)
    std::printf("%-26s pull %6.2f ns a row, apply %6.2f ns a row\n",
                variants[v].name, best_pull[v], best_apply[v]);
}
