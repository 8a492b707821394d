// The parameter server's table shards: rows created on first use, pushes of
// unique keys, errors, duplicates, sync and ssp, checkpoints.

#include <map>

#include "core/table_store.hpp"
#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

optimizer_config sgd(float lr) {
  return optimizer_config{"sgd", lr, {}};
}

/// The initial row of `key` in table `name` (as table_shard() defines it).
std::vector<float> initial(const std::string& name, uint64_t key,
                           uint64_t dim, uint64_t vocabulary = 0,
                           float init_scale = 0.5f, uint64_t seed = 42) {
  table_shard_def def{name, dim, vocabulary, init_scale, seed};
  std::vector<float> row(dim);
  initial_row(def, key, row.data());
  return row;
}

/// Row `i` of a table reply (dim floats).
std::vector<float> row(const table_rows& t, size_t i, uint64_t dim) {
  auto first = t.values.values.begin() + static_cast<ptrdiff_t>(i * dim);
  return {first, first + static_cast<ptrdiff_t>(dim)};
}

/// `x - lr * g`, elementwise: one SGD step.
std::vector<float> sgd_step(std::vector<float> x, float lr,
                            const std::vector<float>& g) {
  for (size_t j = 0; j < x.size(); ++j)
    x[j] -= lr * g[j];
  return x;
}

/// Matches floats equal to `expected` up to rounding (1e-6). Owns its
/// vector, unlike Catch's Approx matcher, which refers to its argument.
class near : public Catch::MatcherBase<std::vector<float>> {
public:
  explicit near(std::vector<float> expected) : expected_(std::move(expected)) {
    // nop
  }

  bool match(const std::vector<float>& xs) const override {
    if (xs.size() != expected_.size())
      return false;
    for (size_t i = 0; i < xs.size(); ++i)
      if (xs[i] != Approx(expected_[i]).margin(1e-6))
        return false;
    return true;
  }

  std::string describe() const override {
    return "is near " + Catch::Detail::stringify(expected_);
  }

private:
  std::vector<float> expected_;
};

/// Each row of a table shard's snapshot by key: values, then every slot,
/// then the step count.
std::map<uint64_t, std::vector<float>> rows_by_key(const table_snapshot& t) {
  std::map<uint64_t, std::vector<float>> result;
  auto n = t.keys.keys.size();
  auto dim = n == 0 ? 0 : t.values.values.size() / n;
  for (size_t i = 0; i < n; ++i) {
    auto& r = result[t.keys.keys[i]];
    auto take = [&](const float_vector& xs) {
      r.insert(r.end(), xs.begin() + i * dim, xs.begin() + (i + 1) * dim);
    };
    take(t.values.values);
    for (auto& s : t.slots)
      take(s.values);
    r.push_back(static_cast<float>(t.steps.keys.at(i)));
  }
  return result;
}

/// Everything a snapshot holds, comparable.
struct flat_snapshot {
  uint64_t clock;
  uint64_t steps;
  std::vector<float> dense;
  std::map<uint32_t, std::map<uint64_t, std::vector<float>>> tables;

  explicit flat_snapshot(const ps_snapshot& s)
    : clock(s.clock), steps(s.optimizer_steps),
      dense(as_vector(s.values.values)) {
    for (auto& slot : s.slots)
      dense.insert(dense.end(), slot.values.begin(), slot.values.end());
    for (auto& t : s.tables)
      tables[t.shard] = rows_by_key(t);
  }

  bool operator==(const flat_snapshot& x) const {
    return clock == x.clock && steps == x.steps && dense == x.dense
           && tables == x.tables;
  }
};

} // namespace

TEST_CASE_METHOD(deterministic,
                 "a table shard answers a pull with each key's initial row, "
                 "the same on every server, and stores rows only on create",
                 "[actors][ps][tables]") {
  auto a = spawn(options(sgd(0.1f), sgd(0.1f)));
  auto b = spawn(options(sgd(0.1f), sgd(0.1f)));
  CHECK(ask<uint64_t>(a, create_atom_v, table_shard("emb", 3, 4)) == 0);
  // The same table as another shard id on another server: rows depend on
  // (seed, variable, key) alone.
  create(b, table_shard("emb", 5, 4));
  std::vector<uint64_t> keys{3, 17, 123456789012345ULL};
  auto ra = pull(a, key_pull({rows_of(3, keys)}, no_worker, false));
  CHECK(ra.clock == 0);
  CHECK(ra.values.values.empty()); // the dense region was not asked for
  REQUIRE(ra.tables.size() == 1);
  CHECK(ra.tables[0].shard == 3);
  REQUIRE(ra.tables[0].values.values.size() == 3 * 4);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto expected = initial("emb", keys[i], 4);
    CHECK(row(ra.tables[0], i, 4) == expected);
    CHECK(expected != std::vector<float>(4, 0.0f)); // the test can fail
  }
  CHECK(stats(a).table_rows == 0); // create = false stored nothing
  auto rb = pull(b, key_pull({rows_of(5, keys)}, 0, true));
  REQUIRE(rb.tables.size() == 1);
  CHECK(rb.tables[0].shard == 5);
  CHECK(as_vector(rb.tables[0].values.values)
        == as_vector(ra.tables[0].values.values));
  auto sb = stats(b);
  CHECK(sb.table_rows == 3);
  CHECK(sb.keys_pulled == 3);
  CHECK(sb.table_bytes > 0);
  CHECK(sb.shards == 1);
  // A stored row reads the same again.
  CHECK(as_vector(pull(b, key_pull({rows_of(5, keys)})).tables[0].values.values)
        == as_vector(ra.tables[0].values.values));
  CHECK(stats(b).table_rows == 3);
  // A table shard needs a dimension, no values, and a free shard id.
  CHECK(refusal<uint64_t>(b, create_atom_v, table_shard("emb", 6, 0))
        == errc::shape_mismatch);
  auto with_values = table_shard("emb", 6, 1);
  with_values.values = floats({1});
  CHECK(refusal<uint64_t>(b, create_atom_v, with_values)
        == errc::shape_mismatch);
  CHECK(refusal<uint64_t>(b, create_atom_v, table_shard("other", 5, 4))
        == errc::shape_mismatch);
  CHECK(stats(b).shards == 1);
}

TEST_CASE_METHOD(deterministic,
                 "a push moves exactly the pushed rows with the table rule "
                 "and the dense region with the dense rule",
                 "[actors][ps][tables]") {
  auto ps = spawn(options(sgd(1.0f), sgd(0.5f)));
  create(ps, dense_shard("w", 1, 2, {1, 2}));
  create(ps, table_shard("emb", 0, 2));
  auto before =
    pull(ps, pull_request{0, 0, 0, true, {rows_of(0, {1, 2, 3})}, true});
  CHECK(as_vector(before.values.values) == std::vector<float>{1, 2});
  // Rows 1 and 3, and row 9, which no pull created.
  std::vector<float> g{1, -2, 0.5f, 4, 2, 2};
  CHECK(push(ps, make_push(0, 1, {1, 1}, 0, {rows_of(0, {3, 1, 9}, g)})) == 1);
  auto after =
    pull(ps, pull_request{0, 0, 0, true, {rows_of(0, {1, 2, 3, 9})}, true});
  CHECK(after.clock == 1);
  CHECK(as_vector(after.values.values) == std::vector<float>{0, 1});
  auto& t = after.tables.at(0);
  auto& old = before.tables.at(0);
  CHECK_THAT(row(t, 0, 2), near(sgd_step(row(old, 0, 2), 0.5f, {0.5f, 4})));
  CHECK(row(t, 1, 2) == row(old, 1, 2)); // untouched, bit for bit
  CHECK_THAT(row(t, 2, 2), near(sgd_step(row(old, 2, 2), 0.5f, {1, -2})));
  CHECK_THAT(row(t, 3, 2), near(sgd_step(initial("emb", 9, 2), 0.5f, {2, 2})));
  CHECK(row(t, 0, 2) != row(old, 0, 2));
  auto s = stats(ps);
  CHECK(s.keys_pulled == 7);
  CHECK(s.keys_pushed == 3);
  CHECK(s.table_rows == 4);
  CHECK(s.pushes == 1);
  CHECK(s.shards == 2);
}

TEST_CASE_METHOD(deterministic,
                 "a malformed table pull or push is refused and changes "
                 "nothing",
                 "[actors][ps][tables]") {
  auto ps = spawn(options(sgd(1.0f), sgd(1.0f)));
  create(ps, dense_shard("w", 1, 2, {1, 2}));
  create(ps, table_shard("emb", 0, 2, 10)); // keys 0..9
  create(ps, table_shard("ids", 1, 1));
  pull(ps, key_pull({rows_of(0, {1, 2})}));
  // Most bad requests below have a good part first (a new key of shard 1):
  // nothing of it may be created or applied.
  auto saved = flat_snapshot{save(ps)};
  auto counters = stats(ps);
  std::vector<float> dense_g{1, 1};
  SECTION("a pull of a shard the server does not hold") {
    CHECK(refusal<pull_reply>(ps, pull_atom_v,
                              key_pull({rows_of(1, {5}), rows_of(4, {1})}))
          == errc::unknown_variable);
  }
  SECTION("a pull of a key outside the vocabulary") {
    auto err = refusal<pull_reply>(
      ps, pull_atom_v, key_pull({rows_of(1, {5}), rows_of(0, {3, 1000})}));
    CHECK(err == errc::key_out_of_range);
    auto text = sys.render(err);
    CHECK_THAT(text, Catch::Contains("emb") && Catch::Contains("1000"));
  }
  SECTION("a push to a shard the server does not hold") {
    CHECK(refusal<uint64_t>(ps, push_atom_v,
                            make_push(0, 1, dense_g, 0,
                                      {rows_of(1, {5}, {1}),
                                       rows_of(4, {1}, {1, 1})}))
          == errc::unknown_variable);
  }
  SECTION("a push of a key outside the vocabulary") {
    auto err = refusal<uint64_t>(ps, push_atom_v,
                                 make_push(0, 1, dense_g, 0,
                                           {rows_of(1, {5}, {1}),
                                            rows_of(0, {1, 10}, {1, 1, 1, 1})}));
    CHECK(err == errc::key_out_of_range);
    CHECK_THAT(sys.render(err), Catch::Contains("emb"));
  }
  SECTION("a push whose values are not keys x dim") {
    CHECK(refusal<uint64_t>(ps, push_atom_v,
                            make_push(0, 1, dense_g, 0,
                                      {rows_of(1, {5}, {1}),
                                       rows_of(0, {1, 2}, {1, 1, 1})}))
          == errc::shape_mismatch);
  }
  SECTION("a push of one key twice") {
    CHECK(refusal<uint64_t>(ps, push_atom_v,
                            make_push(0, 1, dense_g, 0,
                                      {rows_of(1, {5}, {1}),
                                       rows_of(0, {1, 5, 1},
                                               {1, 1, 1, 1, 1, 1})}))
          == errc::bad_message);
  }
  SECTION("a push of one key in two parts for the same shard") {
    CHECK(refusal<uint64_t>(ps, push_atom_v,
                            make_push(0, 1, dense_g, 0,
                                      {rows_of(0, {1, 5}, {1, 1, 1, 1}),
                                       rows_of(0, {1}, {1, 1})}))
          == errc::bad_message);
  }
  SECTION("a push whose dense gradient has the wrong size") {
    CHECK(refusal<uint64_t>(ps, push_atom_v,
                            make_push(0, 1, {1, 1, 1}, 0,
                                      {rows_of(1, {5}, {1}),
                                       rows_of(0, {1, 5}, {1, 1, 1, 1})}))
          == errc::shape_mismatch);
  }
  CHECK(flat_snapshot{save(ps)} == saved);
  auto s = stats(ps);
  CHECK(s.table_rows == 2); // key 5 was not created
  CHECK(s.keys_pulled == counters.keys_pulled);
  CHECK(s.keys_pushed == 0);
  CHECK(s.pushes == 0);
  // A refused push does not count as applied: its closure may push again.
  CHECK(push(ps, make_push(0, 1, dense_g, 0, {rows_of(0, {1}, {1, 1})})) == 1);
  CHECK(stats(ps).duplicates == 0);
  CHECK(flat_snapshot{save(ps)}.tables.at(0).at(1).back() == 1.0f); // 1 step
}

TEST_CASE_METHOD(deterministic, "a duplicate push with table rows is applied "
                                "once",
                 "[actors][ps][tables]") {
  auto ps = spawn(options(sgd(1.0f), sgd(1.0f)));
  create(ps, table_shard("emb", 0, 1));
  auto first = pull(ps, key_pull({rows_of(0, {4})})).tables.at(0);
  for (uint32_t worker : {0u, 0u, 1u})
    CHECK(push(ps, make_push(0, 7, {}, worker, {rows_of(0, {4}, {1})})) == 1);
  auto now = pull(ps, key_pull({rows_of(0, {4})})).tables.at(0);
  CHECK(now.values.values[0] == first.values.values[0] - 1.0f);
  auto s = stats(ps);
  CHECK(s.duplicates == 2);
  CHECK(s.keys_pushed == 1);
  CHECK(flat_snapshot{save(ps)}.tables.at(0).at(4).back() == 1.0f); // 1 step
}

TEST_CASE_METHOD(deterministic,
                 "under sync each row moves by the mean of the round's row "
                 "gradients and both pushes are acknowledged together",
                 "[actors][ps][tables]") {
  auto ps = spawn(options(sgd(1.0f), sgd(1.0f), consistency::sync, 2));
  create(ps, dense_shard("w", 1, 1, {0}));
  create(ps, table_shard("emb", 0, 2));
  create(ps, table_shard("ids", 1, 1));
  auto before = pull(ps, key_pull({rows_of(0, {1, 2, 3, 4}), rows_of(1, {7})}));
  // Worker 0: keys 1, 2; worker 1: keys 2, 3 and key 7 of the other table.
  // Key 4 and the dense region are in nobody's push but the dense one.
  self->send(ps, push_atom_v,
             make_push(0, 1, {2}, 0, {rows_of(0, {1, 2}, {2, 4, 6, 8})}));
  sched->run();
  CHECK(nothing_received());
  auto mid = pull(ps, key_pull({rows_of(0, {1, 2, 3, 4})}));
  CHECK(as_vector(mid.tables[0].values.values)
        == as_vector(before.tables[0].values.values));
  self->send(ps, push_atom_v,
             make_push(0, 2, {4}, 1,
                       {rows_of(1, {7}, {10}), rows_of(0, {3, 2}, {1, 1, 2, 2})}));
  sched->run();
  CHECK(reply<uint64_t>() == 1);
  CHECK(reply<uint64_t>() == 1);
  auto after = pull(ps, pull_request{0, 0, no_worker, true,
                                     {rows_of(0, {1, 2, 3, 4}),
                                      rows_of(1, {7})},
                                     true});
  CHECK(after.clock == 1);
  CHECK(as_vector(after.values.values) == std::vector<float>{-3});
  auto& t = after.tables.at(0);
  auto& old = before.tables.at(0);
  CHECK_THAT(row(t, 0, 2), near(sgd_step(row(old, 0, 2), 1, {1, 2})));
  CHECK_THAT(row(t, 1, 2), near(sgd_step(row(old, 1, 2), 1, {4, 5})));
  CHECK_THAT(row(t, 2, 2), near(sgd_step(row(old, 2, 2), 1, {0.5f, 0.5f})));
  CHECK(row(t, 3, 2) == row(old, 3, 2));
  CHECK_THAT(row(after.tables.at(1), 0, 1), near(sgd_step(row(before.tables.at(1), 0, 1), 1, {5})));
  auto s = stats(ps);
  CHECK(s.keys_pushed == 4); // unique rows of the round: 1, 2, 3 and 7
  CHECK(s.clock == 1);
  // Each row took one step, however many workers pushed it.
  auto snap = flat_snapshot{save(ps)};
  CHECK(snap.tables.at(0).at(2).back() == 1.0f);
  CHECK(snap.tables.at(0).at(4).back() == 0.0f);
}

TEST_CASE_METHOD(deterministic,
                 "under ssp a pull of keys waits while its worker is ahead "
                 "and returns the rows as of its release",
                 "[actors][ps][tables]") {
  auto ps = spawn(options(sgd(1.0f), sgd(1.0f), consistency::ssp, 2, 1));
  create(ps, table_shard("emb", 0, 1));
  auto start = pull(ps, key_pull({rows_of(0, {5})})).tables.at(0);
  for (uint64_t c = 1; c <= 2; ++c)
    push(ps, make_push(0, c, {}, 0, {rows_of(0, {5}, {1})}));
  self->send(ps, pull_atom_v, key_pull({rows_of(0, {5, 6})}, 0));
  sched->run();
  CHECK(nothing_received());
  CHECK(stats(ps).table_rows == 1); // the held pull created nothing yet
  self->send(ps, push_atom_v, make_push(0, 3, {}, 1, {rows_of(0, {5}, {4})}));
  sched->run();
  std::vector<float> released;
  uint64_t released_clock = 0;
  bool got_ack = false;
  for (int i = 0; i < 2; ++i)
    self->receive([&](uint64_t clock) { got_ack = clock == 3; },
                  [&](pull_reply& r) {
                    released_clock = r.clock;
                    released = as_vector(r.tables.at(0).values.values);
                  },
                  [](caf::error&) { FAIL("request failed"); },
                  caf::after(std::chrono::seconds(0)) >> [] {
                    FAIL("expected the ack and the released pull");
                  });
  CHECK(got_ack);
  CHECK(released_clock == 3);
  // Worker 1's push (applied before the release) is in the rows read.
  REQUIRE(released.size() == 2);
  CHECK(released[0] == Approx(start.values.values[0] - 6.0f));
  CHECK(released[1] == initial("emb", 6, 1)[0]);
  CHECK(stats(ps).table_rows == 2);
}

TEST_CASE_METHOD(deterministic,
                 "a restore brings back every table row with its slots and "
                 "steps and empties the table shards not in the snapshot",
                 "[actors][ps][tables][checkpoint]") {
  auto ps = spawn(options(sgd(1.0f), optimizer_config{"adagrad", 0.1f, {}}));
  create(ps, dense_shard("w", 1, 1, {1}));
  create(ps, table_shard("emb", 0, 2));
  create(ps, table_shard("ids", 1, 1));
  push(ps, make_push(0, 1, {1}, 0,
                     {rows_of(0, {1, 2}, {1, 2, 3, 4}), rows_of(1, {7}, {1})}));
  push(ps, make_push(1, 2, {1}, 0, {rows_of(0, {1}, {1, 1})}));
  auto snap = save(ps);
  auto saved = flat_snapshot{snap};
  REQUIRE(snap.tables.size() == 2);
  REQUIRE(snap.tables[0].slots.size() == 1); // adagrad's accumulator
  CHECK(saved.tables.at(0).at(1).back() == 2.0f); // two steps
  CHECK(saved.tables.at(0).at(2).back() == 1.0f);
  // Change rows, slots and steps, and create rows.
  push(ps, make_push(2, 3, {1}, 0,
                     {rows_of(0, {1, 3}, {5, 5, 5, 5}), rows_of(1, {8}, {1})}));
  REQUIRE_FALSE(flat_snapshot{save(ps)} == saved);
  CHECK(ask<uint64_t>(ps, restore_atom_v, uint32_t{0}, snap) == 2);
  CHECK(flat_snapshot{save(ps)} == saved);
  CHECK(stats(ps).table_rows == 3);
  // A snapshot without table shard 1 empties it.
  auto partial = snap;
  partial.tables.pop_back();
  CHECK(ask<uint64_t>(ps, restore_atom_v, uint32_t{0}, partial) == 2);
  auto emptied = flat_snapshot{save(ps)};
  CHECK(emptied.tables.at(0) == saved.tables.at(0));
  CHECK(emptied.tables.at(1).empty());
  CHECK(stats(ps).table_rows == 2);
  auto r = pull(ps, key_pull({rows_of(1, {7})}));
  CHECK(as_vector(r.tables.at(0).values.values) == initial("ids", 7, 1));
}

TEST_CASE_METHOD(deterministic,
                 "a table snapshot that does not fit the server is refused "
                 "and changes nothing",
                 "[actors][ps][tables][checkpoint]") {
  auto ps = spawn(options(sgd(1.0f), optimizer_config{"adagrad", 0.1f, {}}));
  create(ps, dense_shard("w", 1, 1, {1}));
  create(ps, table_shard("emb", 0, 2, 100));
  push(ps, make_push(0, 1, {1}, 0, {rows_of(0, {1, 2}, {1, 2, 3, 4})}));
  auto snap = save(ps);
  push(ps, make_push(1, 2, {1}, 0, {rows_of(0, {1, 3}, {1, 1, 1, 1})}));
  auto current = flat_snapshot{save(ps)};
  auto bad = snap;
  errc expected = errc::shape_mismatch;
  SECTION("a shard the server does not hold") {
    bad.tables.push_back(bad.tables[0]);
    bad.tables.back().shard = 9;
    expected = errc::unknown_variable;
  }
  SECTION("values that are not keys x dim") {
    bad.tables[0].values.values.pop_back();
  }
  SECTION("a slot of the wrong size") {
    bad.tables[0].slots[0].values.push_back(0);
  }
  SECTION("the wrong number of slots") {
    bad.tables[0].slots.clear();
  }
  SECTION("a step count missing") {
    bad.tables[0].steps.keys.pop_back();
  }
  SECTION("a key twice") {
    bad.tables[0].keys.keys[1] = bad.tables[0].keys.keys[0];
  }
  SECTION("a key outside the vocabulary") {
    bad.tables[0].keys.keys[1] = 100;
  }
  CHECK(refusal<uint64_t>(ps, restore_atom_v, uint32_t{0}, bad) == expected);
  CHECK(flat_snapshot{save(ps)} == current);
  CHECK(stats(ps).table_rows == 3);
}
