#include "core/staleness_histogram.hpp"

#include <catch2/catch.hpp>

using namespace actorps;

TEST_CASE("each staleness falls into the bucket of its upper bound",
          "[staleness]") {
  struct row {
    uint64_t staleness;
    size_t bucket;
    const char* label;
  };
  const row table[] = {
    {0, 0, "0"},      {1, 1, "1"},       {2, 2, "2"},       {3, 3, "3-4"},
    {4, 3, "3-4"},    {5, 4, "5-8"},     {8, 4, "5-8"},     {9, 5, "9-16"},
    {128, 8, "65-128"}, {129, 9, ">128"}, {~uint64_t{0}, 9, ">128"},
  };
  for (auto& r : table) {
    INFO("staleness " << r.staleness);
    CHECK(staleness_bucket(r.staleness) == r.bucket);
    CHECK(staleness_bucket_label(r.bucket) == r.label);
  }
  CHECK(staleness_buckets == 10);
}

TEST_CASE("counts add up bucket by bucket and a run's are the difference",
          "[staleness]") {
  std::vector<uint64_t> before;
  for (uint64_t s : {0, 0, 1, 3})
    add_staleness(before, s);
  REQUIRE(before.size() == staleness_buckets);
  auto after = before;
  for (uint64_t s : {0, 200, 4})
    add_staleness(after, s);
  auto run = staleness_since(after, before);
  CHECK(run == std::vector<uint64_t>{1, 0, 0, 1, 0, 0, 0, 0, 0, 1});
  // A server restored from an older checkpoint counted less: no underflow.
  CHECK(staleness_since(before, after)
        == std::vector<uint64_t>(staleness_buckets, 0));
  // A server that applied nothing yet has no buckets at all.
  CHECK(staleness_since({}, {}) == std::vector<uint64_t>(staleness_buckets, 0));
  std::vector<uint64_t> sum;
  merge_staleness(sum, run);
  merge_staleness(sum, run);
  CHECK(sum[0] == 2);
  CHECK(sum[9] == 2);
}

TEST_CASE("the histogram is described with its non-empty buckets only",
          "[staleness]") {
  CHECK(describe_staleness({}) == "none");
  std::vector<uint64_t> counts;
  for (uint64_t s : {0, 0, 0, 2, 7})
    add_staleness(counts, s);
  CHECK(describe_staleness(counts) == "0: 3, 2: 1, 5-8: 1");
}
