// Dynamic data shards: the epoch orders every process computes alike, and a
// reader of ranges of a whole split in memory (core/dataset_ranges.hpp),
// with the coordinator's plan of one batch per closure
// (cluster/services/dataset_plan.hpp).

#include <algorithm>
#include <numeric>
#include <set>

#include <catch2/catch.hpp>

#include "cluster/services/dataset_plan.hpp"
#include "core/dataset_ranges.hpp"
#include "core/error.hpp"
#include "core/example_batch.hpp"

using namespace actorps;

namespace {

/// A split of `rows` rows whose one dense feature is the row's number.
std::shared_ptr<const dataset> numbered(uint64_t rows) {
  dataset d;
  d.schema.dense_dim = 1;
  d.schema.classes = 2;
  d.examples.reset(1, 0);
  for (uint64_t i = 0; i < rows; ++i) {
    d.examples.dense.push_back(static_cast<float>(i));
    d.examples.labels.push_back(static_cast<int32_t>(i % 2));
    ++d.examples.rows;
  }
  return std::make_shared<const dataset>(std::move(d));
}

} // namespace

TEST_CASE("an epoch order is a permutation fixed by the seed and the epoch",
          "[core][dataset_ranges]") {
  auto a = epoch_order(1000, 7, 0);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint32_t> all(1000);
  std::iota(all.begin(), all.end(), 0u);
  CHECK(sorted == all);
  CHECK(epoch_order(1000, 7, 0) == a);  // the same in every process
  CHECK(epoch_order(1000, 7, 1) != a);  // shuffled again each epoch
  CHECK(epoch_order(1000, 8, 0) != a);  // and by the job's seed
  CHECK(a != all);
}

TEST_CASE("the ranges of a plan read every row of an epoch exactly once",
          "[core][dataset_ranges]") {
  auto data = numbered(1003);
  dataset_ranges reader{data, 5};
  dataset_plan plan{1003, 64};
  REQUIRE(plan.closures(0) == 16); // 15 full batches and one of 43
  CHECK(plan.examples_per_epoch() == 1003);
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    std::multiset<float> seen;
    example_batch b;
    for (uint64_t k = 0; k < plan.closures(epoch); ++k) {
      auto r = plan.range(epoch, k);
      CHECK(r.part == epoch);
      CHECK_FALSE(r.progressive);
      reader.read(r, b);
      CHECK(b.rows == r.rows());
      seen.insert(b.dense.begin(), b.dense.end());
    }
    CHECK(seen.size() == 1003);
    CHECK(std::set<float>(seen.begin(), seen.end()).size() == 1003);
  }
  CHECK(plan.range(0, 15).rows() == 43);
  CHECK_THROWS_AS(plan.range(0, 16), std::logic_error);
}

TEST_CASE("a plan of fewer closures covers the first batches of each epoch's "
          "order, and a range past the split is refused",
          "[core][dataset_ranges]") {
  dataset_plan plan{1000, 64, 4};
  CHECK(plan.closures(3) == 4);
  CHECK(plan.examples_per_epoch() == 256);
  dataset_ranges reader{numbered(100), 1};
  example_batch b;
  data_range r;
  r.begin = 90;
  r.end = 101;
  CHECK_THROWS_AS(reader.read(r, b), input_error);
  CHECK_THROWS_AS(dataset_ranges(nullptr, 1), input_error);
  CHECK_THROWS_AS(dataset_plan(0, 64), std::invalid_argument);
}
