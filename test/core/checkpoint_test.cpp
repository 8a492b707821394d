// Checkpoints (core/checkpoint.hpp) of dense shards: read back bit-exact,
// the manifest and one file per shard, which checkpoint is the latest,
// retention, an inconsistent state refused before writing, damage of every
// kind refused naming the file, roots that cannot be created, a full disk.
// Table shards and version 1: checkpoint_table_test.cpp.

#include "test/core/checkpoint_helpers.hpp"

using namespace checkpoint_test;

TEST_CASE("a checkpoint read back equals the state written, float bits "
          "included",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("ckpts");
  auto st = make_state(1234);
  auto dir = write_checkpoint(root, st, 3);
  CHECK(dir == root + "/ckpt-0000001234");
  auto back = read_checkpoint(dir);
  require_equal(back, st);
  CHECK(std::isnan(back.shards[3].values[0]));
}

TEST_CASE("a checkpoint directory holds a manifest and one file per shard in "
          "the documented format",
          "[checkpoint]") {
  temp_dir tmp;
  auto st = make_state(7);
  auto dir = write_checkpoint(tmp.file("ckpts"), st, 1);
  std::vector<std::string> expected{"manifest.json"};
  for (size_t i = 0; i < st.shards.size(); ++i)
    expected.push_back(fmt::format("shard-{:04}.bin", i));
  std::sort(expected.begin(), expected.end());
  REQUIRE(entries(dir) == expected);
  auto doc = read_manifest(dir);
  CHECK(doc["format"] == "actorps-checkpoint");
  CHECK(doc["version"] == 3);
  CHECK(doc["global_step"] == 7);
  CHECK(doc["workers"][0]["offset"] == 1024);
  CHECK(doc["job"]["model"] == "mlp 784-256-10");
  REQUIRE(doc["shards"].size() == st.shards.size());
  for (size_t i = 0; i < st.shards.size(); ++i) {
    auto& e = doc["shards"][i];
    auto& s = st.shards[i];
    INFO("shard " << i);
    CHECK(e["variable"] == s.variable);
    CHECK(e["kind"] == "dense");
    CHECK_FALSE(e.contains("rows"));
    CHECK(e["slots"] == s.slots.size());
    auto bytes = read_bytes(dir + "/" + e["file"].get<std::string>());
    CHECK(e["bytes"] == bytes.size());
    CHECK(e["crc32"] == crc_hex(bytes));
    auto arrays = 1 + s.slots.size();
    REQUIRE(bytes.size() == 16 + arrays * (8 + 4 * s.values.size()));
    CHECK(bytes.compare(0, 8, "APSSHARD") == 0);
    CHECK(bytes[8] == 3);  // version, little-endian
    CHECK(static_cast<size_t>(bytes[12]) == arrays);
    CHECK(static_cast<size_t>(static_cast<unsigned char>(bytes[16]))
          == s.values.size());
    if (!s.values.empty()) {
      // The first value, little-endian float32.
      auto off = 16 + 8 * arrays;
      uint32_t bits = 0;
      for (int k = 3; k >= 0; --k)
        bits = (bits << 8) | static_cast<unsigned char>(bytes[off + k]);
      uint32_t want;
      std::memcpy(&want, &s.values[0], 4);
      CHECK(bits == want);
    }
  }
}

TEST_CASE("latest_checkpoint picks the highest step and ignores temporary and "
          "incomplete directories",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("ckpts");
  CHECK(latest_checkpoint(root) == "");
  fs::create_directories(root);
  CHECK(latest_checkpoint(root) == "");
  for (uint64_t step : {5, 20, 10})
    write_checkpoint(root, make_state(step), 10);
  // Not checkpoints: a temporary dir with a higher step and a manifest, a
  // checkpoint name without a manifest, a name with too few digits.
  fs::create_directories(root + "/.tmp-ckpt-0000000099-1-0");
  write_bytes(root + "/.tmp-ckpt-0000000099-1-0/manifest.json", "{}");
  fs::create_directories(root + "/ckpt-0000000030");
  fs::create_directories(root + "/ckpt-40");
  write_bytes(root + "/ckpt-40/manifest.json", "{}");
  CHECK(latest_checkpoint(root) == root + "/ckpt-0000000020");
  CHECK(read_checkpoint(latest_checkpoint(root)).global_step == 20);
}

TEST_CASE("latest_checkpoint refuses a root that is not a directory",
          "[checkpoint]") {
  temp_dir tmp;
  auto file = tmp.file("plain");
  write_bytes(file, "x");
  try {
    latest_checkpoint(file);
    FAIL("no input_error");
  } catch (const input_error& e) {
    CHECK_THAT(e.what(), Catch::Contains(file));
  }
}

TEST_CASE("keep=2 leaves exactly the newest two checkpoints and removes stale "
          "temporary directories",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("ckpts");
  write_checkpoint(root, make_state(1), 2);
  fs::create_directories(root + "/.tmp-x");
  write_bytes(root + "/.tmp-x/manifest.json", "{}");
  CHECK(latest_checkpoint(root) == root + "/ckpt-0000000001");
  for (uint64_t step = 2; step <= 5; ++step)
    write_checkpoint(root, make_state(step), 2);
  CHECK(entries(root)
        == std::vector<std::string>{"ckpt-0000000004", "ckpt-0000000005"});
  CHECK(latest_checkpoint(root) == root + "/ckpt-0000000005");
  require_equal(read_checkpoint(root + "/ckpt-0000000004"), make_state(4));
}

TEST_CASE("the new checkpoint is kept even when newer ones are there",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("ckpts");
  write_checkpoint(root, make_state(200), 5);
  write_checkpoint(root, make_state(100), 5);
  write_checkpoint(root, make_state(110), 2);
  CHECK(entries(root)
        == std::vector<std::string>{"ckpt-0000000110", "ckpt-0000000200"});
  write_checkpoint(root, make_state(120), 1);
  CHECK(entries(root) == std::vector<std::string>{"ckpt-0000000120"});
}

TEST_CASE("writing a step again replaces its checkpoint", "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("ckpts");
  write_checkpoint(root, make_state(3), 3);
  auto st = make_state(3);
  st.epoch = 9;
  st.shards.pop_back();
  st.shards[0].values[0] = 42.0f;
  auto dir = write_checkpoint(root, st, 3);
  CHECK(entries(root) == std::vector<std::string>{"ckpt-0000000003"});
  require_equal(read_checkpoint(dir), st);
}

TEST_CASE("an inconsistent state is refused before anything is written",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("ckpts");
  auto st = make_state(1);
  SECTION("keep 0") {
    CHECK_THROWS_AS(write_checkpoint(root, st, 0), std::invalid_argument);
  }
  SECTION("values not rows x cols") {
    st.shards[0].values.pop_back();
    CHECK_THROWS_AS(write_checkpoint(root, st, 1), std::invalid_argument);
  }
  SECTION("a slot of another size") {
    st.shards[0].slots[1].push_back(1.0f);
    CHECK_THROWS_AS(write_checkpoint(root, st, 1), std::invalid_argument);
  }
  SECTION("three slots") {
    st.shards[0].slots.push_back(st.shards[0].values);
    CHECK_THROWS_AS(write_checkpoint(root, st, 1), std::invalid_argument);
  }
  SECTION("a shard twice") {
    st.shards.push_back(st.shards[0]);
    CHECK_THROWS_AS(write_checkpoint(root, st, 1), std::invalid_argument);
  }
  SECTION("a variable name that is not UTF-8") {
    st.shards[0].variable = "bad\xff";
    CHECK_THROWS_AS(write_checkpoint(root, st, 1), std::invalid_argument);
  }
  CHECK_FALSE(fs::exists(root));
}

TEST_CASE("a damaged checkpoint is refused with the damaged file named",
          "[checkpoint]") {
  temp_dir tmp;
  auto st = make_state(42);
  auto dir = write_checkpoint(tmp.file("ckpts"), st, 1);
  auto manifest = dir + "/manifest.json";
  auto doc = read_manifest(dir);
  // shards[0] has 2 slots: 3 arrays of 2 x 4 floats.
  auto shard = dir + "/shard-0000.bin";
  auto bytes = read_bytes(shard);
  std::string file = manifest;
  std::string says;
  bool fix_crc = false;
  SECTION("manifest missing") {
    fs::remove(manifest);
    says = "cannot open";
  }
  SECTION("manifest malformed") {
    write_bytes(manifest, "{\"format\": \"actorps-checkpoint\", ");
    says = "malformed JSON";
  }
  SECTION("manifest not an object") {
    write_bytes(manifest, "[1, 2]");
    says = "must be a JSON object";
  }
  SECTION("wrong format") {
    doc["format"] = "tf-checkpoint";
    write_manifest(dir, doc);
    says = "not an actorps checkpoint";
  }
  SECTION("version 99") {
    doc["version"] = 99;
    write_manifest(dir, doc);
    says = "unsupported checkpoint version 99";
  }
  SECTION("version 7") {
    doc["version"] = 7;
    write_manifest(dir, doc);
    says = "unsupported checkpoint version 7";
  }
  SECTION("version 0") {
    doc["version"] = 0;
    write_manifest(dir, doc);
    says = "unsupported checkpoint version 0";
  }
  SECTION("a shard without a kind") {
    doc["shards"][1].erase("kind");
    write_manifest(dir, doc);
    says = "\"shards[1].kind\" is missing";
  }
  SECTION("a shard of an unknown kind") {
    doc["shards"][1]["kind"] = "sparse";
    write_manifest(dir, doc);
    says = "\"shards[1].kind\" must be \"dense\" or \"table\", got "
           "\"sparse\"";
  }
  SECTION("a field missing") {
    doc["shards"][2].erase("cols");
    write_manifest(dir, doc);
    says = "\"shards[2].cols\" is missing";
  }
  SECTION("a count negative") {
    doc["workers"][1]["offset"] = -1;
    write_manifest(dir, doc);
    says = "\"workers[1].offset\" must not be negative";
  }
  SECTION("a count of the wrong type") {
    doc["ps_clocks"][0] = "12";
    write_manifest(dir, doc);
    says = "\"ps_clocks[0]\" must be a whole number";
  }
  SECTION("epoch out of range") {
    doc["epoch"] = uint64_t{1} << 40;
    write_manifest(dir, doc);
    says = "\"epoch\"";
  }
  SECTION("a job field that is not text") {
    doc["job"]["model"] = 3;
    write_manifest(dir, doc);
    says = "\"job.model\" must be a string";
  }
  SECTION("too many slots") {
    doc["shards"][0]["slots"] = 3;
    write_manifest(dir, doc);
    says = "\"shards[0].slots\" is 3";
  }
  SECTION("a bad crc32 text") {
    doc["shards"][0]["crc32"] = "XYZ";
    write_manifest(dir, doc);
    says = "8 lowercase hex digits";
  }
  SECTION("a shard file outside the directory") {
    doc["shards"][0]["file"] = "../ckpt-0000000041/shard-0000.bin";
    write_manifest(dir, doc);
    says = "not a plain file name";
  }
  SECTION("two shards in one file") {
    doc["shards"][1]["file"] = doc["shards"][0]["file"];
    write_manifest(dir, doc);
    says = "a second time";
  }
  SECTION("\"bytes\" disagrees with rows x cols") {
    doc["shards"][0]["bytes"] = bytes.size() + 4;
    write_manifest(dir, doc);
    says = "\"bytes\" is";
  }
  SECTION("rows x cols disagree with \"bytes\"") {
    doc["shards"][0]["row_end"] = 4;
    write_manifest(dir, doc);
    says = "\"bytes\" is";
  }
  SECTION("rows x cols too large to allocate") {
    doc["shards"][0]["row_end"] = uint64_t{1} << 62;
    doc["shards"][0]["cols"] = uint64_t{1} << 62;
    write_manifest(dir, doc);
    says = "too large";
  }
  SECTION("one byte of a shard file flipped") {
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
    write_bytes(shard, bytes);
    file = shard;
    says = "checksum mismatch (expected "
           + doc["shards"][0]["crc32"].get<std::string>() + ", got "
           + crc_hex(bytes) + ")";
  }
  SECTION("a shard file truncated") {
    write_bytes(shard, bytes.substr(0, bytes.size() - 3));
    file = shard;
    says = fmt::format("truncated: {} bytes, manifest says {}",
                       bytes.size() - 3, bytes.size());
  }
  SECTION("a shard file too long") {
    write_bytes(shard, bytes + "x");
    file = shard;
    says = "too long";
  }
  SECTION("a shard file missing") {
    fs::remove(shard);
    file = shard;
    says = "cannot open shard file";
  }
  // The remaining cases rewrite the manifest's crc32 so that only the check
  // of the header can catch them.
  SECTION("a shard file with a bad magic") {
    bytes[0] = 'X';
    fix_crc = true;
    file = shard;
    says = "bad magic";
  }
  SECTION("a shard file of an unknown version") {
    bytes[8] = 4;
    fix_crc = true;
    file = shard;
    says = "unsupported shard file version 4";
  }
  SECTION("a shard file of another version than the manifest") {
    bytes[8] = 1;
    fix_crc = true;
    file = shard;
    says = "shard file version 1, but the manifest is version 3";
  }
  SECTION("a shard file with fewer arrays than the manifest's slots") {
    bytes[12] = 2;
    fix_crc = true;
    file = shard;
    says = "header says 2 arrays, manifest says 3";
  }
  SECTION("a shard file whose float counts disagree with rows x cols") {
    // 8 floats in each array; 7 and 9 keep the file's size.
    bytes[16] = 7;
    bytes[24] = 9;
    fix_crc = true;
    file = shard;
    says = "array 0 has 7 floats, manifest says 8 (2 rows x 4 cols)";
  }
  if (fix_crc) {
    write_bytes(shard, bytes);
    doc["shards"][0]["crc32"] = crc_hex(bytes);
    write_manifest(dir, doc);
  }
  auto msg = refusal(dir);
  INFO(msg);
  CHECK_THAT(msg, Catch::StartsWith(file + ": "));
  CHECK_THAT(msg, Catch::Contains(says));
}

TEST_CASE("a write into a root that cannot be created throws runtime_failure "
          "and leaves other checkpoints readable",
          "[checkpoint]") {
  temp_dir tmp;
  auto good_root = tmp.file("good");
  auto st = make_state(8);
  auto good = write_checkpoint(good_root, st, 2);
  write_bytes(tmp.file("plain"), "not a directory");
  auto bad_root = tmp.file("plain") + "/ckpts";
  try {
    write_checkpoint(bad_root, make_state(9), 2);
    FAIL("no runtime_failure");
  } catch (const runtime_failure& e) {
    CHECK_THAT(e.what(), Catch::Contains(bad_root));
  }
  CHECK(latest_checkpoint(good_root) == good);
  require_equal(read_checkpoint(good), st);
}

TEST_CASE("a write into a root whose parents are missing creates them, as "
          "TensorFlow's checkpoint manager does",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("runs") + "/2026/job-7";
  REQUIRE_FALSE(fs::exists(tmp.file("runs")));
  auto st = make_state(8);
  auto written = write_checkpoint(root, st, 2);
  CHECK(latest_checkpoint(root) == written);
  require_equal(read_checkpoint(written), st);
}

TEST_CASE("prepare_checkpoint_root creates a missing root with its parents "
          "and refuses one that cannot be written as bad input naming it",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("a") + "/b/c";
  prepare_checkpoint_root(root);
  CHECK(fs::is_directory(root));
  CHECK(fs::is_empty(root)); // the probe is gone
  prepare_checkpoint_root(root); // again: nothing to do
  write_bytes(tmp.file("plain"), "not a directory");
  for (auto bad : {tmp.file("plain"), tmp.file("plain") + "/ckpts/x"}) {
    try {
      prepare_checkpoint_root(bad);
      FAIL("no input_error for " << bad);
    } catch (const input_error& e) {
      CHECK_THAT(e.what(), Catch::StartsWith("checkpoint directory "));
      CHECK_THAT(e.what(), Catch::Contains(bad.substr(0, bad.find("/ckpts"))));
    }
  }
  if (::geteuid() != 0) {
    fs::create_directories(tmp.file("ro"));
    fs::permissions(tmp.file("ro"), fs::perms::owner_read
                                      | fs::perms::owner_exec);
    CHECK_THROWS_AS(prepare_checkpoint_root(tmp.file("ro")), input_error);
    fs::permissions(tmp.file("ro"), fs::perms::owner_all);
  }
}

TEST_CASE("a write that runs out of space leaves no trace and the checkpoints "
          "before it intact",
          "[checkpoint]") {
  temp_dir tmp;
  auto root = tmp.file("ckpts");
  auto st = make_state(1);
  auto good = write_checkpoint(root, st, 3);
  auto big = make_state(1);
  big.shards.push_back(make_shard("big", 0, 0, 1000, 16, 0, 2, 0.0f));
  std::string msg;
  for (uint64_t step : {1, 2}) {
    big.global_step = step;
    try {
      file_size_limit limit{4096};
      write_checkpoint(root, big, 3);
    } catch (const runtime_failure& e) {
      msg = e.what();
    }
    INFO("step " << step);
    CHECK_THAT(msg, Catch::Contains(root + "/.tmp-"));
    CHECK_THAT(msg, Catch::Contains("shard-0005.bin"));
    msg.clear();
  }
  CHECK(entries(root) == std::vector<std::string>{"ckpt-0000000001"});
  CHECK(latest_checkpoint(root) == good);
  require_equal(read_checkpoint(good), st);
}

// -- table shards -------------------------------------------------------------
