#include "core/libsvm.hpp"

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <zlib.h>

#include "core/bad_record.hpp"
#include "core/error.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
}

void write_gz(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size()))
          == static_cast<int>(text.size()));
  gzclose(f);
}

/// The keys of row r of field 0.
std::vector<uint64_t> keys_of(const dataset& ds, uint64_t r) {
  const auto& f = ds.examples.fields[0];
  return {f.keys.begin() + f.offsets[r], f.keys.begin() + f.offsets[r + 1]};
}

std::vector<float> values_of(const dataset& ds, uint64_t r) {
  const auto& f = ds.examples.fields[0];
  return {f.values.begin() + f.offsets[r], f.values.begin() + f.offsets[r + 1]};
}

const std::string sample = "+1 1:0.5 3:1 10:2e-1\n"
                           "-1 2:1\n"
                           "\n"
                           "0\n"
                           "1 4:-3 5:7\r\n"
                           "-1\t1:1   9:1 \n";

} // namespace

TEST_CASE("a LIBSVM file becomes one weighted sparse field with binary "
          "labels",
          "[core][libsvm]") {
  test::temp_dir dir{"libsvm"};
  write_file(dir.file("plain.txt"), sample);
  write_gz(dir.file("packed.gz"), sample);
  for (auto name : {"plain.txt", "packed.gz"}) {
    INFO(name);
    auto ds = load_libsvm(dir.file(name), 10);
    CHECK_NOTHROW(ds.examples.check("ds"));
    REQUIRE(ds.rows() == 5); // the empty line is skipped
    CHECK(ds.schema.dense_dim == 0);
    REQUIRE(ds.schema.fields.size() == 1);
    CHECK(ds.schema.fields[0].name == "features");
    CHECK(ds.schema.fields[0].vocabulary == 10);
    CHECK(ds.schema.fields[0].weighted);
    CHECK(ds.schema.labels == label_kind::binary);
    CHECK(ds.schema.classes == 2);
    CHECK(ds.examples.labels == std::vector<int32_t>{1, 0, 0, 1, 0});
    CHECK(keys_of(ds, 0) == std::vector<uint64_t>{0, 2, 9});
    CHECK(values_of(ds, 0) == std::vector<float>{0.5f, 1.0f, 0.2f});
    CHECK(keys_of(ds, 1) == std::vector<uint64_t>{1});
    CHECK(keys_of(ds, 2).empty()); // a label alone: an all-zero example
    CHECK(keys_of(ds, 3) == std::vector<uint64_t>{3, 4});
    CHECK(values_of(ds, 3) == std::vector<float>{-3.0f, 7.0f}); // "\r\n" ok
    CHECK(keys_of(ds, 4) == std::vector<uint64_t>{0, 8}); // tabs, blanks
  }
}

TEST_CASE("a zero-based LIBSVM file keeps its indices as keys",
          "[core][libsvm]") {
  test::temp_dir dir{"libsvm"};
  write_file(dir.file("z.txt"), "1 0:1 9:2\n0 5:1\n");
  auto ds = load_libsvm(dir.file("z.txt"), 10, false);
  CHECK(keys_of(ds, 0) == std::vector<uint64_t>{0, 9});
  CHECK(keys_of(ds, 1) == std::vector<uint64_t>{5});
  CHECK_THROWS_WITH(load_libsvm(dir.file("z.txt"), 9, false),
                    Catch::Contains("z.txt:1: index 9 is above the last "
                                    "feature 8"));
}

TEST_CASE("a limit keeps the first examples of a LIBSVM file",
          "[core][libsvm]") {
  test::temp_dir dir{"libsvm"};
  // The line after the limit is broken, and never read.
  write_file(dir.file("l.txt"), "1 1:1\n0 2:1\n\n1 3:1\nbroken\n");
  auto ds = load_libsvm(dir.file("l.txt"), 3, true, 3);
  CHECK(ds.rows() == 3);
  CHECK(keys_of(ds, 2) == std::vector<uint64_t>{2});
  CHECK_THROWS_WITH(load_libsvm(dir.file("l.txt"), 3),
                    Catch::Contains("l.txt:5:"));
}

TEST_CASE("malformed LIBSVM lines are input errors naming file and line",
          "[core][libsvm]") {
  struct bad_case {
    std::string line;
    std::string message;
  };
  const std::vector<bad_case> cases{
    {"2 1:1", "label \"2\" is not one of"},
    {"yes 1:1", "label \"yes\" is not one of"},
    {"0.5 1:1", "label \"0.5\""},
    {"1 1:1 x:1", "index \"x\" is not a whole number"},
    {"1 -3:1", "index \"-3\" is not a whole number"},
    {"1 1:1 2:abc", "value \"abc\" of index 2 is not a finite number"},
    {"1 2:nan", "value \"nan\" of index 2"},
    {"1 2:1e99", "value \"1e99\""},
    {"1 2", "expected index:value, got \"2\""},
    {"1 2:1 3", "expected index:value, got \"3\""},
    {"1 0:1", "index 0 is below the first index 1"},
    {"1 11:1", "index 11 is above the last feature 10 (num_features 10)"},
    {"1 3:1 2:1", "index 2 after 3: indices must be strictly ascending"},
    {"1 3:1 3:1", "index 3 after 3"},
  };
  test::temp_dir dir{"libsvm"};
  for (auto& c : cases) {
    INFO(c.line);
    auto path = dir.file("bad.txt");
    write_file(path, "1 1:1\n\n" + c.line + "\n0 1:1\n");
    CHECK_THROWS_AS(load_libsvm(path, 10), input_error);
    CHECK_THROWS_WITH(load_libsvm(path, 10),
                      Catch::StartsWith(path + ":3: ")
                        && Catch::Contains(c.message));
  }
}

TEST_CASE("a LIBSVM line longer than 1 MiB is refused without reading it "
          "whole",
          "[core][libsvm]") {
  test::temp_dir dir{"libsvm"};
  std::string big = "1";
  while (big.size() <= libsvm_max_line)
    big += " 1:1";
  write_file(dir.file("long.txt"), "0 1:1\n" + big + "\n");
  CHECK_THROWS_WITH(load_libsvm(dir.file("long.txt"), 10),
                    Catch::Contains("long.txt:2: line is longer than "
                                    "1048576 bytes"));
  // ... also as the last line without a newline, and with no newline at all
  // in the buffer.
  std::string huge(3 * libsvm_max_line, '1');
  write_file(dir.file("huge.txt"), huge);
  CHECK_THROWS_WITH(load_libsvm(dir.file("huge.txt"), 10),
                    Catch::Contains("huge.txt:1: line is longer"));
  // A line just under the limit is fine (a last line without "\n" too).
  std::string ok = "1 1:1" + std::string(libsvm_max_line - 8, ' ') + "2:1";
  REQUIRE(ok.size() == libsvm_max_line);
  write_file(dir.file("ok.txt"), ok);
  auto ds = load_libsvm(dir.file("ok.txt"), 10);
  CHECK(ds.rows() == 1);
  CHECK(keys_of(ds, 0) == std::vector<uint64_t>{0, 1});
}

TEST_CASE("a missing or corrupt LIBSVM file is an input error naming it",
          "[core][libsvm]") {
  test::temp_dir dir{"libsvm"};
  CHECK_THROWS_WITH(load_libsvm(dir.file("nope.gz"), 10),
                    Catch::StartsWith(dir.file("nope.gz") + ": cannot open"));
  std::string text;
  for (int i = 0; i < 20000; ++i)
    text += "1 1:1 2:1 3:1\n";
  write_gz(dir.file("cut.gz"), text);
  // Keep the gzip header and half the stream.
  std::ifstream in{dir.file("cut.gz"), std::ios::binary};
  std::string bytes{std::istreambuf_iterator<char>{in}, {}};
  write_file(dir.file("cut.gz"), bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(load_libsvm(dir.file("cut.gz"), 10),
                    Catch::StartsWith(dir.file("cut.gz") + ": truncated"));
  CHECK_THROWS_WITH(load_libsvm(dir.file("cut.gz"), 0),
                    Catch::Contains("num_features must be at least 1"));
}

TEST_CASE("a LIBSVM part drops its bad lines, each named by file and line, "
          "or fails on the first",
          "[core][libsvm][stream]") {
  test::temp_dir dir{"libsvm_part"};
  auto path = dir.file("part.txt");
  write_file(path, "+1 1:0.5 3:1\n"
                   "2 1:1\n"       // line 2: label
                   "-1 2:1 2:3\n"  // line 3: not ascending
                   "0 4:2\n");
  std::vector<std::string> logged;
  bad_record_sink skip{on_bad_record::skip,
                       [&](const std::string& l) { logged.push_back(l); }};
  auto ds = read_libsvm_part(path, libsvm_schema(4), true, skip);
  CHECK(ds.rows() == 2);
  CHECK(keys_of(ds, 0) == std::vector<uint64_t>{0, 2});
  CHECK(keys_of(ds, 1) == std::vector<uint64_t>{3});
  CHECK(values_of(ds, 1) == std::vector<float>{2});
  CHECK(ds.examples.labels == std::vector<int32_t>{1, 0});
  CHECK_NOTHROW(ds.examples.check("part"));
  CHECK(skip.count() == 2);
  CHECK(logged == std::vector<std::string>{
                    path + ":2: label \"2\" is not one of +1, 1, -1, 0 "
                           "(record skipped)",
                    path + ":3: index 2 after 2: indices must be strictly "
                           "ascending (record skipped)"});
  bad_record_sink fail{on_bad_record::fail};
  CHECK_THROWS_WITH(read_libsvm_part(path, libsvm_schema(4), true, fail),
                    path + ":2: label \"2\" is not one of +1, 1, -1, 0");
}
