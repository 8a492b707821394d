#include "core/placement.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"

using namespace actorps;

namespace {

partitioner_config fixed_shards(uint64_t n) {
  partitioner_config cfg;
  cfg.type = partitioner_config::kind::fixed_shards;
  cfg.num_shards = n;
  return cfg;
}

partitioner_config max_size(uint64_t bytes) {
  partitioner_config cfg;
  cfg.type = partitioner_config::kind::max_size;
  cfg.max_shard_bytes = bytes;
  cfg.max_shards = 0;
  return cfg;
}

/// The variables of an MLP 784-256-128-10 and two odd shapes.
std::vector<variable_def> test_variables() {
  return {{"dense_0/kernel", 784, 256}, {"dense_0/bias", 256, 1},
          {"dense_1/kernel", 256, 128}, {"dense_1/bias", 128, 1},
          {"dense_2/kernel", 128, 10},  {"dense_2/bias", 10, 1},
          {"odd", 7, 3},                {"one_row", 1, 5}};
}

/// Checks every invariant placement.hpp documents.
void check_placement(const placement& pl, const std::vector<variable_def>& vars,
                     const partitioner_config& partitioner, uint32_t num_ps) {
  REQUIRE(pl.variables.size() == vars.size());
  REQUIRE(pl.variable_offsets.size() == vars.size());
  REQUIRE(pl.ps_sizes.size() == num_ps);
  // Variables one after another in the model buffer.
  uint64_t offset = 0;
  for (size_t v = 0; v < vars.size(); ++v) {
    CHECK(pl.variables[v].name == vars[v].name);
    CHECK(pl.variable_offsets[v] == offset);
    offset += vars[v].size();
  }
  CHECK(pl.model_size == offset);
  // Shards in creation order (variable by variable, shard by shard), placed
  // round-robin, each variable's shards covering its rows contiguously with
  // TensorFlow's sizes.
  size_t k = 0;
  for (uint32_t v = 0; v < vars.size(); ++v) {
    INFO("variable " << vars[v].name);
    auto n = num_shards(partitioner, vars[v].rows, vars[v].cols);
    auto sizes = shard_sizes(vars[v].rows, n);
    uint64_t row = 0;
    for (uint32_t i = 0; i < n; ++i, ++k) {
      INFO("shard " << i);
      REQUIRE(k < pl.shards.size());
      auto& s = pl.shards[k];
      CHECK(s.variable == v);
      CHECK(s.index == i);
      CHECK(s.ps == k % num_ps);
      CHECK(s.row_begin == row);
      CHECK(s.row_end - s.row_begin == sizes[i]);
      CHECK(s.size == (s.row_end - s.row_begin) * vars[v].cols);
      CHECK(s.model_offset
            == pl.variable_offsets[v] + s.row_begin * vars[v].cols);
      row = s.row_end;
    }
    CHECK(row == vars[v].rows);
  }
  CHECK(k == pl.shards.size());
  // Each server's shards lie back to back in its buffer, in creation order,
  // and shards_of lists them in that order.
  uint64_t total = 0;
  for (uint32_t p = 0; p < num_ps; ++p) {
    INFO("ps " << p);
    std::vector<size_t> created; // indices into pl.shards, ascending
    for (size_t i = 0; i < pl.shards.size(); ++i)
      if (pl.shards[i].ps == p)
        created.push_back(i);
    auto listed = pl.shards_of(p);
    REQUIRE(listed.size() == created.size());
    uint64_t ps_offset = 0;
    for (size_t j = 0; j < listed.size(); ++j) {
      auto& s = pl.shards[created[j]];
      CHECK(listed[j].variable == s.variable);
      CHECK(listed[j].index == s.index);
      CHECK(s.ps_offset == ps_offset);
      ps_offset += s.size;
    }
    CHECK(pl.ps_sizes[p] == ps_offset);
    total += pl.ps_sizes[p];
  }
  CHECK(total == pl.model_size);
}

} // namespace

TEST_CASE("a small placement matches the round-robin layout worked out by "
          "hand",
          "[core][placement]") {
  // a: 5 x 2 in shards of 3 and 2 rows; b: 3 x 1 in shards of 2 and 1 rows.
  // Shards in creation order a0, a1, b0, b1 go to ps 0, 1, 2, 0.
  std::vector<variable_def> vars{{"a", 5, 2}, {"b", 3, 1}};
  auto pl = place_variables(vars, fixed_shards(2), 3);
  CHECK(pl.variable_offsets == std::vector<uint64_t>{0, 10});
  CHECK(pl.model_size == 13);
  CHECK(pl.ps_sizes == std::vector<uint64_t>{6 + 1, 4, 2});
  struct expected_shard {
    uint32_t variable, index;
    uint64_t row_begin, row_end;
    uint32_t ps;
    uint64_t ps_offset, model_offset, size;
  };
  const std::vector<expected_shard> expected{
    {0, 0, 0, 3, 0, 0, 0, 6},
    {0, 1, 3, 5, 1, 0, 6, 4},
    {1, 0, 0, 2, 2, 0, 10, 2},
    {1, 1, 2, 3, 0, 6, 12, 1},
  };
  REQUIRE(pl.shards.size() == expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    INFO("shard " << k);
    auto& s = pl.shards[k];
    auto& e = expected[k];
    CHECK(s.variable == e.variable);
    CHECK(s.index == e.index);
    CHECK(s.row_begin == e.row_begin);
    CHECK(s.row_end == e.row_end);
    CHECK(s.ps == e.ps);
    CHECK(s.ps_offset == e.ps_offset);
    CHECK(s.model_offset == e.model_offset);
    CHECK(s.size == e.size);
  }
  auto on_0 = pl.shards_of(0);
  REQUIRE(on_0.size() == 2);
  CHECK(on_0[0].variable == 0);
  CHECK(on_0[1].variable == 1);
  CHECK(pl.shards_of(3).empty());
}

TEST_CASE("placements over 1, 2 and 3 parameter servers keep every "
          "documented invariant",
          "[core][placement]") {
  auto vars = test_variables();
  for (auto partitioner : {fixed_shards(1), fixed_shards(2), fixed_shards(3),
                           fixed_shards(5), max_size(64 * 1024)})
    for (uint32_t num_ps : {1u, 2u, 3u}) {
      INFO(num_ps << " ps, partitioner kind "
                  << static_cast<int>(partitioner.type) << ", num_shards "
                  << partitioner.num_shards);
      auto pl = place_variables(vars, partitioner, num_ps);
      check_placement(pl, vars, partitioner, num_ps);
    }
}

TEST_CASE("gather_shards then scatter_shards round-trips a model buffer",
          "[core][placement]") {
  auto vars = test_variables();
  std::mt19937 rng{17};
  std::uniform_real_distribution<float> dist{-1.0f, 1.0f};
  for (uint32_t num_ps : {2u, 3u}) {
    INFO(num_ps << " ps");
    auto pl = place_variables(vars, fixed_shards(3), num_ps);
    std::vector<float> model(pl.model_size);
    for (auto& x : model)
      x = dist(rng);
    std::vector<float_vector> ps_buffers(num_ps);
    for (uint32_t p = 0; p < num_ps; ++p) {
      ps_buffers[p] = gather_shards(pl, p, model.data());
      CHECK(ps_buffers[p].size() == pl.ps_sizes[p]);
      // Every float of the server's buffer was written.
      CHECK(std::none_of(ps_buffers[p].begin(), ps_buffers[p].end(),
                         [](float x) { return std::isnan(x); }));
    }
    // Each shard's rows are where ps_offset says.
    size_t misplaced = 0;
    for (auto& s : pl.shards)
      for (uint64_t i = 0; i < s.size; ++i)
        if (ps_buffers[s.ps][s.ps_offset + i] != model[s.model_offset + i])
          ++misplaced;
    CHECK(misplaced == 0);
    std::vector<float> back(pl.model_size, std::nanf(""));
    for (uint32_t p = 0; p < num_ps; ++p)
      scatter_shards(pl, p, ps_buffers[p].data(), back.data());
    CHECK(back == model); // NaN != NaN: every float was written back
  }
}

TEST_CASE("place_variables rejects duplicate names, empty variables and 0 "
          "parameter servers with input_error",
          "[core][placement]") {
  std::vector<variable_def> dup{{"w", 2, 2}, {"b", 2, 1}, {"w", 3, 1}};
  CHECK_THROWS_AS(place_variables(dup, fixed_shards(1), 2), input_error);
  CHECK_THROWS_WITH(place_variables(dup, fixed_shards(1), 2),
                    Catch::Contains("w") && Catch::Contains("twice"));
  std::vector<variable_def> ok{{"w", 2, 2}};
  CHECK_THROWS_AS(place_variables(ok, fixed_shards(1), 0), input_error);
  CHECK_THROWS_WITH(place_variables(ok, fixed_shards(1), 0),
                    Catch::Contains("cluster.ps"));
  std::vector<variable_def> empty_rows{{"w", 0, 2}};
  CHECK_THROWS_AS(place_variables(empty_rows, fixed_shards(1), 1),
                  input_error);
  std::vector<variable_def> empty_cols{{"w", 2, 0}};
  CHECK_THROWS_AS(place_variables(empty_cols, fixed_shards(1), 1),
                  input_error);
}
