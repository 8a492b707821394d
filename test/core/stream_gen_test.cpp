#include "core/stream_gen.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "core/ctr_csv.hpp"
#include "core/error.hpp"
#include "core/stream_dir.hpp"
#include "test/core/stream_helpers.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

/// A small generator: 2 dense features, 3 fields, a steep Zipf law, so
/// that the hottest ids of a part stand out in a few thousand rows.
stream_gen_config small_gen(const temp_dir& dir) {
  stream_gen_config cfg;
  cfg.out = dir.path().string();
  cfg.parts = 4;
  cfg.rows_per_part = 3000;
  cfg.ctr.dense_features = 2;
  cfg.ctr.cardinalities = {1000, 1000, 100};
  cfg.ctr.zipf = 2.0;
  cfg.ctr.seed = 3;
  return cfg;
}

/// The `k` most frequent keys of field `f` in `ds`.
std::set<uint64_t> top_keys(const dataset& ds, size_t f, size_t k) {
  std::map<uint64_t, uint64_t> count;
  for (auto key : ds.examples.fields[f].keys)
    ++count[key];
  std::vector<std::pair<uint64_t, uint64_t>> by_count(count.begin(),
                                                      count.end());
  std::sort(by_count.begin(), by_count.end(),
            [](auto& a, auto& b) { return a.second > b.second; });
  std::set<uint64_t> top;
  for (size_t i = 0; i < k && i < by_count.size(); ++i)
    top.insert(by_count[i].first);
  return top;
}

/// Every part of the stream in `dir`, read back with the stream reader.
std::vector<stream_part> read_back(const stream_gen_config& gen) {
  stream_config cfg;
  cfg.dir = gen.out;
  cfg.dense_features = gen.ctr.dense_features;
  cfg.fields = gen.ctr.cardinalities.size();
  cfg.poll_interval = std::chrono::milliseconds{1};
  cfg.bad_records = on_bad_record::fail;
  kept_log log;
  stream_dir src{cfg, log.env()};
  std::vector<stream_part> parts;
  while (auto p = src.next_part(std::chrono::milliseconds{0}))
    parts.push_back(std::move(*p));
  CHECK(log.all().empty());
  return parts;
}

} // namespace

TEST_CASE("stream-gen writes complete parts that the stream reader parses",
          "[core][stream]") {
  temp_dir dir{"stream_gen"};
  auto cfg = small_gen(dir);
  std::vector<uint64_t> seen_parts;
  auto sum = generate_stream(cfg, [&](const stream_gen_summary& s) {
    seen_parts.push_back(s.parts);
  });
  CHECK(seen_parts == std::vector<uint64_t>{1, 2, 3, 4});
  CHECK(sum.parts == 4);
  CHECK(sum.rows == 12000);
  CHECK(sum.lookups == 36000);
  auto parts = read_back(cfg);
  REQUIRE(parts.size() == 4);
  for (size_t p = 0; p < parts.size(); ++p) {
    CHECK(parts[p].name == stream_part_name(p));
    CHECK(parts[p].data->rows() == 3000);
    CHECK_NOTHROW(parts[p].data->examples.check("part"));
  }
  CHECK(stream_part_name(42) == "part-00000042.csv");
  // No temporary file is left; every part has its marker.
  for (auto& e : std::filesystem::directory_iterator{dir.path()})
    CHECK(e.path().filename().string().front() != '.');
  // The same config writes the same bytes.
  temp_dir other{"stream_gen_again"};
  auto again = cfg;
  again.out = other.path().string();
  generate_stream(again);
  CHECK(read_text_file(dir.file(stream_part_name(2)), "part")
        == read_text_file(other.file(stream_part_name(2)), "part"));
  // A folder holds one stream.
  CHECK_THROWS_WITH(generate_stream(cfg), Catch::Contains("exists already"));
}

TEST_CASE("stream-gen's hot ids move by the drift and new ids arrive at "
          "the new-id rate",
          "[core][stream]") {
  temp_dir dir{"stream_gen_drift"};
  auto cfg = small_gen(dir);
  cfg.drift = 1.0; // part p's head is shifted by p ids
  cfg.new_id_rate = 0.1;
  auto sum = generate_stream(cfg);
  auto parts = read_back(cfg);
  REQUIRE(parts.size() == 4);
  for (size_t f = 0; f < 3; ++f) {
    // The 4 hottest ids of part p are p .. p + 3 (shift floor(1.0 p)): part
    // p shares 4 - p of them with part 0.
    auto first = top_keys(*parts[0].data, f, 4);
    CHECK(first == std::set<uint64_t>{0, 1, 2, 3});
    for (uint64_t p = 1; p < 4; ++p) {
      INFO("field " << f << ", part " << p);
      auto top = top_keys(*parts[p].data, f, 4);
      CHECK(top == std::set<uint64_t>{p, p + 1, p + 2, p + 3});
      std::vector<uint64_t> shared;
      std::set_intersection(first.begin(), first.end(), top.begin(),
                            top.end(), std::back_inserter(shared));
      CHECK(shared.size() == 4 - p);
    }
  }
  // New ids: about 10% of the lookups, each seen once.
  uint64_t fresh = 0, lookups = 0;
  std::map<std::pair<size_t, uint64_t>, uint64_t> count;
  for (auto& part : parts)
    for (size_t f = 0; f < 3; ++f)
      for (auto key : part.data->examples.fields[f].keys) {
        ++lookups;
        fresh += key >= synthetic_ctr::new_key_base ? 1 : 0;
        ++count[{f, key}];
      }
  CHECK(lookups == sum.lookups);
  CHECK(fresh == sum.new_id_lookups);
  CHECK(static_cast<double>(fresh) / static_cast<double>(lookups)
        == Approx(0.1).margin(0.01));
  // The summary's counts are those of the parts.
  uint64_t once = 0;
  for (auto& kv : count)
    once += kv.second == 1 ? 1 : 0;
  CHECK(sum.distinct_ids == count.size());
  CHECK(sum.ids_seen_once == once);
  CHECK(sum.share_seen_once() > 0.5); // the new ids, mostly
  CHECK_THAT(to_string(sum, "D"),
             Catch::StartsWith("4 parts, 12000 rows in D; ")
               && Catch::Contains("% of them seen once; ")
               && Catch::EndsWith("% of lookups new ids"));
}

TEST_CASE("a key means the same in every part: stream labels follow one "
          "hidden model",
          "[core][stream]") {
  // The true logit of an example is the bias, the dense part and the sum
  // of its keys' weights; with one field and no dense features, two
  // examples with the same key have the same logit in any part.
  synthetic_ctr_config c;
  c.dense_features = 0;
  c.cardinalities = {50};
  c.zipf = 1.0;
  synthetic_ctr gen{c};
  std::map<uint64_t, double> logit_of;
  example_batch ex;
  ex.reset(0, 1);
  for (uint64_t part = 0; part < 5; ++part)
    for (uint64_t row = 0; row < 200; ++row) {
      auto t = gen.append_stream(ex, part, row, key_drift{part * 7, 0.0});
      auto key = ex.fields[0].keys.back();
      auto [it, fresh] = logit_of.emplace(key, t);
      if (!fresh)
        CHECK(it->second == t);
    }
  CHECK(logit_of.size() > 50); // the drift brought keys beyond 0..49
}

TEST_CASE("stream-gen refuses a bad config naming the flag",
          "[core][stream]") {
  temp_dir dir{"stream_gen_bad"};
  auto cfg = small_gen(dir);
  cfg.new_id_rate = 1.5;
  CHECK_THROWS_WITH(validate(cfg), Catch::StartsWith("--new-id-rate: 1.5"));
  cfg = small_gen(dir);
  cfg.drift = -1;
  CHECK_THROWS_WITH(validate(cfg), Catch::StartsWith("--drift: -1"));
  cfg = small_gen(dir);
  cfg.parts = 0;
  CHECK_THROWS_WITH(validate(cfg), Catch::StartsWith("--parts: 0"));
  cfg = small_gen(dir);
  cfg.out.clear();
  CHECK_THROWS_WITH(validate(cfg), Catch::StartsWith("--out: "));
}
