#include "core/movielens.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

namespace {

const std::string header
  = "\"movieId\",\"title\",\"year\",\"genres\",\"userId\",\"rating\","
    "\"timestamp\"\n";

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
}

/// Keys of row r of field f.
std::vector<uint64_t> keys_of(const dataset& ds, size_t f, uint64_t r) {
  const auto& fld = ds.examples.fields[f];
  return {fld.keys.begin() + fld.offsets[r],
          fld.keys.begin() + fld.offsets[r + 1]};
}

/// (user, movie) of every row.
std::vector<std::pair<uint64_t, uint64_t>> user_movie(const dataset& ds) {
  std::vector<std::pair<uint64_t, uint64_t>> result;
  for (uint64_t r = 0; r < ds.rows(); ++r)
    result.emplace_back(keys_of(ds, 0, r).at(0), keys_of(ds, 1, r).at(0));
  return result;
}

using pairs = std::vector<std::pair<uint64_t, uint64_t>>;

} // namespace

TEST_CASE("the last fifth of each user's ratings by time are test rows, "
          "ties broken by movie id",
          "[core][movielens]") {
  test::temp_dir dir{"movielens"};
  // User 1: 5 ratings -> 1 test row; two at the last timestamp 30, so the
  // larger movie id (7) is the later one. User 2: 8 ratings -> 2 test rows,
  // interleaved in the file with user 1's. User 3: 1 rating -> it is a test
  // row (at least 1). User 4: 3 ratings -> round(0.6) = 1 test row.
  write_file(dir.file("movielens.csv"),
             header
               + "5,\"A\",1990,\"Drama\",1,4,10\n"
                 "7,\"B\",1990,\"Drama\",1,4,30\n"
                 "3,\"C\",1990,\"Drama\",1,4,30\n"
                 "11,\"x\",1990,\"Drama\",2,1,108\n"
                 "12,\"x\",1990,\"Drama\",2,1,101\n"
                 "2,\"D\",1990,\"Drama\",1,4,20\n"
                 "13,\"x\",1990,\"Drama\",2,1,107\n"
                 "14,\"x\",1990,\"Drama\",2,1,102\n"
                 "15,\"x\",1990,\"Drama\",2,1,106\n"
                 "16,\"x\",1990,\"Drama\",2,1,103\n"
                 "1,\"E\",1990,\"Drama\",1,4,20\n"
                 "17,\"x\",1990,\"Drama\",2,1,105\n"
                 "18,\"x\",1990,\"Drama\",2,1,104\n"
                 "9,\"y\",1990,\"Drama\",3,5,1\n"
                 "20,\"z\",1990,\"Drama\",4,2,3\n"
                 "21,\"z\",1990,\"Drama\",4,2,1\n"
                 "22,\"z\",1990,\"Drama\",4,2,2\n");
  auto data = load_movielens(dir.path().string());
  CHECK_NOTHROW(data.train.examples.check("train"));
  CHECK_NOTHROW(data.test.examples.check("test"));
  // Both splits keep the file's order.
  CHECK(user_movie(data.test) == pairs{{1, 7}, {2, 11}, {2, 13}, {3, 9}, {4, 20}});
  CHECK(user_movie(data.train)
        == pairs{{1, 5}, {1, 3}, {2, 12}, {1, 2}, {2, 14}, {2, 15}, {2, 16},
                 {1, 1}, {2, 17}, {2, 18}, {4, 21}, {4, 22}});
  // One schema for both, over the whole file.
  CHECK(data.train.schema.fields[0].vocabulary == 5);  // users up to 4
  CHECK(data.train.schema.fields[1].vocabulary == 23); // movies up to 22
  CHECK(data.test.schema.fields[1].vocabulary == 23);
}

TEST_CASE("movielens examples have user, movie, multi-hot genres and year "
          "fields and a liked label",
          "[core][movielens]") {
  test::temp_dir dir{"movielens"};
  write_file(dir.file("movielens.csv"),
             header
               + "10,\"Up, Up, and \"\"Away\"\"\",2001,\"Drama|Action\",1,4,1\n"
                 "11,NA,NA,\"(no genres listed)\",1,3.5,2\n"
                 "12,\"Plain\",1942,\"Comedy\",1,0.5,3\n"
                 "13,\"Plain\",2003,\"Action|Comedy|Drama\",1,5,4\n"
                 "14,\"Plain\",1999,\"Comedy\",1,4.5,5\n");
  auto data = load_movielens(dir.path().string());
  const auto& schema = data.train.schema;
  CHECK(schema.dense_dim == 0);
  CHECK(schema.labels == label_kind::binary);
  CHECK(schema.classes == 2);
  REQUIRE(schema.fields.size() == 4);
  CHECK(schema.fields[0].name == "user");
  CHECK(schema.fields[1].name == "movie");
  CHECK(schema.fields[2].name == "genres");
  CHECK(schema.fields[3].name == "year");
  for (auto& f : schema.fields)
    CHECK_FALSE(f.weighted);
  // Genre names in sorted order: (no genres listed)=0 Action=1 Comedy=2
  // Drama=3.
  CHECK(schema.fields[2].vocabulary == 4);
  CHECK(schema.fields[3].vocabulary == 2004);
  const auto& train = data.train;
  REQUIRE(train.rows() == 4); // the 5th (latest) is the test row
  CHECK(keys_of(train, 2, 0) == std::vector<uint64_t>{1, 3});
  CHECK(keys_of(train, 2, 1) == std::vector<uint64_t>{0});
  CHECK(keys_of(train, 2, 2) == std::vector<uint64_t>{2});
  CHECK(keys_of(train, 2, 3) == std::vector<uint64_t>{1, 2, 3});
  CHECK(keys_of(train, 3, 0) == std::vector<uint64_t>{2001});
  CHECK(keys_of(train, 3, 1) == std::vector<uint64_t>{0}); // NA
  CHECK(keys_of(train, 3, 2) == std::vector<uint64_t>{1942});
  CHECK(train.examples.labels == std::vector<int32_t>{1, 0, 0, 1});
  CHECK(data.test.examples.labels == std::vector<int32_t>{1});
}

TEST_CASE("columns may come in any order and extra ones are ignored",
          "[core][movielens]") {
  test::temp_dir dir{"movielens"};
  write_file(dir.file("movielens.csv"),
             "userId,extra,rating,timestamp,movieId,genres,year,title\n"
             "3,\"a,b\",4,1,8,Drama,2000,T\n");
  auto data = load_movielens(dir.path().string());
  REQUIRE(data.test.rows() == 1);
  CHECK(user_movie(data.test) == pairs{{3, 8}});
  CHECK(data.test.examples.labels == std::vector<int32_t>{1});
}

TEST_CASE("a missing movielens.csv names the export command",
          "[core][movielens]") {
  test::temp_dir dir{"movielens"};
  auto expected = dir.path().string()
                  + "/movielens.csv not found: export it once with "
                    "scripts/export_movielens.sh (needs Debian's "
                    "r-cran-dslabs: scripts/setup.sh installs it)";
  CHECK_THROWS_AS(load_movielens(dir.path().string()), input_error);
  CHECK_THROWS_WITH(load_movielens(dir.path().string()), expected);
}

TEST_CASE("malformed movielens rows are input errors naming file and line",
          "[core][movielens]") {
  struct bad_case {
    std::string row;
    std::string message;
  };
  const std::vector<bad_case> cases{
    {"1,\"T\",2000,\"Drama\",1,4", "expected 7 columns as in the header, got 6"},
    {"1,\"T\",2000,\"Drama\",1,4,5,6", "expected 7 columns as in the header, got 8"},
    {"1,\"T\",2000,\"Drama\",u1,4,5", "userId \"u1\" is not a whole number"},
    {"1,\"T\",2000,\"Drama\",-1,4,5", "userId \"-1\" is not a whole number"},
    {"m,\"T\",2000,\"Drama\",1,4,5", "movieId \"m\" is not a whole number"},
    {"1,\"T\",2000,\"Drama\",1,good,5", "rating \"good\" is not a number"},
    {"1,\"T\",2000,\"Drama\",1,4,soon", "timestamp \"soon\" is not an integer"},
    {"1,\"T\",2000,\"Drama\",1,4,1.5", "timestamp \"1.5\" is not an integer"},
    {"1,\"T\",20x0,\"Drama\",1,4,5", "year \"20x0\" is neither"},
    {"1,\"T\"x,2000,\"Drama\",1,4,5", "malformed CSV"},
  };
  test::temp_dir dir{"movielens"};
  auto path = dir.file("movielens.csv");
  for (auto& c : cases) {
    INFO(c.row);
    write_file(path, header + "1,\"ok, fine\",2000,\"Drama\",1,4,5\n\n"
                       + c.row + "\n2,\"T\",2000,\"Drama\",1,4,5\n");
    CHECK_THROWS_AS(read_movielens_csv(path), input_error);
    CHECK_THROWS_WITH(read_movielens_csv(path),
                      Catch::StartsWith(path + ":4: ")
                        && Catch::Contains(c.message));
  }
  write_file(path, "movieId,title,genres,userId,rating,timestamp\n");
  CHECK_THROWS_WITH(read_movielens_csv(path),
                    Catch::StartsWith(path + ":1: the header has no column "
                                             "year"));
  write_file(path, header);
  CHECK_THROWS_WITH(read_movielens_csv(path), path + ": no ratings");
  write_file(path, header + "1,\"never closed,2000,\"Drama\",1,4,5\n");
  CHECK_THROWS_WITH(read_movielens_csv(path),
                    Catch::StartsWith(path + ":") && Catch::Contains("malformed"));
}

TEST_CASE("the exported dslabs ratings split into 80,001 training and "
          "20,003 test rows",
          "[core][movielens]") {
  // Only where scripts/export_movielens.sh has been run (the CSV is not
  // shipped); the numbers were checked against the same rule in R.
  const std::string dir = ACTORPS_SOURCE_DIR "/data/movielens";
  if (!std::filesystem::exists(dir + "/movielens.csv")) {
    WARN("skipped: " << dir << "/movielens.csv not exported");
    return;
  }
  auto data = load_movielens(dir);
  CHECK(data.train.rows() + data.test.rows() == 100004);
  CHECK(data.train.rows() == 80001);
  CHECK(data.test.rows() == 20003);
  std::set<uint64_t> users;
  for (auto k : data.train.examples.fields[0].keys)
    users.insert(k);
  CHECK(users.size() == 671);
  users.clear();
  for (auto k : data.test.examples.fields[0].keys)
    users.insert(k);
  CHECK(users.size() == 671);
  const auto& f = data.train.schema.fields;
  CHECK(f[0].vocabulary == 672);
  CHECK(f[1].vocabulary == 163950);
  CHECK(f[2].vocabulary == 20);
  CHECK(f[3].vocabulary == 2017);
  int64_t liked = 0;
  for (auto y : data.train.examples.labels)
    liked += y;
  CHECK(liked == 42152);
  liked = 0;
  for (auto y : data.test.examples.labels)
    liked += y;
  CHECK(liked == 9416);
}
