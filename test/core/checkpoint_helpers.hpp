#pragma once

// What the checkpoint tests share (checkpoint_test.cpp: dense shards, the
// manifest, retention, damage, full disks; checkpoint_table_test.cpp: table
// shards and version 1): states to write, byte-level access to the files,
// and a file-size limit that makes writes fail as on a full disk.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "core/checkpoint.hpp"
#include "core/error.hpp"
#include "test/temp_dir.hpp"

namespace checkpoint_test {

using namespace actorps;
namespace fs = std::filesystem;
using json = nlohmann::json;

/// A fresh directory for one test case (test/temp_dir.hpp).
struct temp_dir : test::temp_dir {
  temp_dir() : test::temp_dir("actorps_checkpoint_test") {}
};

inline std::vector<float> ramp(size_t n, float start) {
  std::vector<float> xs(n);
  for (size_t i = 0; i < n; ++i)
    xs[i] = start + 0.25f * static_cast<float>(i);
  return xs;
}

inline checkpoint_shard make_shard(std::string variable, uint32_t index,
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
inline checkpoint_state make_state(uint64_t step) {
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
inline checkpoint_shard make_table(std::string variable, uint32_t index,
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
inline checkpoint_state make_mixed_state(uint64_t step) {
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
inline uint64_t get_u64(const std::string& bytes, size_t off) {
  uint64_t x = 0;
  for (int k = 7; k >= 0; --k)
    x = (x << 8) | static_cast<unsigned char>(bytes[off + k]);
  return x;
}

inline void put_u64(std::string& bytes, size_t off, uint64_t x) {
  for (size_t k = 0; k < 8; ++k)
    bytes[off + k] = static_cast<char>(x >> (8 * k));
}

inline std::string le_bytes(uint64_t x, size_t n) {
  std::string result(n, '\0');
  for (size_t k = 0; k < n; ++k)
    result[k] = static_cast<char>(x >> (8 * k));
  return result;
}

inline bool same_bits(const std::vector<float>& xs,
                      const std::vector<float>& ys) {
  return xs.size() == ys.size()
         && (xs.empty()
             || std::memcmp(xs.data(), ys.data(), xs.size() * sizeof(float))
                  == 0);
}

inline void require_equal(const checkpoint_state& a,
                          const checkpoint_state& b) {
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

inline std::string read_bytes(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  REQUIRE(out);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out);
}

inline json read_manifest(const std::string& dir) {
  return json::parse(read_bytes(dir + "/manifest.json"));
}

inline void write_manifest(const std::string& dir, const json& doc) {
  write_bytes(dir + "/manifest.json", doc.dump(2));
}

inline std::string crc_hex(const std::string& bytes) {
  auto crc = ::crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()),
                     static_cast<uInt>(bytes.size()));
  return fmt::format("{:08x}", crc);
}

/// Writes `st` (dense shards only) as a version 1 checkpoint in `dir`, as
/// the writer of version 1 did: the same shard-file layout with version 1 in
/// its header, and a manifest without "kind".
inline void write_v1_checkpoint(const std::string& dir,
                                const checkpoint_state& st) {
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

inline table_offsets offsets_of(const checkpoint_shard& s) {
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
inline std::string refusal(const std::string& dir) {
  try {
    read_checkpoint(dir);
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

/// The names in `dir`, sorted.
inline std::vector<std::string> entries(const std::string& dir) {
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

} // namespace checkpoint_test
