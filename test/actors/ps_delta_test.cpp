// A parameter server's part in delta checkpoints: save_atom with a base and
// a mark gives the table rows changed since the base's mark, or every row
// when its last mark is another (a failed write, a restore).

#include <algorithm>

#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

ps_snapshot save_marked(deterministic& f, const ps_actor& ps, uint64_t base,
                        uint64_t mark) {
  return f.ask<ps_snapshot>(ps, save_atom_v, uint32_t{0}, base, mark);
}

std::vector<uint64_t> sorted(std::vector<uint64_t> xs) {
  std::sort(xs.begin(), xs.end());
  return xs;
}

} // namespace

TEST_CASE_METHOD(deterministic,
                 "a save with the last mark as its base gives only the rows "
                 "pushed since, and any other base gives every row",
                 "[actors][ps][tables][checkpoint]") {
  auto ps = spawn(options(optimizer_config{"sgd", 1.0f, {}},
                          optimizer_config{"sgd", 0.5f, {}}));
  create(ps, dense_shard("w", 1, 2, {1, 2}));
  create(ps, table_shard("emb", 0, 2));
  pull(ps, pull_request{0, 0, 0, true, {rows_of(0, {1, 2, 3})}, true});
  auto full = save_marked(*this, ps, 0, 11);
  REQUIRE(full.tables.size() == 1);
  CHECK_FALSE(full.tables[0].delta);
  CHECK(sorted(full.tables[0].keys.keys) == std::vector<uint64_t>{1, 2, 3});
  std::vector<float> g{1, -2, 0.5f, 4};
  CHECK(push(ps, make_push(0, 1, {1, 1}, 0, {rows_of(0, {3, 9}, g)})) == 1);
  auto delta = save_marked(*this, ps, 11, 12);
  CHECK(delta.values.values.size() == 2); // the dense region whole
  REQUIRE(delta.tables.size() == 1);
  CHECK(delta.tables[0].delta);
  CHECK(sorted(delta.tables[0].keys.keys) == std::vector<uint64_t>{3, 9});
  CHECK(delta.tables[0].steps.keys.size() == 2);
  CHECK(delta.tables[0].removed.keys.empty());
  // Nothing changed since mark 12.
  auto empty = save_marked(*this, ps, 12, 13);
  CHECK(empty.tables[0].delta);
  CHECK(empty.tables[0].keys.keys.empty());
  // A delta of 12 (say, 13 was never written): the server marked 13 since,
  // so it cannot tell what changed after 12 and gives every row.
  auto whole = save_marked(*this, ps, 12, 14);
  CHECK_FALSE(whole.tables[0].delta);
  CHECK(whole.tables[0].keys.keys.size() == 4);
  // A restore replaces the tables: no mark holds after it.
  CHECK(ask<uint64_t>(ps, restore_atom_v, uint32_t{0}, full) == 0);
  auto after_restore = save_marked(*this, ps, 14, 15);
  CHECK_FALSE(after_restore.tables[0].delta);
  CHECK(sorted(after_restore.tables[0].keys.keys)
        == std::vector<uint64_t>{1, 2, 3});
}
