#include "core/table_lookup.hpp"

#include <map>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

using namespace actorps;

TEST_CASE("deduplicate keeps keys in first-occurrence order and maps every "
          "occurrence to its key",
          "[core][table_lookup]") {
  table_lookup l;
  l.dim = 3;
  l.occurrences = {7, 3, 7, 9, 3, 7};
  l.grad.assign(100, 5.0f); // stale contents from an earlier batch
  l.deduplicate();
  CHECK(l.keys == std::vector<uint64_t>{7, 3, 9});
  CHECK(l.inverse == std::vector<uint32_t>{0, 1, 0, 2, 1, 0});
  CHECK(l.rows.size() == 9);
  CHECK(l.grad == std::vector<float>(9, 0.0f));
  // It sums nothing itself: the model adds into grad_of(), and duplicates
  // land on one row.
  for (uint64_t i = 0; i < l.occurrences.size(); ++i)
    for (size_t j = 0; j < l.dim; ++j)
      l.grad_of(i)[j] += 1.0f;
  CHECK(l.grad == std::vector<float>{3, 3, 3, 2, 2, 2, 1, 1, 1});
  for (size_t k = 0; k < l.rows.size(); ++k)
    l.rows[k] = static_cast<float>(k);
  CHECK(l.row_of(4)[0] == 3.0f); // occurrence 4 is key 3, row 1
  CHECK(l.row_of(3)[2] == 8.0f); // occurrence 3 is key 9, row 2
}

TEST_CASE("deduplicate starts afresh on every call",
          "[core][table_lookup]") {
  table_lookup l;
  l.dim = 2;
  l.occurrences = {1, 2, 3};
  l.deduplicate();
  CHECK(l.keys.size() == 3);
  l.occurrences = {3, 3};
  l.deduplicate();
  CHECK(l.keys == std::vector<uint64_t>{3});
  CHECK(l.inverse == std::vector<uint32_t>{0, 0});
  CHECK(l.grad.size() == 2);
  l.occurrences.clear();
  l.deduplicate();
  CHECK(l.keys.empty());
  CHECK(l.inverse.empty());
  CHECK(l.rows.empty());
  CHECK(l.grad.empty());
}

TEST_CASE("deduplicate agrees with a std::map on many colliding keys",
          "[core][table_lookup]") {
  std::mt19937_64 rng{9};
  table_lookup l;
  l.dim = 1;
  for (size_t n : {1u, 17u, 1000u, 50000u}) {
    INFO(n << " occurrences");
    l.occurrences.resize(n);
    for (auto& k : l.occurrences)
      // Few distinct values, spread over the whole 64-bit range, plus
      // sequential ones.
      k = rng() % 4 == 0 ? rng() % 64 : (rng() % (n / 4 + 1)) * 0x9e37ULL << 20;
    l.deduplicate();
    std::map<uint64_t, uint32_t> first;
    std::vector<uint64_t> expected_keys;
    bool ok = true;
    for (size_t i = 0; i < n; ++i) {
      auto k = l.occurrences[i];
      auto [it, inserted] = first.emplace(k, expected_keys.size());
      if (inserted)
        expected_keys.push_back(k);
      ok = ok && l.inverse[i] == it->second;
    }
    CHECK(ok);
    CHECK(l.keys == expected_keys);
  }
}
