// Checkpoints (core/checkpoint.hpp) of embedding-table shards beside dense
// ones: read back bit-exact, the file layout, damage refused naming the
// file, invalid shards refused before writing; and version 1 checkpoints.

#include "test/core/checkpoint_helpers.hpp"

using namespace checkpoint_test;

TEST_CASE("table shards read back bit-exact beside dense shards: keys, "
          "values, slots and steps",
          "[checkpoint]") {
  temp_dir tmp;
  auto st = make_mixed_state(77);
  auto dir = write_checkpoint(tmp.file("ckpts"), st, 1);
  auto back = read_checkpoint(dir);
  require_equal(back, st);
  CHECK(std::isnan(back.shards[5].values[1]));
  CHECK(back.shards[5].keys[2] == std::numeric_limits<uint64_t>::max());
  CHECK(back.shards[6].keys.empty());
  CHECK(back.shards[7].slots.empty());
}

TEST_CASE("a table shard of many rows in random order spans many read "
          "buffers and reads back bit-exact",
          "[checkpoint]") {
  temp_dir tmp;
  // 262147 keys x 5 cols x 3 arrays: 15.7 MB of floats and 4.2 MB of keys
  // and steps, read through a 1 MiB buffer at offsets that are not aligned.
  std::vector<uint64_t> keys(262147);
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i] = (i * 0x9e3779b97f4a7c15ULL) ^ (i >> 7);
  auto st = make_state(5);
  st.shards.push_back(make_table("big", 0, keys, 5, 0, 2, 1.0f));
  auto dir = write_checkpoint(tmp.file("ckpts"), st, 1);
  require_equal(read_checkpoint(dir), st);
}

TEST_CASE("a table shard file holds its float arrays, then its keys and "
          "steps, in the documented format",
          "[checkpoint]") {
  temp_dir tmp;
  auto st = make_mixed_state(9);
  auto dir = write_checkpoint(tmp.file("ckpts"), st, 1);
  auto doc = read_manifest(dir);
  CHECK(doc["version"] == 3);
  for (size_t i = 5; i < st.shards.size(); ++i) {
    auto& s = st.shards[i];
    auto& e = doc["shards"][i];
    INFO("shard " << i);
    CHECK(e["kind"] == "table");
    CHECK(e["rows"] == s.keys.size());
    CHECK(e["row_begin"] == 0);
    CHECK(e["row_end"] == 0);
    CHECK(e["cols"] == s.cols);
    CHECK(e["slots"] == s.slots.size());
    auto bytes = read_bytes(dir + "/" + e["file"].get<std::string>());
    auto o = offsets_of(s);
    REQUIRE(bytes.size() == o.end);
    CHECK(e["bytes"] == bytes.size());
    CHECK(e["crc32"] == crc_hex(bytes));
    CHECK(bytes.compare(0, 8, "APSSHARD") == 0);
    CHECK(get_u64(bytes, 8) == (uint64_t{o.arrays} << 32 | 3));
    std::vector<uint64_t> lengths;
    for (size_t j = 0; j < o.arrays; ++j)
      lengths.push_back(get_u64(bytes, o.lengths + 8 * j));
    std::vector<uint64_t> want(1 + s.slots.size(), s.values.size());
    want.push_back(s.keys.size());
    want.push_back(s.steps.size());
    CHECK(lengths == want);
    for (size_t k = 0; k < s.keys.size(); ++k) {
      CHECK(get_u64(bytes, o.keys + 8 * k) == s.keys[k]);
      CHECK(get_u64(bytes, o.steps + 8 * k) == s.steps[k]);
    }
  }
}

TEST_CASE("a damaged table shard is refused with the damaged file named",
          "[checkpoint]") {
  temp_dir tmp;
  auto st = make_mixed_state(43);
  auto dir = write_checkpoint(tmp.file("ckpts"), st, 1);
  auto manifest = dir + "/manifest.json";
  auto doc = read_manifest(dir);
  // shards[5]: keys {42, 0, 2^64 - 1, 7, 2^63}, 3 cols, 2 slots.
  auto& s = st.shards[5];
  auto o = offsets_of(s);
  auto shard = dir + "/shard-0005.bin";
  auto bytes = read_bytes(shard);
  REQUIRE(bytes.size() == o.end);
  std::string file = shard;
  std::string says;
  bool fix_crc = false;
  SECTION("the key array truncated") {
    write_bytes(shard, bytes.substr(0, o.keys + 4));
    says = fmt::format("truncated: {} bytes, manifest says {}", o.keys + 4,
                       o.end);
  }
  SECTION("the key array truncated, the manifest's bytes and crc32 agreeing") {
    bytes.resize(o.keys + 4);
    write_bytes(shard, bytes);
    doc["shards"][5]["bytes"] = bytes.size();
    doc["shards"][5]["crc32"] = crc_hex(bytes);
    write_manifest(dir, doc);
    file = manifest;
    says = "\"bytes\" is";
  }
  SECTION("one byte of a key flipped") {
    bytes[o.keys + 9] = static_cast<char>(bytes[o.keys + 9] ^ 0x01);
    write_bytes(shard, bytes);
    says = "checksum mismatch (expected "
           + doc["shards"][5]["crc32"].get<std::string>() + ", got "
           + crc_hex(bytes) + ")";
  }
  SECTION("one byte of a step flipped") {
    bytes[o.end - 1] = static_cast<char>(bytes[o.end - 1] ^ 0x80);
    write_bytes(shard, bytes);
    says = "checksum mismatch";
  }
  SECTION("the manifest's rows disagree with its bytes") {
    doc["shards"][5]["rows"] = 6;
    write_manifest(dir, doc);
    file = manifest;
    says = "shards[5] (shard-0005.bin): \"bytes\" is 316, but 6 keys x 3 "
           "cols with 2 slots make 368 bytes";
  }
  SECTION("a table shard without rows") {
    doc["shards"][5].erase("rows");
    write_manifest(dir, doc);
    file = manifest;
    says = "\"shards[5].rows\" is missing";
  }
  SECTION("a table shard with a row range") {
    doc["shards"][5]["row_end"] = 5;
    write_manifest(dir, doc);
    file = manifest;
    says = "a table shard must have row_begin and row_end 0, got 0 and 5";
  }
  SECTION("a table shard's file read as a dense shard") {
    doc["shards"][5]["kind"] = "dense";
    doc["shards"][5]["row_end"] = 5;
    write_manifest(dir, doc);
    file = manifest;
    says = "\"bytes\" is";
  }
  SECTION("a dense shard's file read as a table shard") {
    doc["shards"][0]["kind"] = "table";
    doc["shards"][0]["row_begin"] = 0;
    doc["shards"][0]["row_end"] = 0;
    doc["shards"][0]["rows"] = 2;
    write_manifest(dir, doc);
    file = manifest;
    says = "\"bytes\" is";
  }
  // The remaining cases rewrite the manifest's crc32 so that only the checks
  // of the header and the arrays can catch them.
  SECTION("counts of keys and steps that differ") {
    put_u64(bytes, o.lengths + 8 * 3, 4);
    put_u64(bytes, o.lengths + 8 * 4, 6);
    fix_crc = true;
    says = "4 keys but 6 steps";
  }
  SECTION("counts of keys and steps that disagree with the manifest's rows") {
    put_u64(bytes, o.lengths + 8 * 3, 4);
    put_u64(bytes, o.lengths + 8 * 4, 4);
    fix_crc = true;
    says = "4 keys, manifest says 5 rows";
  }
  SECTION("a key twice") {
    put_u64(bytes, o.keys + 8 * 3, 42);
    fix_crc = true;
    says = "duplicate key 42";
  }
  SECTION("the arrays of a dense shard in the header") {
    bytes[12] = 3;
    fix_crc = true;
    says = "header says 3 arrays, manifest says 5 (values and 2 slots, keys, "
           "steps)";
  }
  if (fix_crc) {
    write_bytes(shard, bytes);
    doc["shards"][5]["crc32"] = crc_hex(bytes);
    write_manifest(dir, doc);
  }
  auto msg = refusal(dir);
  INFO(msg);
  CHECK_THAT(msg, Catch::StartsWith(file + ": "));
  CHECK_THAT(msg, Catch::Contains(says));
}

TEST_CASE("an invalid table shard is refused before anything is written",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("ckpts");
  auto st = make_mixed_state(1);
  auto& t = st.shards[5]; // 5 keys x 3 cols, 2 slots
  std::string says;
  SECTION("a row range") {
    t.row_end = 4;
    says = "row_begin and row_end must be 0, got 0 and 4";
  }
  SECTION("values not keys x cols") {
    t.values.pop_back();
    says = "14 values, expected 5 keys x 3 cols = 15";
  }
  SECTION("a slot of another size") {
    t.slots[1].push_back(1.0f);
    says = "slot 1 has 16 floats, values have 15";
  }
  SECTION("three slots") {
    t.slots.push_back(t.values);
    says = "3 optimizer slots, at most 2";
  }
  SECTION("a step more than keys") {
    t.steps.push_back(1);
    says = "5 keys but 6 steps";
  }
  SECTION("a key more than steps") {
    t.keys.push_back(8);
    says = "6 keys but 5 steps";
  }
  SECTION("a key twice") {
    t.keys[3] = 42;
    says = "duplicate key 42";
  }
  SECTION("a key twice in a table with increasing keys") {
    st.shards[7].keys = {5, 6, 6};
    says = "duplicate key 6";
  }
  SECTION("a dense shard with keys") {
    st.shards[0].keys = {1};
    st.shards[0].steps = {1};
    says = "only table shards have keys and steps";
  }
  SECTION("a dense shard with steps") {
    st.shards[0].steps = {1};
    says = "only table shards have keys and steps";
  }
  std::string msg;
  try {
    write_checkpoint(root, st, 1);
  } catch (const std::invalid_argument& e) {
    msg = e.what();
  }
  CHECK_THAT(msg, Catch::StartsWith("write_checkpoint: "));
  CHECK_THAT(msg, Catch::Contains(says));
  CHECK_FALSE(fs::exists(root));
}

// -- version 1 ----------------------------------------------------------------

TEST_CASE("a version 1 checkpoint reads as dense shards and is written again "
          "as version 2",
          "[checkpoint]") {
  temp_dir tmp;
  auto st = make_state(55);
  auto dir = tmp.file("old/ckpt-0000000055");
  write_v1_checkpoint(dir, st);
  CHECK(latest_checkpoint(tmp.file("old")) == dir);
  auto back = read_checkpoint(dir);
  require_equal(back, st);
  for (auto& s : back.shards)
    CHECK_FALSE(s.table);
  auto again = write_checkpoint(tmp.file("new"), back, 1);
  CHECK(read_manifest(again)["version"] == 3);
  require_equal(read_checkpoint(again), st);
}

TEST_CASE("a version 1 checkpoint with a shard file of version 2 is refused",
          "[checkpoint]") {
  temp_dir tmp;
  auto dir = tmp.file("ckpt-0000000055");
  write_v1_checkpoint(dir, make_state(55));
  auto shard = dir + "/shard-0001.bin";
  auto bytes = read_bytes(shard);
  bytes[8] = 2;
  write_bytes(shard, bytes);
  auto doc = read_manifest(dir);
  doc["shards"][1]["crc32"] = crc_hex(bytes);
  write_manifest(dir, doc);
  auto msg = refusal(dir);
  CHECK_THAT(msg, Catch::StartsWith(shard + ": "));
  CHECK_THAT(msg,
             Catch::Contains("shard file version 2, but the manifest is "
                             "version 1"));
}
