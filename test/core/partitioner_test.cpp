#include "core/partitioner.hpp"

#include <numeric>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"

using namespace actorps;

namespace {

using kind = partitioner_config::kind;

partitioner_config fixed_shards(uint64_t n) {
  partitioner_config cfg;
  cfg.type = kind::fixed_shards;
  cfg.num_shards = n;
  return cfg;
}

partitioner_config min_size(uint64_t min_shard_bytes, uint64_t max_shards) {
  partitioner_config cfg;
  cfg.type = kind::min_size;
  cfg.min_shard_bytes = min_shard_bytes;
  cfg.max_shards = max_shards;
  return cfg;
}

partitioner_config max_size(uint64_t max_shard_bytes, uint64_t max_shards) {
  partitioner_config cfg;
  cfg.type = kind::max_size;
  cfg.max_shard_bytes = max_shard_bytes;
  cfg.max_shards = max_shards;
  return cfg;
}

struct shards_case {
  const char* what;
  partitioner_config cfg;
  uint64_t rows;
  uint64_t cols;
  uint64_t expected;
};

} // namespace

TEST_CASE("num_shards reproduces TensorFlow's documented partitioner "
          "examples and their arithmetic",
          "[core][partitioner]") {
  // The TF rows are the examples in the docstrings of
  // tf.distribute.experimental.partitioners.*; all shapes are float32.
  const std::vector<shards_case> cases{
    // FixedShardsPartitioner(num_shards=2)([10, 3]) -> [2, 1]
    {"TF: fixed_shards(2) on [10,3]", fixed_shards(2), 10, 3, 2},
    {"fixed_shards with more shards than rows gives one shard per row",
     fixed_shards(8), 5, 3, 5},
    {"fixed_shards(0) still gives one shard", fixed_shards(0), 10, 3, 1},
    {"fixed_shards on an empty variable gives one shard", fixed_shards(4), 0,
     3, 1},
    // MinSizePartitioner(min_shard_bytes=4, max_shards=2)([6, 1]) -> [2, 1]
    {"TF: min_size(4 B, max 2) on [6,1]", min_size(4, 2), 6, 1, 2},
    // MinSizePartitioner(min_shard_bytes=4, max_shards=10)([6, 1]) -> [6, 1]
    {"TF: min_size(4 B, max 10) on [6,1]", min_size(4, 10), 6, 1, 6},
    // 24 bytes in total, at least 24 bytes per shard: one shard.
    {"min_size(24 B, max 2) on [6,1] (24 bytes in all)", min_size(24, 2), 6, 1,
     1},
    {"min_size(12 B, max 2) on [6,1]", min_size(12, 2), 6, 1, 2},
    {"min_size(10 B, max 4) on [6,1]: ceil(24 / 10) = 3", min_size(10, 4), 6,
     1, 3},
    // TF defaults: 256 KiB, max_shards 1.
    {"min_size defaults on [784,256]", partitioner_config{kind::min_size}, 784,
     256, 1},
    {"min_size(256 KiB, max 8) on [784,256]: ceil(784 KiB / 256 KiB) = 4",
     min_size(256 * 1024, 8), 784, 256, 4},
    {"min_size(1 B, max 100) is capped at the rows", min_size(1, 100), 6, 3,
     6},
    // MaxSizePartitioner(max_shard_bytes=4)([6, 1]) -> [6, 1]
    {"TF: max_size(4 B) on [6,1]", max_size(4, 0), 6, 1, 6},
    // MaxSizePartitioner(max_shard_bytes=4, max_shards=2)([6, 1]) -> [2, 1]
    {"TF: max_size(4 B, max 2) on [6,1]", max_size(4, 2), 6, 1, 2},
    // MaxSizePartitioner(max_shard_bytes=1024)([6, 1]) -> [1, 1]
    {"TF: max_size(1024 B) on [6,1]", max_size(1024, 0), 6, 1, 1},
    {"max_size(8 B) on [6,1]: 2 rows per shard", max_size(8, 0), 6, 1, 3},
    {"max_size(12 B) on [7,1]: 3 rows per shard, ceil(7 / 3) = 3",
     max_size(12, 0), 7, 1, 3},
    {"max_size smaller than a row still puts one row in each shard",
     max_size(4, 0), 5, 3, 5},
    {"max_size(1 KiB) on [784,256]: 1 row per shard", max_size(1024, 0), 784,
     256, 784},
    {"max_size(1 KiB, max 3) on [784,256]", max_size(1024, 3), 784, 256, 3},
  };
  for (auto& c : cases) {
    INFO(c.what);
    CHECK(num_shards(c.cfg, c.rows, c.cols) == c.expected);
  }
}

TEST_CASE("max_shards left at its default is TensorFlow's default of each "
          "partitioner: 1 for min_size, no cap for max_size",
          "[core][partitioner]") {
  partitioner_config min_default{kind::min_size};
  min_default.min_shard_bytes = 4;
  // MinSizePartitioner(min_shard_bytes=4)([6, 1]) -> [1, 1] (max_shards=1).
  CHECK(min_default.max_shards == 0);
  CHECK(num_shards(min_default, 6, 1) == 1);
  partitioner_config max_default{kind::max_size};
  max_default.max_shard_bytes = 4;
  // MaxSizePartitioner(max_shard_bytes=4)([6, 1]) -> [6, 1] (no cap).
  CHECK(max_default.max_shards == 0);
  CHECK(num_shards(max_default, 6, 1) == 6);
  max_default.max_shard_bytes = 1024;
  CHECK(num_shards(max_default, 784, 256) == 784);
}

TEST_CASE("num_shards counts bytes with the element size it is given",
          "[core][partitioner]") {
  // [6,1] float64 is 48 bytes: min 12 bytes per shard allows 4 shards.
  CHECK(num_shards(min_size(12, 10), 6, 1, 8) == 4);
  // 16 bytes per shard hold two 8-byte rows.
  CHECK(num_shards(max_size(16, 0), 6, 1, 8) == 3);
}

TEST_CASE("num_shards is between 1 and the row count for every kind",
          "[core][partitioner]") {
  const std::vector<partitioner_config> cfgs{
    fixed_shards(0),  fixed_shards(1),   fixed_shards(7),
    fixed_shards(1000), min_size(1, 0),  min_size(1, 1000),
    min_size(1 << 20, 4), max_size(1, 0), max_size(1, 3),
    max_size(1 << 20, 0)};
  for (size_t i = 0; i < cfgs.size(); ++i)
    for (uint64_t rows : {1, 2, 3, 10, 97})
      for (uint64_t cols : {1, 5}) {
        INFO("config " << i << ", rows " << rows << ", cols " << cols);
        auto n = num_shards(cfgs[i], rows, cols);
        CHECK(n >= 1);
        CHECK(n <= rows);
      }
}

TEST_CASE("shard_sizes gives the first rows % shards shards one extra row, "
          "as TensorFlow",
          "[core][partitioner]") {
  struct sizes_case {
    uint64_t rows;
    uint64_t shards;
    std::vector<uint64_t> expected;
  };
  const std::vector<sizes_case> cases{
    {13, 5, {3, 3, 3, 2, 2}},
    {10, 3, {4, 3, 3}},
    {10, 2, {5, 5}},
    {10, 1, {10}},
    {5, 5, {1, 1, 1, 1, 1}},
    {7, 4, {2, 2, 2, 1}},
    {0, 1, {0}},
  };
  for (auto& c : cases) {
    INFO(c.rows << " rows over " << c.shards << " shards");
    CHECK(shard_sizes(c.rows, c.shards) == c.expected);
  }
}

TEST_CASE("shard_sizes always sum to the rows and differ by at most one",
          "[core][partitioner]") {
  for (uint64_t rows = 1; rows <= 40; ++rows)
    for (uint64_t shards = 1; shards <= rows; ++shards) {
      INFO(rows << " rows over " << shards << " shards");
      auto sizes = shard_sizes(rows, shards);
      REQUIRE(sizes.size() == shards);
      CHECK(std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}) == rows);
      CHECK(sizes.front() - sizes.back() <= 1);
      CHECK(sizes.back() >= 1);
      for (size_t i = 1; i < sizes.size(); ++i)
        CHECK(sizes[i] <= sizes[i - 1]);
    }
}

TEST_CASE("parse_partitioner_kind accepts the three names and rejects others "
          "with input_error",
          "[core][partitioner]") {
  CHECK(parse_partitioner_kind("fixed_shards") == kind::fixed_shards);
  CHECK(parse_partitioner_kind("min_size") == kind::min_size);
  CHECK(parse_partitioner_kind("max_size") == kind::max_size);
  for (std::string bad : {"", "fixed", "Fixed_Shards", "min_size ",
                          "variable_axis_size"}) {
    INFO("name \"" << bad << "\"");
    CHECK_THROWS_AS(parse_partitioner_kind(bad), input_error);
    CHECK_THROWS_WITH(parse_partitioner_kind(bad),
                      Catch::Contains("partitioner.type")
                        && Catch::Contains("\"" + bad + "\""));
  }
}
