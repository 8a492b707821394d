#include "cluster/checkpointer.hpp"

#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include "checkpoint_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

TEST_CASE("a variables-only snapshot holds the checkpoint's values with the "
          "optimizer state of the new rule at its start",
          "[checkpointer]") {
  job_config cfg;
  auto st = written_by(cfg); // sgd: no slots
  auto next = cfg;
  next.optimizer.type = "adagrad";
  next.optimizer.params["initial_accumulator"] = 0.25;
  auto layout = layout_of(next, images());
  for (uint32_t p = 0; p < next.ps; ++p) {
    auto snap = variables_snapshot_for(layout, st, p, next);
    CHECK(snap.clock == 0);
    CHECK(snap.optimizer_steps == 0);
    REQUIRE(snap.values.values.size() == layout.ps_sizes[p]);
    REQUIRE(snap.slots.size() == 1);
    REQUIRE(snap.slots[0].values.size() == layout.ps_sizes[p]);
    for (auto x : snap.slots[0].values)
      REQUIRE(x == 0.25f);
    for (auto& s : layout.shards_of(p)) {
      INFO("shard " << s.index << " of variable " << s.variable);
      CHECK(snap.values.values[s.ps_offset] == float(s.row_begin));
      CHECK(snap.values.values[s.ps_offset + s.size - 1]
            == float(s.row_begin) + float(s.size - 1) / 1000.0f);
    }
  }
  // The same job's own snapshot keeps the checkpoint's state.
  auto same = snapshot_for(layout_of(cfg, images()), st, 0);
  CHECK(same.clock == 200);
  CHECK(same.optimizer_steps == 200);
}

TEST_CASE("a variables-only snapshot keeps a table's rows and starts their "
          "slots and step counts afresh",
          "[checkpointer]") {
  job_config cfg;
  cfg.model = "sparse_logistic_regression";
  cfg.dataset = "a9a";
  cfg.table_optimizer.type = "adam";
  auto st = written_by(cfg, sparse());
  auto next = cfg;
  next.table_optimizer.type = "ftrl";
  next.table_optimizer.params["initial_accumulator"] = 0.5;
  auto layout = layout_of(next, sparse());
  size_t tables = 0;
  for (uint32_t p = 0; p < next.ps; ++p) {
    auto snap = variables_snapshot_for(layout, st, p, next);
    for (auto& t : snap.tables) {
      ++tables;
      CHECK(t.keys.keys == std::vector<uint64_t>{3, 5});
      CHECK(t.steps.keys == std::vector<uint64_t>{0, 0});
      CHECK(t.values.values.size() == t.keys.keys.size() * 1);
      REQUIRE(t.slots.size() == 2); // ftrl: accumulator, linear
      for (auto x : t.slots[0].values)
        CHECK(x == 0.5f);
      for (auto x : t.slots[1].values)
        CHECK(x == 0.0f);
    }
  }
  CHECK(tables == size_t(std::count_if(layout.shards.begin(),
                                      layout.shards.end(),
                                      [](const shard_info& s) {
                                        return s.kind == variable_kind::table;
                                      })));
  CHECK(tables > 0);
}
