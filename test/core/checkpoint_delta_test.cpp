// Delta checkpoints (core/checkpoint.hpp, core/checkpoint_chain.hpp): a
// chain of a full checkpoint and its deltas reads back as the table the
// deltas were taken from, bit for bit; a hole, a replaced base or a damaged
// delta is refused naming it; retention keeps chains whole.

#include <map>
#include <memory>

#include "core/table_store.hpp"
#include "core/update_rule.hpp"
#include "test/core/checkpoint_helpers.hpp"

using namespace checkpoint_test;

namespace {

constexpr uint64_t dim = 3;

/// Rows by key: values, then slot 0, then the step count, as float bits.
std::map<uint64_t, std::vector<float>> by_key(const std::vector<uint64_t>& keys,
                                              const std::vector<float>& values,
                                              const std::vector<std::vector<float>>& slots,
                                              const std::vector<uint64_t>& steps) {
  std::map<uint64_t, std::vector<float>> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<float> row(values.begin() + i * dim,
                           values.begin() + (i + 1) * dim);
    for (auto& s : slots)
      row.insert(row.end(), s.begin() + i * dim, s.begin() + (i + 1) * dim);
    row.push_back(static_cast<float>(steps[i]));
    out.emplace(keys[i], std::move(row));
  }
  return out;
}

/// A live table shard (Adagrad: one slot) and the checkpoints taken of it.
struct live_table {
  std::shared_ptr<const update_rule> rule
    = make_update_rule(optimizer_config{"adagrad", 0.1f, {}}, "table");
  table_store store{table_shard_def{"emb", dim, 0, 0.5f, 7}, rule};
  uint64_t step = 0;

  /// Pushes a gradient to keys [first, first + n).
  void train(uint64_t first, uint64_t n) {
    std::vector<uint64_t> keys(n);
    std::vector<float> g(n * dim);
    for (uint64_t i = 0; i < n; ++i)
      keys[i] = first + i;
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
    store.apply(keys.data(), n, g.data());
    step += 10;
  }

  /// The state of a checkpoint: a dense shard and the table shard, whole or
  /// as a delta of `base`; marks the store.
  checkpoint_state capture(const std::string& base = "", uint64_t base_id = 0) {
    auto st = make_state(step);
    st.shards.resize(1);
    auto c = base.empty() ? store.export_rows() : store.export_changed();
    checkpoint_shard t;
    t.variable = "emb";
    t.table = true;
    t.cols = dim;
    t.keys = c.keys;
    t.values = c.values;
    t.slots = c.slots;
    t.steps = c.steps;
    if (!base.empty()) {
      t.delta = true;
      t.removed = store.removed_since_mark();
      st.delta = true;
      st.base = base;
      st.base_id = base_id;
    }
    st.shards.push_back(std::move(t));
    store.mark_clean();
    return st;
  }

  auto rows() const {
    auto c = store.export_rows();
    return by_key(c.keys, c.values, c.slots, c.steps);
  }
};

auto rows_of(const checkpoint_shard& s) {
  return by_key(s.keys, s.values, s.slots, s.steps);
}

uint64_t id_of(const std::string& dir) {
  return std::stoull(read_manifest(dir)["id"].get<std::string>(), nullptr, 16);
}

/// Writes a full checkpoint and `deltas` deltas of `t`, each after some
/// training; returns their directories.
std::vector<std::string> write_chain(live_table& t, const std::string& root,
                                     size_t deltas, uint32_t keep = 3) {
  std::vector<std::string> dirs;
  t.train(0, 1000);
  dirs.push_back(write_checkpoint(root, t.capture(), keep));
  for (size_t i = 0; i < deltas; ++i) {
    t.train(100 * i, 20);  // a few rows updated
    t.train(5000 + i, 1);  // and one new
    table_store::contents none;
    none.slots.resize(1);
    t.store.apply_delta(none, {10 + i}); // and one removed
    auto last = dirs.back();
    dirs.push_back(write_checkpoint(
      root, t.capture(fs::path(last).filename().string(), id_of(last)), keep));
  }
  return dirs;
}

} // namespace

TEST_CASE("a chain of a full checkpoint and its deltas reads back as the "
          "table it was taken from, bit for bit",
          "[checkpoint]") {
  temp_dir tmp;
  live_table t;
  auto dirs = write_chain(t, tmp.file("ck"), 3);
  REQUIRE(dirs.size() == 4);
  CHECK(read_manifest(dirs[0])["kind"] == "full");
  CHECK(read_manifest(dirs[3])["kind"] == "delta");
  CHECK(read_manifest(dirs[3])["base"]["dir"] == "ckpt-0000000050");
  auto back = read_checkpoint(dirs[3]);
  CHECK(back.global_step == t.step);
  CHECK_FALSE(back.delta);
  REQUIRE(back.shards.size() == 2);
  CHECK_FALSE(back.shards[1].delta);
  CHECK(rows_of(back.shards[1]) == t.rows());
  CHECK(t.rows().count(10) == 0); // the tombstones were applied
  // The delta on its own holds only what changed.
  auto alone = read_checkpoint_dir(dirs[3]);
  CHECK(alone.delta);
  CHECK(alone.shards[1].keys.size() == 21);
  CHECK(alone.shards[1].removed == std::vector<uint64_t>{12});
  CHECK(fs::file_size(dirs[3] + "/shard-0001.bin") * 20
        < fs::file_size(dirs[0] + "/shard-0001.bin"));
  CHECK(latest_checkpoint(tmp.file("ck")) == dirs[3]);
}

TEST_CASE("a chain with a missing delta is refused naming the hole, and "
          "latest_checkpoint picks the newest whole chain",
          "[checkpoint]") {
  temp_dir tmp;
  live_table t;
  auto dirs = write_chain(t, tmp.file("ck"), 3);
  fs::remove_all(dirs[2]);
  auto msg = refusal(dirs[3]);
  CHECK_THAT(msg, Catch::Contains(dirs[3] + ": a broken chain of checkpoints"));
  CHECK_THAT(msg, Catch::Contains("is a delta of ckpt-0000000050, which is "
                                  "missing"));
  CHECK(latest_checkpoint(tmp.file("ck")) == dirs[1]);
  // A base replaced by another checkpoint of the same name is no base.
  live_table other;
  other.step = 10;
  write_checkpoint(tmp.file("ck"), other.capture(), 5);
  CHECK_THAT(refusal(dirs[1]), Catch::Contains("not"));
  CHECK_THAT(refusal(dirs[1]), Catch::Contains("(replaced since)"));
}

TEST_CASE("a damaged delta is refused naming its file, and nothing is "
          "restored from its chain",
          "[checkpoint]") {
  temp_dir tmp;
  live_table t;
  auto dirs = write_chain(t, tmp.file("ck"), 2);
  auto file = dirs[1] + "/shard-0001.bin";
  auto bytes = read_bytes(file);
  bytes[bytes.size() / 2] ^= 0x10;
  write_bytes(file, bytes);
  CHECK_THAT(refusal(dirs[2]), Catch::Contains(file + ": checksum mismatch"));
}

TEST_CASE("retention keeps the newest full checkpoints with all their "
          "deltas and removes older chains whole",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("ck");
  live_table t;
  auto first = write_chain(t, root, 2, 2);
  auto second = write_chain(t, root, 2, 2);
  // Two fulls kept: both chains are there.
  CHECK(entries(root).size() == 6);
  auto third = write_chain(t, root, 1, 2);
  // The first chain went whole; the second stays with its deltas.
  std::vector<std::string> expected;
  for (auto* chain : {&second, &third})
    for (auto& d : *chain)
      expected.push_back(fs::path(d).filename().string());
  std::sort(expected.begin(), expected.end());
  CHECK(entries(root) == expected);
  CHECK(rows_of(read_checkpoint(second.back()).shards[1]).size() > 0);
  CHECK(rows_of(read_checkpoint(third.back()).shards[1]) == t.rows());
}
