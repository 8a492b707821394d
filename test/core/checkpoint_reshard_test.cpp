// Offline re-sharding (core/checkpoint_reshard.hpp): a checkpoint's dense
// rows and table rows, with their optimizer slots and steps, re-cut for
// another number of parameter servers, each landing exactly once where the
// target placement puts it.

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "core/checkpoint_reshard.hpp"
#include "core/error.hpp"
#include "core/placement.hpp"

using namespace actorps;

namespace {

// A dense variable with Adam's two slots, a fixed-vocabulary table and an
// unbounded (hashed) table with adagrad's one slot.
constexpr uint64_t dense_rows = 11;
constexpr uint64_t dense_cols = 3;
constexpr uint64_t vocabulary = 40;
constexpr uint64_t dim = 4;

std::vector<variable_def> variables() {
  return {variable_def::dense("dense/kernel", dense_rows, dense_cols),
          variable_def::dense("dense/bias", 2, 1),
          variable_def::table("emb/user", vocabulary, dim, 0.1f),
          variable_def::table("emb/hashed", 0, 2, 0.1f)};
}

/// The job's layout on `ps` servers, one shard per server per variable (the
/// jobs' default: fixed_shards with num_shards = ps).
placement layout(uint32_t ps, table_partition tp) {
  partitioner_config pc;
  pc.num_shards = ps;
  return place_variables(variables(), pc, ps, tp);
}

/// A value that names its variable, row or key, column and array (0:
/// values, 1 + i: slot i), so that a misplaced float shows.
float value_of(int var, uint64_t row, uint64_t col, int array) {
  return static_cast<float>(var) * 100000.0f + static_cast<float>(row) * 10.0f
         + static_cast<float>(col) + static_cast<float>(array) * 0.25f;
}

/// The keys of the tables: every third key of the vocabulary, and sparse
/// 64-bit keys for the hashed one.
std::vector<uint64_t> keys_of(int var) {
  std::vector<uint64_t> out;
  if (var == 2) {
    for (uint64_t k = 0; k < vocabulary; k += 3)
      out.push_back(k);
  } else {
    for (uint64_t i = 1; i <= 25; ++i)
      out.push_back(i * 0x9e3779b97f4a7c15ULL);
  }
  return out;
}

/// A whole checkpoint of the job placed as `pl`, every float given by
/// value_of and every table row's step its key % 97 + 1.
checkpoint_state checkpoint_of(const placement& pl) {
  checkpoint_state st;
  st.global_step = 120;
  st.epoch = 1;
  st.step_in_epoch = 20;
  st.workers = {{1, 640}, {1, 576}};
  st.job = {{"model", "test"}};
  st.id = 7;
  for (size_t p = 0; p < pl.ps_sizes.size(); ++p) {
    st.ps_clocks.push_back(120 - p); // one restored from an older checkpoint
    st.optimizer_steps.push_back(118 + p);
  }
  for (auto& s : pl.shards) {
    auto& var = pl.variables[s.variable];
    int v = static_cast<int>(s.variable);
    checkpoint_shard c;
    c.variable = var.name;
    c.index = s.index;
    c.cols = var.cols;
    c.ps = s.ps;
    c.table = s.kind == variable_kind::table;
    size_t slots = c.table ? 1 : 2;
    c.slots.resize(slots);
    auto add_row = [&](uint64_t row) {
      for (uint64_t col = 0; col < var.cols; ++col) {
        c.values.push_back(value_of(v, row, col, 0));
        for (size_t i = 0; i < slots; ++i)
          c.slots[i].push_back(value_of(v, row, col, 1 + static_cast<int>(i)));
      }
    };
    if (c.table) {
      for (auto key : keys_of(v))
        if (pl.shard_of_key(s.variable, key) == s.index) {
          c.keys.push_back(key);
          c.steps.push_back(key % 97 + 1);
          add_row(key);
        }
    } else {
      c.row_begin = s.row_begin;
      c.row_end = s.row_end;
      for (auto r = s.row_begin; r < s.row_end; ++r)
        add_row(r);
    }
    st.shards.push_back(std::move(c));
  }
  return st;
}

/// Every float of `st` by (variable, global row or key, column, array), and
/// every table row's step by (variable, key); REQUIREs that none appears
/// twice.
struct contents {
  std::map<std::tuple<std::string, uint64_t, uint64_t, size_t>, float> floats;
  std::map<std::pair<std::string, uint64_t>, uint64_t> steps;
};

contents contents_of(const checkpoint_state& st) {
  contents out;
  for (auto& c : st.shards) {
    auto rows = c.table ? c.keys.size() : c.row_end - c.row_begin;
    REQUIRE(c.values.size() == rows * c.cols);
    for (uint64_t r = 0; r < rows; ++r) {
      auto id = c.table ? c.keys[r] : c.row_begin + r;
      if (c.table)
        REQUIRE(out.steps.emplace(std::pair{c.variable, id}, c.steps[r])
                  .second);
      for (uint64_t col = 0; col < c.cols; ++col) {
        auto at = r * c.cols + col;
        REQUIRE(out.floats.emplace(std::tuple{c.variable, id, col, size_t{0}},
                                   c.values[at])
                  .second);
        for (size_t i = 0; i < c.slots.size(); ++i)
          REQUIRE(out.floats
                    .emplace(std::tuple{c.variable, id, col, i + 1},
                             c.slots[i][at])
                    .second);
      }
    }
  }
  return out;
}

/// Re-shards a checkpoint of `from` servers onto `to` and checks that every
/// float and step lands once, in the shard the target places it in.
void check_reshard(uint32_t from, uint32_t to, table_partition tp) {
  auto src = layout(from, tp);
  auto dst = layout(to, tp);
  auto st = checkpoint_of(src);
  REQUIRE(checkpoint_fits_placement(st, src));
  REQUIRE_FALSE(checkpoint_fits_placement(st, dst));
  auto out = reshard_checkpoint(st, dst);
  auto& res = out.state;
  CHECK(checkpoint_fits_placement(res, dst));
  size_t dense = 0;
  for (auto& s : dst.shards)
    dense += s.kind == variable_kind::dense ? 1 : 0;
  CHECK(out.dense_shards == dense);
  CHECK(out.table_shards == dst.shards.size() - dense);
  // Global progress carried; per-server counts one per new server, the
  // largest of the old ones.
  CHECK(res.global_step == 120);
  CHECK(res.epoch == 1);
  CHECK(res.step_in_epoch == 20);
  REQUIRE(res.workers.size() == 2);
  CHECK(res.workers[1].epoch == 1);
  CHECK(res.workers[1].offset == 576);
  CHECK(res.job == st.job);
  CHECK(res.id == 7);
  CHECK_FALSE(res.delta);
  CHECK(res.ps_clocks == std::vector<uint64_t>(to, 120));
  CHECK(res.optimizer_steps == std::vector<uint64_t>(to, 118 + from - 1));
  // Every float and step exactly once, equal to the original's.
  auto a = contents_of(st);
  auto b = contents_of(res);
  CHECK(a.floats.size() == b.floats.size());
  CHECK(a.floats == b.floats);
  CHECK(a.steps == b.steps);
  // Each shard where the target places it: its server, its rows, its keys.
  REQUIRE(res.shards.size() == dst.shards.size());
  for (size_t id = 0; id < dst.shards.size(); ++id) {
    auto& s = dst.shards[id];
    auto& c = res.shards[id];
    CHECK(c.variable == dst.variables[s.variable].name);
    CHECK(c.index == s.index);
    CHECK(c.ps == s.ps);
    CHECK(c.slots.size() == (c.table ? 1u : 2u));
    if (c.table) {
      for (auto key : c.keys)
        CHECK(dst.shard_of_key(s.variable, key) == s.index);
    } else {
      CHECK(c.row_begin == s.row_begin);
      CHECK(c.row_end == s.row_end);
      CHECK(c.values.front() == value_of(static_cast<int>(s.variable),
                                         s.row_begin, 0, 0));
    }
  }
}

} // namespace

TEST_CASE("a checkpoint of 2 ps re-sharded onto 3 has every value, slot and "
          "step once, in the shard the new placement puts it",
          "[checkpoint][reshard]") {
  check_reshard(2, 3, table_partition::mod);
  check_reshard(2, 3, table_partition::div);
}

TEST_CASE("a checkpoint of 3 ps re-sharded onto 1 has every value, slot and "
          "step once, on the one server",
          "[checkpoint][reshard]") {
  check_reshard(3, 1, table_partition::mod);
  check_reshard(3, 1, table_partition::div);
}

TEST_CASE("re-sharding onto the same placement gives the same shards",
          "[checkpoint][reshard]") {
  auto pl = layout(2, table_partition::mod);
  auto st = checkpoint_of(pl);
  auto res = reshard_checkpoint(st, pl).state;
  REQUIRE(res.shards.size() == st.shards.size());
  for (size_t i = 0; i < st.shards.size(); ++i) {
    CHECK(res.shards[i].values == st.shards[i].values);
    CHECK(res.shards[i].slots == st.shards[i].slots);
    CHECK(res.shards[i].keys == st.shards[i].keys);
    CHECK(res.shards[i].steps == st.shards[i].steps);
  }
}

TEST_CASE("a checkpoint that does not fit the variables is refused by "
          "re-sharding",
          "[checkpoint][reshard]") {
  auto src = layout(2, table_partition::mod);
  auto dst = layout(3, table_partition::mod);
  auto refused = [&](checkpoint_state st, const std::string& words) {
    CHECK_THROWS_WITH(reshard_checkpoint(st, dst),
                      Catch::Matchers::Contains(words));
  };
  auto st = checkpoint_of(src);
  SECTION("a delta") {
    st.delta = true;
    refused(st, "needs a whole checkpoint");
  }
  SECTION("a variable the job does not have") {
    st.shards[0].variable = "other";
    refused(st, "a variable other, which the job does not");
  }
  SECTION("a dense variable with rows left out") {
    st.shards.erase(st.shards.begin()); // dense/kernel's first shard
    refused(st, "the shards of dense/kernel leave out rows 0-");
  }
  SECTION("a dense variable of other rows") {
    auto& last = st.shards[src.variable_shards[0].back()];
    last.row_end += 1;
    last.values.resize(last.values.size() + dense_cols);
    for (auto& s : last.slots)
      s.resize(last.values.size());
    refused(st, "cover rows 0-12, the variable has 11");
  }
  SECTION("another number of columns") {
    st.shards[0].cols = 2;
    refused(st, "has 2 columns, the variable 3");
  }
  SECTION("shards with different numbers of slots") {
    st.shards[0].slots.pop_back();
    refused(st, "have 1 and 2 optimizer slots");
  }
  SECTION("a table key above the vocabulary") {
    auto& t = st.shards[src.variable_shards[2][0]];
    t.keys[0] = vocabulary + 4;
    refused(st, "key 44, at or above the vocabulary of 40");
  }
  SECTION("a table key in two shards") {
    auto& a = st.shards[src.variable_shards[2][0]];
    auto& b = st.shards[src.variable_shards[2][1]];
    b.keys[0] = a.keys[0];
    refused(st, "is held by two of the checkpoint's shards");
  }
  SECTION("a variable with no shard") {
    std::vector<checkpoint_shard> kept;
    for (auto& c : st.shards)
      if (c.variable != "emb/hashed")
        kept.push_back(c);
    st.shards = kept;
    refused(st, "no shard of emb/hashed");
  }
}
