// Tables of one parameter server under policies of their own
// (ps_options::tables, table_policies): each shard follows its table's
// admission and eviction, and the counters are kept per table.

#include <string>

#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

/// The entry of table `name` in `s.tables`, or a failed test.
const table_stats& of(const ps_stats& s, const std::string& name) {
  for (auto& t : s.tables)
    if (t.variable == name)
      return t;
  FAIL("no counters of table " << name);
  throw std::logic_error("unreachable");
}

/// A server whose table "user" admits a key at its second pull and holds
/// at most 4 rows (LRU), while every other table ("category") keeps the
/// job-wide default: a row at first use, kept for good. "user" is shard 0,
/// "category" shard 1, both of dimension 1.
ps_options two_policies() {
  auto opts = options(optimizer_config{"sgd", 0.1f, {}},
                      optimizer_config{"sgd", 0.1f, {}});
  table_policy user;
  user.admit_after = 2;
  user.filter = admission_kind::exact;
  user.max_rows = 4;
  opts.tables.by_table["user"] = user;
  return opts;
}

} // namespace

TEST_CASE("two tables of one server follow their own admission and "
          "eviction",
          "[actors][ps][table]") {
  deterministic t;
  auto ps = t.spawn(two_policies());
  t.create(ps, table_shard("user", 0, 1));
  t.create(ps, table_shard("category", 1, 1));
  auto both = [](std::vector<uint64_t> keys) {
    return key_pull({rows_of(0, keys), rows_of(1, keys)});
  };
  // First sightings: "category" makes its rows, "user" waits.
  t.pull(ps, both({1, 2, 3, 4}));
  auto s = t.stats(ps);
  REQUIRE(s.tables.size() == 2);
  CHECK(s.tables[0].variable == "category"); // in name order
  CHECK(of(s, "category").rows == 4);
  CHECK(of(s, "user").rows == 0);
  CHECK(of(s, "user").rejected == 4);
  // Second sightings: "user" admits them, up to its 4 rows.
  t.pull(ps, both({1, 2, 3, 4}));
  CHECK(of(t.stats(ps), "user").rows == 4);
  // Two new keys, each seen twice: "user" evicts two rows for them;
  // "category" holds all six.
  t.pull(ps, both({5, 6}));
  t.pull(ps, both({5, 6}));
  s = t.stats(ps);
  auto& user = of(s, "user");
  auto& category = of(s, "category");
  CHECK(user.rows == 4);
  CHECK(user.admitted == 6);
  CHECK(user.evicted_budget == 2);
  CHECK(user.rejected == 6);
  CHECK(category.rows == 6);
  CHECK(category.admitted == 6);
  CHECK(category.rejected == 0);
  CHECK(category.evicted_budget == 0);
  // The job-wide counts are the tables' sums.
  CHECK(s.table_rows == 10);
  CHECK(s.rows_admitted == 12);
  CHECK(s.evicted_budget == 2);
  CHECK(s.table_bytes == user.bytes + category.bytes);
}

TEST_CASE("a gradient for a key a table has not admitted is dropped there "
          "and applied in a table that admits at once",
          "[actors][ps][table]") {
  deterministic t;
  auto ps = t.spawn(two_policies());
  t.create(ps, table_shard("user", 0, 1));
  t.create(ps, table_shard("category", 1, 1));
  t.push(ps, make_push(0, 1, {}, 0, {rows_of(0, {7}, {1.0f}),
                                     rows_of(1, {7}, {1.0f})}));
  auto s = t.stats(ps);
  CHECK(of(s, "user").gradients_dropped == 1);
  CHECK(of(s, "user").rows == 0);
  CHECK(of(s, "category").gradients_dropped == 0);
  CHECK(of(s, "category").rows == 1);
}

TEST_CASE("a restored table keeps its own policy", "[actors][ps][table]") {
  deterministic t;
  auto ps = t.spawn(two_policies());
  t.create(ps, table_shard("user", 0, 1));
  t.create(ps, table_shard("category", 1, 1));
  auto both = [](std::vector<uint64_t> keys) {
    return key_pull({rows_of(0, keys), rows_of(1, keys)});
  };
  for (int i = 0; i < 2; ++i)
    t.pull(ps, both({1, 2, 3, 4}));
  auto snap = t.save(ps);
  CHECK(t.ask<uint64_t>(ps, restore_atom_v, uint32_t{0}, snap) == 0); // clock
  // Still admitted at the second pull, and still at most 4 rows.
  t.pull(ps, both({5, 6}));
  CHECK(of(t.stats(ps), "user").rows == 4);
  t.pull(ps, both({5, 6}));
  auto s = t.stats(ps);
  CHECK(of(s, "user").rows == 4);
  CHECK(of(s, "user").evicted_budget == 2);
  CHECK(of(s, "category").rows == 6);
}
