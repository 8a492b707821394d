// Admission in a table shard: which calls count as sightings, what a key
// without a row reads and what happens to its gradients.

#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "core/table_store.hpp"
#include "test/core/table_helpers.hpp"

using namespace actorps;
using namespace table_test;

namespace {

table_policy admit_after(int64_t n, admission_kind kind) {
  table_policy p;
  p.admit_after = n;
  p.filter = kind;
  p.filter_counters = 4096;
  return p;
}

} // namespace

TEST_CASE("a key gets a row at its admit_after-th pull, and before it a pull "
          "reads its initial row and creates nothing",
          "[table][admission]") {
  auto def = make_def(4);
  for (auto kind : {admission_kind::sketch, admission_kind::exact}) {
    INFO(to_string(kind));
    table_store store{def, std::make_shared<counting_sgd>(0.5f),
                      admit_after(3, kind)};
    std::vector<uint64_t> keys{10, 20};
    std::vector<float> out(8);
    for (int seen = 1; seen <= 2; ++seen) {
      store.pull(keys.data(), 2, out.data(), true);
      CHECK(store.size() == 0);
      CHECK(same_bits({out.begin(), out.begin() + 4}, initial(def, 10)));
      CHECK(same_bits({out.begin() + 4, out.end()}, initial(def, 20)));
    }
    // Reads without create are no sightings.
    for (int i = 0; i < 5; ++i)
      store.pull(keys.data(), 1, out.data(), false);
    CHECK(store.size() == 0);
    CHECK(store.counts().pull_rejected == 4);
    store.pull(keys.data(), 1, out.data(), true); // 10's third sighting
    CHECK(store.size() == 1);
    CHECK(holds(store, 10));
    CHECK(same_bits({out.begin(), out.begin() + 4}, initial(def, 10)));
    auto c = store.counts();
    CHECK(c.admitted == 1);
    CHECK(c.pull_rejected == 4);
    CHECK(c.filter_bytes > 0);
    CHECK(c.memory_bytes >= c.filter_bytes);
  }
}

TEST_CASE("a push for a key not yet admitted is dropped and counted, and once "
          "admitted its pushes apply",
          "[table][admission]") {
  auto def = make_def(2);
  for (auto kind : {admission_kind::sketch, admission_kind::exact}) {
    INFO(to_string(kind));
    table_store store{def, std::make_shared<counting_sgd>(1.0f),
                      admit_after(2, kind)};
    std::vector<uint64_t> keys{1, 2, 3};
    std::vector<float> grads{1, 1, 2, 2, 3, 3};
    // Pushes are not sightings: many pushes admit nothing.
    for (int i = 0; i < 4; ++i)
      store.apply(keys.data(), 3, grads.data());
    CHECK(store.size() == 0);
    CHECK(store.counts().gradients_dropped == 12);
    // Key 2 pulled twice: admitted at the second pull.
    std::vector<float> out(2);
    store.pull(keys.data() + 1, 1, out.data(), true);
    CHECK(store.size() == 0);
    // Key 3 pulled once, then its push is still dropped.
    store.pull(keys.data() + 2, 1, out.data(), true);
    store.pull(keys.data() + 1, 1, out.data(), true);
    CHECK(store.size() == 1);
    store.apply(keys.data(), 3, grads.data());
    auto c = store.counts();
    CHECK(c.gradients_dropped == 14);
    CHECK(c.admitted == 1);
    auto row = row_of(store, 2);
    auto init = initial(def, 2);
    CHECK(row[0] == init[0] - 2.0f);
    CHECK(row[1] == init[1] - 2.0f);
    CHECK(store.export_rows().steps == std::vector<uint64_t>{1});
  }
}

TEST_CASE("a sketch remembers an evicted key, the exact counter makes it "
          "earn its row again",
          "[table][admission]") {
  auto def = make_def(2);
  for (auto kind : {admission_kind::sketch, admission_kind::exact}) {
    INFO(to_string(kind));
    auto p = admit_after(2, kind);
    p.max_rows = 1;
    table_store store{def, nullptr, p};
    uint64_t a = 5, b = 6;
    std::vector<float> out(2);
    store.pull(&a, 1, out.data(), true);
    store.pull(&a, 1, out.data(), true);
    REQUIRE(holds(store, a));
    store.pull(&b, 1, out.data(), true);
    store.pull(&b, 1, out.data(), true); // b evicts a
    REQUIRE(holds(store, b));
    REQUIRE(!holds(store, a));
    store.pull(&a, 1, out.data(), true);
    CHECK(holds(store, a) == (kind == admission_kind::sketch));
  }
}

TEST_CASE("admit_after 0 and 1 admit every key on first use and build no "
          "filter",
          "[table][admission]") {
  auto def = make_def(8);
  table_store plain{def, std::make_shared<counting_sgd>(0.1f)};
  for (int64_t n : {0, 1}) {
    table_policy p;
    p.admit_after = n;
    p.filter_counters = int64_t{1} << 24; // would be 16 MiB if built
    table_store store{def, std::make_shared<counting_sgd>(0.1f), p};
    std::vector<uint64_t> keys{1, 2, 3};
    std::vector<float> out(24);
    store.pull(keys.data(), 3, out.data(), true);
    plain.pull(keys.data(), 3, out.data(), true);
    CHECK(store.size() == 3);
    CHECK(store.counts().filter_bytes == 0);
    CHECK(store.memory_bytes() == plain.memory_bytes());
    CHECK(store.counts().admitted == 3);
    CHECK(store.counts().pull_rejected == 0);
  }
}
