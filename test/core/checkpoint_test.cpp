#include "core/checkpoint.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <csignal>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "test/temp_dir.hpp"
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "core/error.hpp"

using namespace actorps;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

/// A fresh directory for one test case (test/temp_dir.hpp).
struct temp_dir : test::temp_dir {
  temp_dir() : test::temp_dir("actorps_checkpoint_test") {}
};

std::vector<float> ramp(size_t n, float start) {
  std::vector<float> xs(n);
  for (size_t i = 0; i < n; ++i)
    xs[i] = start + 0.25f * static_cast<float>(i);
  return xs;
}

checkpoint_shard make_shard(std::string variable, uint32_t index,
                            uint64_t row_begin, uint64_t row_end, uint64_t cols,
                            uint32_t ps, size_t slots, float start) {
  checkpoint_shard s;
  s.variable = std::move(variable);
  s.index = index;
  s.row_begin = row_begin;
  s.row_end = row_end;
  s.cols = cols;
  s.ps = ps;
  auto n = (row_end - row_begin) * cols;
  s.values = ramp(n, start);
  for (size_t j = 0; j < slots; ++j)
    s.slots.push_back(ramp(n, start + 100.0f * static_cast<float>(j + 1)));
  return s;
}

/// A state with shards of 0, 1 and 2 slots, '/' in variable names, an empty
/// shard and floats whose bits are easy to lose (NaN, -0, inf, denormal).
checkpoint_state make_state(uint64_t step) {
  checkpoint_state st;
  st.global_step = step;
  st.epoch = 3;
  st.step_in_epoch = 17;
  st.workers = {{3, 1024}, {2, 0}, {4, 64}};
  st.ps_clocks = {step, step + 1};
  st.optimizer_steps = {step / 2, step / 2 + 7};
  st.job = {{"model", "mlp 784-256-10"},
            {"optimizer", "adam lr=0.001"},
            {"variables", "dense/kernel:784x256 \"quoted\"\n"},
            {"cluster", "2 ps, 3 workers"}};
  st.shards.push_back(make_shard("dense/kernel", 1, 3, 5, 4, 1, 2, 1.0f));
  st.shards.push_back(make_shard("dense/kernel", 0, 0, 3, 4, 0, 2, -1.0f));
  st.shards.push_back(make_shard("dense/bias", 0, 0, 10, 1, 1, 1, 0.5f));
  st.shards.push_back(make_shard("embedding", 0, 7, 9, 3, 0, 0, 2.0f));
  st.shards.push_back(make_shard("embedding", 1, 9, 9, 3, 1, 0, 0.0f));
  auto& v = st.shards[3].values;
  v[0] = std::numeric_limits<float>::quiet_NaN();
  v[1] = -0.0f;
  v[2] = std::numeric_limits<float>::infinity();
  v[3] = std::numeric_limits<float>::denorm_min();
  return st;
}

/// A table shard: one row of `cols` floats per key, steps 2^40 + 3 i (so
/// that they need more than 32 bits).
checkpoint_shard make_table(std::string variable, uint32_t index,
                            std::vector<uint64_t> keys, uint64_t cols,
                            uint32_t ps, size_t slots, float start) {
  checkpoint_shard s;
  s.variable = std::move(variable);
  s.index = index;
  s.table = true;
  s.cols = cols;
  s.ps = ps;
  auto n = keys.size() * cols;
  s.values = ramp(n, start);
  for (size_t j = 0; j < slots; ++j)
    s.slots.push_back(ramp(n, start - 100.0f * static_cast<float>(j + 1)));
  for (size_t i = 0; i < keys.size(); ++i)
    s.steps.push_back((uint64_t{1} << 40) + 3 * i);
  s.keys = std::move(keys);
  return s;
}

/// make_state(step) plus three table shards after its five dense ones:
/// unsorted keys from 0 to 2^64 - 1 with 2 slots, an empty table, and a
/// table without slots.
checkpoint_state make_mixed_state(uint64_t step) {
  auto st = make_state(step);
  st.shards.push_back(make_table("user/embedding", 0,
                                 {42, 0, std::numeric_limits<uint64_t>::max(),
                                  7, uint64_t{1} << 63},
                                 3, 1, 2, 0.5f));
  st.shards.push_back(make_table("user/embedding", 1, {}, 3, 0, 2, 0.0f));
  st.shards.push_back(make_table("item", 0, {5, 6, 9}, 2, 0, 0, -3.0f));
  st.shards[5].values[1] = std::numeric_limits<float>::quiet_NaN();
  st.shards[5].values[2] = -0.0f;
  return st;
}

/// Little-endian integers inside a byte string.
uint64_t get_u64(const std::string& bytes, size_t off) {
  uint64_t x = 0;
  for (int k = 7; k >= 0; --k)
    x = (x << 8) | static_cast<unsigned char>(bytes[off + k]);
  return x;
}

void put_u64(std::string& bytes, size_t off, uint64_t x) {
  for (size_t k = 0; k < 8; ++k)
    bytes[off + k] = static_cast<char>(x >> (8 * k));
}

std::string le_bytes(uint64_t x, size_t n) {
  std::string result(n, '\0');
  for (size_t k = 0; k < n; ++k)
    result[k] = static_cast<char>(x >> (8 * k));
  return result;
}

bool same_bits(const std::vector<float>& xs, const std::vector<float>& ys) {
  return xs.size() == ys.size()
         && (xs.empty()
             || std::memcmp(xs.data(), ys.data(), xs.size() * sizeof(float))
                  == 0);
}

void require_equal(const checkpoint_state& a, const checkpoint_state& b) {
  REQUIRE(a.global_step == b.global_step);
  REQUIRE(a.epoch == b.epoch);
  REQUIRE(a.step_in_epoch == b.step_in_epoch);
  REQUIRE(a.workers.size() == b.workers.size());
  for (size_t i = 0; i < a.workers.size(); ++i) {
    CHECK(a.workers[i].epoch == b.workers[i].epoch);
    CHECK(a.workers[i].offset == b.workers[i].offset);
  }
  REQUIRE(a.ps_clocks == b.ps_clocks);
  REQUIRE(a.optimizer_steps == b.optimizer_steps);
  REQUIRE(a.job == b.job);
  REQUIRE(a.shards.size() == b.shards.size());
  for (size_t i = 0; i < a.shards.size(); ++i) {
    auto& x = a.shards[i];
    auto& y = b.shards[i];
    INFO("shard " << i << ": " << x.variable << " " << x.index);
    CHECK(x.variable == y.variable);
    CHECK(x.index == y.index);
    CHECK(x.row_begin == y.row_begin);
    CHECK(x.row_end == y.row_end);
    CHECK(x.cols == y.cols);
    CHECK(x.ps == y.ps);
    CHECK(x.table == y.table);
    CHECK(same_bits(x.values, y.values));
    REQUIRE(x.slots.size() == y.slots.size());
    for (size_t j = 0; j < x.slots.size(); ++j)
      CHECK(same_bits(x.slots[j], y.slots[j]));
    CHECK(x.keys == y.keys);
    CHECK(x.steps == y.steps);
  }
}

std::string read_bytes(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  REQUIRE(out);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out);
}

json read_manifest(const std::string& dir) {
  return json::parse(read_bytes(dir + "/manifest.json"));
}

void write_manifest(const std::string& dir, const json& doc) {
  write_bytes(dir + "/manifest.json", doc.dump(2));
}

std::string crc_hex(const std::string& bytes) {
  auto crc = ::crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()),
                     static_cast<uInt>(bytes.size()));
  return fmt::format("{:08x}", crc);
}

/// Writes `st` (dense shards only) as a version 1 checkpoint in `dir`, as
/// the writer of version 1 did: the same shard-file layout with version 1 in
/// its header, and a manifest without "kind".
void write_v1_checkpoint(const std::string& dir, const checkpoint_state& st) {
  fs::create_directories(dir);
  json doc = {{"format", "actorps-checkpoint"},
              {"version", 1},
              {"global_step", st.global_step},
              {"epoch", st.epoch},
              {"step_in_epoch", st.step_in_epoch},
              {"workers", json::array()},
              {"ps_clocks", st.ps_clocks},
              {"optimizer_steps", st.optimizer_steps},
              {"job", st.job},
              {"shards", json::array()}};
  for (auto& w : st.workers)
    doc["workers"].push_back({{"epoch", w.epoch}, {"offset", w.offset}});
  for (size_t i = 0; i < st.shards.size(); ++i) {
    auto& s = st.shards[i];
    REQUIRE_FALSE(s.table);
    std::string bytes = "APSSHARD" + le_bytes(1, 4)
                        + le_bytes(1 + s.slots.size(), 4);
    std::vector<const std::vector<float>*> arrays{&s.values};
    for (auto& slot : s.slots)
      arrays.push_back(&slot);
    for (auto* xs : arrays)
      bytes += le_bytes(xs->size(), 8);
    for (auto* xs : arrays)
      for (float x : *xs) {
        uint32_t bits;
        std::memcpy(&bits, &x, 4);
        bytes += le_bytes(bits, 4);
      }
    auto file = fmt::format("shard-{:04}.bin", i);
    write_bytes(dir + "/" + file, bytes);
    doc["shards"].push_back({{"variable", s.variable},
                             {"index", s.index},
                             {"row_begin", s.row_begin},
                             {"row_end", s.row_end},
                             {"cols", s.cols},
                             {"ps", s.ps},
                             {"slots", s.slots.size()},
                             {"file", file},
                             {"bytes", bytes.size()},
                             {"crc32", crc_hex(bytes)}});
  }
  write_manifest(dir, doc);
}

/// Where the arrays of table shard `s` start in its shard file.
struct table_offsets {
  size_t arrays;  // in the header
  size_t lengths; // the uint64 length table
  size_t floats;  // values, then each slot
  size_t keys;
  size_t steps;
  size_t end;     // the file's size
};

table_offsets offsets_of(const checkpoint_shard& s) {
  table_offsets o;
  auto rows = s.keys.size();
  o.arrays = 3 + s.slots.size();
  o.lengths = 16;
  o.floats = o.lengths + 8 * o.arrays;
  o.keys = o.floats + 4 * (1 + s.slots.size()) * rows * s.cols;
  o.steps = o.keys + 8 * rows;
  o.end = o.steps + 8 * rows;
  return o;
}

/// The message read_checkpoint(dir) throws as input_error ("" if none).
std::string refusal(const std::string& dir) {
  try {
    read_checkpoint(dir);
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

/// The names in `dir`, sorted.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> result;
  for (auto& e : fs::directory_iterator(dir))
    result.push_back(e.path().filename().string());
  std::sort(result.begin(), result.end());
  return result;
}

/// Lowers the soft file-size limit of this process for its lifetime, so that
/// writes beyond `bytes` fail with EFBIG as on a full disk.
class file_size_limit {
public:
  explicit file_size_limit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    auto lim = saved_;
    lim.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  }

  ~file_size_limit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

  file_size_limit(const file_size_limit&) = delete;
  file_size_limit& operator=(const file_size_limit&) = delete;

private:
  rlimit saved_;
  void (*old_handler_)(int);
};

} // namespace

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
  CHECK(doc["version"] == 2);
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
    CHECK(bytes[8] == 2);  // version, little-endian
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
    bytes[8] = 3;
    fix_crc = true;
    file = shard;
    says = "unsupported shard file version 3";
  }
  SECTION("a shard file of another version than the manifest") {
    bytes[8] = 1;
    fix_crc = true;
    file = shard;
    says = "shard file version 1, but the manifest is version 2";
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
  CHECK(doc["version"] == 2);
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
    CHECK(get_u64(bytes, 8) == (uint64_t{o.arrays} << 32 | 2));
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
  CHECK(read_manifest(again)["version"] == 2);
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
