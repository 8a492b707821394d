#include "core/table_file.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, {}};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint32_t bits_of(float x) {
  uint32_t b = 0;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

} // namespace

TEST_CASE("a table file gives back every key and row bit for bit") {
  test::temp_dir dir{"table_file"};
  std::mt19937_64 rng{11};
  std::vector<uint64_t> keys;
  uint64_t k = 0;
  for (int i = 0; i < 1000; ++i)
    keys.push_back(k += 1 + rng() % 1000000);
  keys.push_back(std::numeric_limits<uint64_t>::max());
  uint64_t dim = 3;
  std::vector<float> values(keys.size() * dim);
  for (auto& v : values) {
    uint32_t b = static_cast<uint32_t>(rng());
    std::memcpy(&v, &b, sizeof(v)); // any bits: NaNs, denormals, -0
  }
  auto path = dir.file("t.apstable");
  auto info = write_table_file(path, dim, keys, values);
  CHECK(info.bytes == 64 + 8 * keys.size() + 4 * values.size());
  CHECK(std::filesystem::file_size(path) == info.bytes);
  auto t = table_file::open(path);
  REQUIRE(t.rows() == keys.size());
  CHECK(t.dim() == dim);
  for (size_t i = 0; i < keys.size(); ++i) {
    CHECK(t.key(i) == keys[i]);
    const float* row = t.find(keys[i]);
    REQUIRE(row == t.row(i));
    for (uint64_t j = 0; j < dim; ++j)
      CHECK(bits_of(row[j]) == bits_of(values[i * dim + j]));
  }
  CHECK(t.find(0) == nullptr);
  CHECK(t.find(keys[5] + 1) == nullptr);
  // Moved, it stays mapped.
  auto moved = std::move(t);
  CHECK(moved.find(keys[7]) == moved.row(7));
}

TEST_CASE("a table file with no rows opens and finds nothing") {
  test::temp_dir dir{"table_file_empty"};
  auto path = dir.file("t.apstable");
  write_table_file(path, 4, {}, {});
  auto t = table_file::open(path);
  CHECK(t.rows() == 0);
  CHECK(t.find(1) == nullptr);
}

TEST_CASE("writing a table file refuses keys out of order and a wrong row "
          "count") {
  test::temp_dir dir{"table_file_bad_write"};
  CHECK_THROWS_AS(write_table_file(dir.file("a"), 1, {3, 3}, {1, 2}),
                  std::invalid_argument);
  CHECK_THROWS_AS(write_table_file(dir.file("b"), 1, {3, 2}, {1, 2}),
                  std::invalid_argument);
  CHECK_THROWS_AS(write_table_file(dir.file("c"), 2, {1, 2}, {1, 2}),
                  std::invalid_argument);
  CHECK_THROWS_AS(write_table_file(dir.file("d"), 0, {}, {}),
                  std::invalid_argument);
  CHECK(!std::filesystem::exists(dir.file("a")));
}

TEST_CASE("a corrupt or truncated table file is refused naming the file") {
  test::temp_dir dir{"table_file_corrupt"};
  auto path = dir.file("t.apstable");
  write_table_file(path, 2, {1, 5, 9}, {1, 2, 3, 4, 5, 6});
  auto good = slurp(path);
  struct damage {
    const char* what;
    std::string bytes;
    const char* message;
  };
  auto flip = [&](size_t at) {
    auto b = good;
    b[at] = static_cast<char>(b[at] ^ 0x04);
    return b;
  };
  std::vector<damage> cases = {
    {"a flipped value byte", flip(good.size() - 3), "checksum mismatch"},
    {"a flipped key byte", flip(64 + 8), "checksum mismatch"},
    {"a flipped header byte", flip(20), "header checksum mismatch"},
    {"another magic", flip(0), "not a table file"},
    {"cut in the rows", good.substr(0, good.size() - 5), "truncated"},
    {"cut in the header", good.substr(0, 40), "truncated"},
    {"empty", "", "truncated"},
    {"bytes after the end", good + "xx", "too long"},
  };
  for (auto& c : cases) {
    INFO(c.what);
    spit(path, c.bytes);
    CHECK_THROWS_WITH(table_file::open(path),
                      Catch::Contains(path) && Catch::Contains(c.message));
  }
  CHECK_THROWS_WITH(table_file::open(dir.file("missing")),
                    Catch::Contains(dir.file("missing")));
}
