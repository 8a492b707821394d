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
  auto d = variable_def::dense;
  return {d("dense_0/kernel", 784, 256), d("dense_0/bias", 256, 1),
          d("dense_1/kernel", 256, 128), d("dense_1/bias", 128, 1),
          d("dense_2/kernel", 128, 10),  d("dense_2/bias", 10, 1),
          d("odd", 7, 3),                d("one_row", 1, 5)};
}

/// The dense variables of test_variables() with three tables among them: one
/// with unbounded keys, one with a vocabulary of 1000, one with a vocabulary
/// of 2 (fewer keys than most partitioners ask shards for).
std::vector<variable_def> mixed_variables() {
  auto vars = test_variables();
  vars.insert(vars.begin() + 2, variable_def::table("user", 0, 16, 0.01f));
  vars.insert(vars.begin() + 5, variable_def::table("item", 1000, 8, 0.05f));
  vars.push_back(variable_def::table("tiny", 2, 4, 0.0f));
  return vars;
}

/// The shard count place_variables documents for `var`.
uint64_t expected_shards(const variable_def& var,
                         const partitioner_config& partitioner,
                         uint32_t num_ps) {
  if (var.kind == variable_kind::dense || var.rows > 0)
    return num_shards(partitioner, var.rows, var.cols);
  if (partitioner.type == partitioner_config::kind::fixed_shards)
    return std::max<uint64_t>(partitioner.num_shards, 1);
  return num_ps;
}

/// Checks every invariant placement.hpp documents.
void check_placement(const placement& pl, const std::vector<variable_def>& vars,
                     const partitioner_config& partitioner, uint32_t num_ps) {
  REQUIRE(pl.variables.size() == vars.size());
  REQUIRE(pl.variable_offsets.size() == vars.size());
  REQUIRE(pl.variable_shards.size() == vars.size());
  REQUIRE(pl.ps_sizes.size() == num_ps);
  // Dense variables one after another in the model buffer; tables at 0.
  uint64_t offset = 0;
  std::vector<uint32_t> tables;
  for (uint32_t v = 0; v < vars.size(); ++v) {
    CHECK(pl.variables[v].name == vars[v].name);
    CHECK(pl.variables[v].kind == vars[v].kind);
    if (vars[v].kind == variable_kind::table) {
      tables.push_back(v);
      CHECK(pl.variable_offsets[v] == 0);
      continue;
    }
    CHECK(pl.variable_offsets[v] == offset);
    offset += vars[v].size();
  }
  CHECK(pl.model_size == offset);
  CHECK(pl.tables == tables);
  // Shards in creation order (variable by variable, shard by shard), placed
  // round-robin over dense and table shards alike, each dense variable's
  // shards covering its rows contiguously with TensorFlow's sizes.
  size_t k = 0;
  for (uint32_t v = 0; v < vars.size(); ++v) {
    INFO("variable " << vars[v].name);
    auto n = expected_shards(vars[v], partitioner, num_ps);
    REQUIRE(pl.variable_shards[v].size() == n);
    bool dense = vars[v].kind == variable_kind::dense;
    auto sizes = dense ? shard_sizes(vars[v].rows, n)
                       : std::vector<uint64_t>(n, 0);
    uint64_t row = 0;
    for (uint32_t i = 0; i < n; ++i, ++k) {
      INFO("shard " << i);
      REQUIRE(k < pl.shards.size());
      CHECK(pl.variable_shards[v][i] == k);
      auto& s = pl.shards[k];
      CHECK(s.variable == v);
      CHECK(s.index == i);
      CHECK(s.kind == vars[v].kind);
      CHECK(s.ps == k % num_ps);
      if (!dense) {
        CHECK(s.row_begin == 0);
        CHECK(s.row_end == 0);
        CHECK(s.size == 0);
        CHECK(s.model_offset == 0);
        CHECK(s.ps_offset == 0);
        continue;
      }
      CHECK(s.row_begin == row);
      CHECK(s.row_end - s.row_begin == sizes[i]);
      CHECK(s.size == (s.row_end - s.row_begin) * vars[v].cols);
      CHECK(s.model_offset
            == pl.variable_offsets[v] + s.row_begin * vars[v].cols);
      row = s.row_end;
    }
    if (dense)
      CHECK(row == vars[v].rows);
  }
  CHECK(k == pl.shards.size());
  // Each server's dense shards lie back to back in its buffer, in creation
  // order, and shards_of lists all its shards in that order.
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
      if (s.kind == variable_kind::table)
        continue;
      CHECK(s.ps_offset == ps_offset);
      ps_offset += s.size;
    }
    CHECK(pl.ps_sizes[p] == ps_offset);
    total += pl.ps_sizes[p];
  }
  CHECK(total == pl.model_size);
}

/// How many of `keys` land on each shard of table `v`.
std::vector<size_t> shard_counts(const placement& pl, uint32_t v,
                                 const std::vector<uint64_t>& keys) {
  std::vector<size_t> counts(pl.variable_shards[v].size());
  for (auto k : keys)
    ++counts.at(pl.shard_of_key(v, k));
  return counts;
}

/// TensorFlow's own formula for "div" (embedding_ops.py,
/// _embedding_lookup_and_transform): max(id // (q + 1), (id - r) // q).
uint64_t tf_div_shard(uint64_t key, uint64_t vocabulary, uint64_t n) {
  auto q = vocabulary / n;
  auto r = vocabulary % n;
  auto a = key / (q + 1);
  // (id - r) // q with Python's floor division (id - r may be negative).
  int64_t diff = static_cast<int64_t>(key) - static_cast<int64_t>(r);
  int64_t b = diff >= 0 ? diff / static_cast<int64_t>(q)
                        : -((-diff + static_cast<int64_t>(q) - 1)
                            / static_cast<int64_t>(q));
  return std::max<int64_t>(static_cast<int64_t>(a), b);
}

} // namespace

TEST_CASE("a small placement matches the round-robin layout worked out by "
          "hand",
          "[core][placement]") {
  // a: 5 x 2 in shards of 3 and 2 rows; b: 3 x 1 in shards of 2 and 1 rows.
  // Shards in creation order a0, a1, b0, b1 go to ps 0, 1, 2, 0.
  std::vector<variable_def> vars{variable_def::dense("a", 5, 2),
                                 variable_def::dense("b", 3, 1)};
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

TEST_CASE("placements over 1, 2 and 3 parameter servers, with and without "
          "tables, keep every documented invariant",
          "[core][placement]") {
  for (auto vars : {test_variables(), mixed_variables()})
    for (auto partitioner :
         {fixed_shards(0), fixed_shards(1), fixed_shards(2), fixed_shards(3),
          fixed_shards(5), max_size(64 * 1024), max_size(1024)})
      for (uint32_t num_ps : {1u, 2u, 3u}) {
        INFO(vars.size() << " variables, " << num_ps
                         << " ps, partitioner kind "
                         << static_cast<int>(partitioner.type)
                         << ", num_shards " << partitioner.num_shards);
        auto pl = place_variables(vars, partitioner, num_ps);
        check_placement(pl, vars, partitioner, num_ps);
      }
}

TEST_CASE("gather_shards then scatter_shards round-trips a model buffer "
          "and skips tables",
          "[core][placement]") {
  auto vars = mixed_variables();
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
  std::vector<variable_def> dup{variable_def::dense("w", 2, 2),
                                variable_def::dense("b", 2, 1),
                                variable_def::dense("w", 3, 1)};
  CHECK_THROWS_AS(place_variables(dup, fixed_shards(1), 2), input_error);
  CHECK_THROWS_WITH(place_variables(dup, fixed_shards(1), 2),
                    Catch::Contains("w") && Catch::Contains("twice"));
  std::vector<variable_def> ok{variable_def::dense("w", 2, 2)};
  CHECK_THROWS_AS(place_variables(ok, fixed_shards(1), 0), input_error);
  CHECK_THROWS_WITH(place_variables(ok, fixed_shards(1), 0),
                    Catch::Contains("cluster.ps"));
  std::vector<variable_def> empty_rows{variable_def::dense("w", 0, 2)};
  CHECK_THROWS_AS(place_variables(empty_rows, fixed_shards(1), 1),
                  input_error);
  std::vector<variable_def> empty_cols{variable_def::dense("w", 2, 0)};
  CHECK_THROWS_AS(place_variables(empty_cols, fixed_shards(1), 1),
                  input_error);
}

TEST_CASE("table shards continue the round-robin of dense shards, worked out "
          "by hand",
          "[core][placement]") {
  // w: 4 x 2 in 2 shards; t: unbounded, 2 shards (fixed_shards); v:
  // vocabulary 3 in 2 shards (2 and 1 keys); b: 1 x 1 in 1 shard.
  // Creation order w0 w1 t0 t1 v0 v1 b0 -> ps 0 1 2 0 1 2 0.
  std::vector<variable_def> vars{
    variable_def::dense("w", 4, 2), variable_def::table("t", 0, 8, 0.1f),
    variable_def::table("v", 3, 4, 0.1f), variable_def::dense("b", 1, 1)};
  auto pl = place_variables(vars, fixed_shards(2), 3, table_partition::div);
  REQUIRE(pl.shards.size() == 7);
  const std::vector<uint32_t> ps{0, 1, 2, 0, 1, 2, 0};
  const std::vector<variable_kind> kinds{
    variable_kind::dense, variable_kind::dense, variable_kind::table,
    variable_kind::table, variable_kind::table, variable_kind::table,
    variable_kind::dense};
  for (size_t k = 0; k < 7; ++k) {
    INFO("shard " << k);
    CHECK(pl.shards[k].ps == ps[k]);
    CHECK(pl.shards[k].kind == kinds[k]);
  }
  CHECK(pl.variable_shards
        == std::vector<std::vector<uint32_t>>{{0, 1}, {2, 3}, {4, 5}, {6}});
  CHECK(pl.tables == std::vector<uint32_t>{1, 2});
  CHECK(pl.variable_offsets == std::vector<uint64_t>{0, 0, 0, 8});
  CHECK(pl.model_size == 9);
  CHECK(pl.ps_sizes == std::vector<uint64_t>{4 + 1, 4, 0});
  // b0 follows w0 in ps 0's dense region: the tables took no room.
  CHECK(pl.shards[6].ps_offset == 4);
  CHECK(pl.shards[6].model_offset == 8);
  CHECK(pl.fixed_vocabulary_partition == table_partition::div);
  CHECK(pl.partition_of(1) == table_partition::hash);
  CHECK(pl.partition_of(2) == table_partition::div);
  // v's keys 0, 1 -> shard 0 (id 4, ps 1); key 2 -> shard 1 (id 5, ps 2).
  CHECK(pl.shard_id_of_key(2, 0) == 4);
  CHECK(pl.shard_id_of_key(2, 1) == 4);
  CHECK(pl.shard_id_of_key(2, 2) == 5);
  for (uint64_t key : {0ull, 1ull, 77ull, ~0ull}) {
    auto id = pl.shard_id_of_key(1, key);
    CHECK(pl.shards[id].variable == 1);
    CHECK(pl.shards[id].index == pl.shard_of_key(1, key));
  }
}

TEST_CASE("a table's shard count follows its vocabulary, or num_shards, or "
          "the number of servers",
          "[core][placement]") {
  std::vector<variable_def> vars{variable_def::table("unbounded", 0, 16, 0),
                                 variable_def::table("vocab", 1000, 16, 0),
                                 variable_def::table("tiny", 2, 16, 0)};
  auto count = [&](const partitioner_config& p, uint32_t num_ps) {
    auto pl = place_variables(vars, p, num_ps);
    std::vector<size_t> result;
    for (auto& ids : pl.variable_shards)
      result.push_back(ids.size());
    return result;
  };
  // fixed_shards: as asked (at least 1), capped by a vocabulary.
  CHECK(count(fixed_shards(4), 3) == std::vector<size_t>{4, 4, 2});
  CHECK(count(fixed_shards(0), 3) == std::vector<size_t>{1, 1, 1});
  // Other partitioners: one shard per server without a vocabulary; with one,
  // the partitioner applied to vocabulary x dim (1000 x 16 x 4 bytes = 64000
  // bytes in shards of at most 16000 bytes: 4; 2 x 16 x 4 bytes: 1).
  CHECK(count(max_size(16000), 3) == std::vector<size_t>{3, 4, 1});
  CHECK(count(max_size(16000), 5) == std::vector<size_t>{5, 4, 1});
}

TEST_CASE("mod, div and hash send every key of the hand-computed cases to "
          "TensorFlow's shard",
          "[core][placement]") {
  // TF's documentation: 13 ids over 5 partitions.
  //   mod: [[0, 5, 10], [1, 6, 11], [2, 7, 12], [3, 8], [4, 9]]
  //   div: [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10], [11, 12]]
  std::vector<variable_def> v13{variable_def::table("e", 13, 4, 0)};
  auto mod = place_variables(v13, fixed_shards(5), 1, table_partition::mod);
  auto div = place_variables(v13, fixed_shards(5), 1, table_partition::div);
  const std::vector<uint32_t> mod_shard{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2};
  const std::vector<uint32_t> div_shard{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4};
  for (uint64_t key = 0; key < 13; ++key) {
    INFO("key " << key);
    CHECK(mod.shard_of_key(0, key) == mod_shard[key]);
    CHECK(div.shard_of_key(0, key) == div_shard[key]);
  }
  // 10 ids over 3 shards: div ranges of 4, 3, 3.
  std::vector<variable_def> v10{variable_def::table("e", 10, 4, 0)};
  auto div10 = place_variables(v10, fixed_shards(3), 2, table_partition::div);
  std::vector<uint64_t> all(10);
  std::iota(all.begin(), all.end(), 0);
  CHECK(shard_counts(div10, 0, all) == std::vector<size_t>{4, 3, 3});
  CHECK(div10.shard_of_key(0, 3) == 0);
  CHECK(div10.shard_of_key(0, 4) == 1);
  CHECK(div10.shard_of_key(0, 6) == 1);
  CHECK(div10.shard_of_key(0, 7) == 2);
  // Every vocabulary up to 60 over every shard count up to it: div equals
  // TF's max() formula, and each shard's keys are shard_sizes() long.
  for (uint64_t vocab = 1; vocab <= 60; ++vocab)
    for (uint64_t n = 1; n <= vocab; ++n) {
      INFO(vocab << " ids over " << n << " shards");
      std::vector<variable_def> v{variable_def::table("e", vocab, 1, 0)};
      auto pl = place_variables(v, fixed_shards(n), 3, table_partition::div);
      REQUIRE(pl.variable_shards[0].size() == n);
      std::vector<uint64_t> keys(vocab);
      std::iota(keys.begin(), keys.end(), 0);
      size_t wrong = 0;
      for (auto key : keys)
        if (pl.shard_of_key(0, key) != tf_div_shard(key, vocab, n))
          ++wrong;
      CHECK(wrong == 0);
      auto sizes = shard_sizes(vocab, n);
      CHECK(shard_counts(pl, 0, keys)
            == std::vector<size_t>(sizes.begin(), sizes.end()));
    }
  // hash: mix64(key) % n, whatever the fixed-vocabulary strategy.
  std::vector<variable_def> unbounded{variable_def::table("u", 0, 4, 0)};
  auto hash = place_variables(unbounded, fixed_shards(7), 2,
                              table_partition::div);
  for (uint64_t key : {0ull, 1ull, 12345ull, ~0ull})
    CHECK(hash.shard_of_key(0, key) == mix64(key) % 7);
}

TEST_CASE("keys spread evenly over four shards under mod, div and hash",
          "[core][placement]") {
  const uint64_t vocab = 1000000;
  std::vector<variable_def> vars{variable_def::table("fixed", vocab, 8, 0),
                                 variable_def::table("unbounded", 0, 8, 0)};
  std::mt19937_64 rng{11};
  std::vector<uint64_t> random_keys(100000), sequential(100000),
    random_in_vocab(100000), strided(100000);
  for (size_t i = 0; i < random_keys.size(); ++i) {
    random_keys[i] = rng();
    random_in_vocab[i] = rng() % vocab;
    sequential[i] = 500000 + i;
    strided[i] = 4 * i; // all one residue mod 4
  }
  auto even = [](const std::vector<size_t>& counts, double tolerance) {
    size_t total = 0;
    for (auto c : counts)
      total += c;
    double expected = static_cast<double>(total) / counts.size();
    for (auto c : counts)
      if (std::abs(c - expected) > tolerance * expected)
        return false;
    return true;
  };
  for (auto strategy : {table_partition::mod, table_partition::div}) {
    INFO(to_string(strategy));
    auto pl = place_variables(vars, fixed_shards(4), 4, strategy);
    // Fixed vocabulary: uniform keys spread within 3%.
    CHECK(even(shard_counts(pl, 0, random_in_vocab), 0.03));
    // The whole vocabulary: exactly even under both (1M / 4).
    std::vector<size_t> whole(4);
    for (uint64_t k = 0; k < vocab; ++k)
      ++whole[pl.shard_of_key(0, k)];
    CHECK(whole == std::vector<size_t>(4, vocab / 4));
    // Unbounded keys hash: random, sequential and strided keys spread within
    // 3% (a binomial's sd is 0.5% of 25000 here).
    CHECK(pl.partition_of(1) == table_partition::hash);
    CHECK(even(shard_counts(pl, 1, random_keys), 0.03));
    CHECK(even(shard_counts(pl, 1, sequential), 0.03));
    CHECK(even(shard_counts(pl, 1, strided), 0.03));
  }
  // Sequential keys under mod are exactly even; under div they fill one
  // range (by design: div keeps neighbouring ids together).
  auto mod = place_variables(vars, fixed_shards(4), 4, table_partition::mod);
  CHECK(shard_counts(mod, 0, sequential) == std::vector<size_t>(4, 25000));
  auto div = place_variables(vars, fixed_shards(4), 4, table_partition::div);
  CHECK(shard_counts(div, 0, sequential)
        == std::vector<size_t>{0, 0, 100000, 0});
}

TEST_CASE("mix64 is splitmix64's finaliser", "[core][placement]") {
  // splitmix64 seeded with 0 first outputs mix64(0x9e3779b97f4a7c15).
  CHECK(mix64(0x9e3779b97f4a7c15ULL) == 0xe220a8397b1dcdafULL);
  CHECK(mix64(0) == 0);
  CHECK(mix64(1) != 1);
}

TEST_CASE("table partitions and variable kinds parse and print by name",
          "[core][placement]") {
  CHECK(parse_table_partition("mod", "f") == table_partition::mod);
  CHECK(parse_table_partition("div", "f") == table_partition::div);
  CHECK_THROWS_AS(parse_table_partition("hash", "model.table_partition"),
                  input_error);
  CHECK_THROWS_WITH(parse_table_partition("modulo", "model.table_partition"),
                    Catch::Contains("model.table_partition")
                      && Catch::Contains("modulo"));
  CHECK(std::string{to_string(table_partition::mod)} == "mod");
  CHECK(std::string{to_string(table_partition::div)} == "div");
  CHECK(std::string{to_string(table_partition::hash)} == "hash");
  CHECK(std::string{to_string(variable_kind::dense)} == "dense");
  CHECK(std::string{to_string(variable_kind::table)} == "table");
}

TEST_CASE("place_variables rejects a table without a dimension, a bad "
          "init_scale, and a table named like another variable",
          "[core][placement]") {
  std::vector<variable_def> no_dim{variable_def::table("t", 10, 0, 0.1f)};
  CHECK_THROWS_AS(place_variables(no_dim, fixed_shards(1), 1), input_error);
  CHECK_THROWS_WITH(place_variables(no_dim, fixed_shards(1), 1),
                    Catch::Contains("t") && Catch::Contains("dimension"));
  for (float bad : {-0.1f, std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<variable_def> v{variable_def::table("t", 10, 4, bad)};
    CHECK_THROWS_AS(place_variables(v, fixed_shards(1), 1), input_error);
  }
  std::vector<variable_def> dup{variable_def::dense("w", 2, 2),
                                variable_def::table("w", 0, 4, 0)};
  CHECK_THROWS_WITH(place_variables(dup, fixed_shards(1), 1),
                    Catch::Contains("w") && Catch::Contains("twice"));
  // Unbounded keys (rows 0) are fine for a table.
  std::vector<variable_def> ok{variable_def::table("t", 0, 4, 0)};
  CHECK_NOTHROW(place_variables(ok, fixed_shards(1), 1));
}

TEST_CASE("region_prefix gives each server's part of a model prefix, and a "
          "run of a region scatters to where its floats belong",
          "[core][placement]") {
  auto vars = mixed_variables();
  std::mt19937 rng{23};
  std::uniform_real_distribution<float> dist{-1.0f, 1.0f};
  for (uint32_t num_ps : {1u, 2u, 3u}) {
    INFO(num_ps << " ps");
    auto pl = place_variables(vars, fixed_shards(3), num_ps);
    std::vector<float> model(pl.model_size);
    for (auto& x : model)
      x = dist(rng);
    for (uint64_t end : {uint64_t{0}, uint64_t{1}, uint64_t{1000},
                         uint64_t{784 * 256 + 256}, pl.model_size / 2,
                         pl.model_size - 1, pl.model_size}) {
      INFO("model prefix " << end);
      uint64_t sum = 0;
      for (uint32_t p = 0; p < num_ps; ++p) {
        // Counted float by float: the region's floats below `end` ...
        uint64_t below = 0;
        uint64_t last = 0;
        for (auto& s : pl.shards)
          if (s.ps == p && s.kind == variable_kind::dense)
            for (uint64_t i = 0; i < s.size; ++i)
              if (s.model_offset + i < end) {
                ++below;
                last = s.ps_offset + i + 1;
              }
        auto n = region_prefix(pl, p, end);
        CHECK(n == below);
        // ... are a prefix of it.
        CHECK(last == below);
        sum += n;
      }
      CHECK(sum == end);
    }
    // Runs that begin and end inside shards, scattered one by one, put
    // back the whole model.
    std::vector<float> back(pl.model_size, std::nanf(""));
    for (uint32_t p = 0; p < num_ps; ++p) {
      auto region = gather_shards(pl, p, model.data());
      uint64_t from = 0;
      for (uint64_t step : {uint64_t{1}, uint64_t{777}, uint64_t{5000},
                            uint64_t{31}, uint64_t{100000}}) {
        auto to = std::min<uint64_t>(from + step, region.size());
        scatter_shards(pl, p, from, to, region.data() + from, back.data());
        from = to;
      }
      scatter_shards(pl, p, from, region.size(), region.data() + from,
                     back.data());
    }
    CHECK(back == model); // NaN != NaN: every float was written back
  }
}
