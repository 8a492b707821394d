#include "core/stream_dir.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include <catch2/catch.hpp>

#include "core/ctr_csv.hpp"
#include "core/error.hpp"
#include "core/part_format.hpp"
#include "test/core/stream_helpers.hpp"

using namespace actorps;
using namespace actorps::test;
using strings = std::vector<std::string>;

TEST_CASE("a stream folder hands out complete parts in name order, each "
          "once its marker is there",
          "[core][stream]") {
  temp_dir dir{"stream_order"};
  put_part(dir, "p2.csv", rows_text(3, 2));
  put_part(dir, "p1.csv", rows_text(0, 3));
  put_part(dir, "p3.csv", rows_text(5, 1), false); // no marker yet
  write_text(dir.file("_SUCCESS"), "");            // bookkeeping, not a part
  kept_log log;
  stream_dir src{small_stream(dir), log.env()};
  auto first = src.next_part(0ms);
  REQUIRE(first);
  CHECK(first->index == 0);
  CHECK(first->name == "p1.csv");
  CHECK(row_ids(*first->data) == std::vector<uint64_t>{0, 1, 2});
  CHECK(first->data->examples.dense == std::vector<float>{0, 1, 2});
  CHECK(first->data->examples.labels == std::vector<int32_t>{0, 1, 0});
  auto second = src.next_part(0ms);
  REQUIRE(second);
  CHECK(second->index == 1);
  CHECK(second->name == "p2.csv");
  // p3 is there but not complete: nothing more, the stream goes on.
  CHECK_FALSE(src.next_part(5ms));
  CHECK(src.ended() == stream_end::none);
  // Its marker comes late: then it is read.
  write_text(dir.file("p3.csv.done"), "");
  auto third = src.next_part(0ms);
  REQUIRE(third);
  CHECK(third->index == 2);
  CHECK(row_ids(*third->data) == std::vector<uint64_t>{5});
  CHECK(src.stats().parts == 3);
  CHECK(src.stats().rows == 6);
  CHECK(log.all().empty());
}

TEST_CASE("a reader waits for the parts a producer thread writes",
          "[core][stream]") {
  temp_dir dir{"stream_producer"};
  std::thread producer{[&] {
    for (int p = 0; p < 5; ++p) {
      std::this_thread::sleep_for(3ms);
      put_part(dir, fmt::format("part-{:02}.csv", p), rows_text(p * 2, 2));
    }
  }};
  stream_dir src{small_stream(dir), {}};
  std::vector<uint64_t> ids;
  for (int p = 0; p < 5; ++p) {
    auto part = src.next_part(10s);
    REQUIRE(part);
    CHECK(part->index == static_cast<uint64_t>(p));
    for (auto id : row_ids(*part->data))
      ids.push_back(id);
  }
  producer.join();
  CHECK(ids == std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("a stream ends after end_after parts, after an idle timeout, or on "
          "a stop request",
          "[core][stream]") {
  temp_dir dir{"stream_end"};
  for (int p = 0; p < 3; ++p)
    put_part(dir, fmt::format("p{}.csv", p), rows_text(p, 1));
  kept_log log;
  SECTION("end_after") {
    auto cfg = small_stream(dir);
    cfg.end_after = 2;
    stream_dir src{cfg, log.env()};
    CHECK(drain(src) == strings{"p0.csv", "p1.csv"});
    CHECK(src.ended() == stream_end::end_after);
    CHECK_FALSE(src.next_part(1s)); // at once, for good
    // end_after counts indices over a restart: resumed at 1, one more.
    stream_dir again{cfg, log.env()};
    again.seek(1);
    CHECK(drain(again) == strings{"p1.csv"});
    CHECK(again.ended() == stream_end::end_after);
  }
  SECTION("idle timeout") {
    auto cfg = small_stream(dir);
    cfg.idle_timeout = 30ms;
    stream_dir src{cfg, log.env()};
    CHECK(drain(src).size() == 3);
    auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(src.next_part(10s));
    CHECK(src.ended() == stream_end::idle);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  SECTION("stop request") {
    std::atomic<bool> stop{false};
    auto env = log.env();
    env.stop_requested = [&] { return stop.load(); };
    stream_dir src{small_stream(dir), env};
    CHECK(drain(src).size() == 3);
    std::thread stopper{[&] {
      std::this_thread::sleep_for(10ms);
      stop = true;
    }};
    CHECK_FALSE(src.next_part(10s));
    stopper.join();
    CHECK(src.ended() == stream_end::stopped);
    CHECK(log.count("the stream ended (stopped) after 3 parts, 3 rows") == 1);
  }
}

TEST_CASE("a source resumed with seek reads nothing twice and skips nothing",
          "[core][stream]") {
  temp_dir dir{"stream_resume"};
  for (int p = 0; p < 4; ++p)
    put_part(dir, fmt::format("p{}.csv", p), rows_text(p, 1));
  stream_dir before{small_stream(dir), {}};
  REQUIRE(before.next_part(0ms)->name == "p0.csv");
  auto last = before.next_part(0ms);
  REQUIRE(last->name == "p1.csv");
  SECTION("by index") {
    stream_dir after{small_stream(dir), {}};
    after.seek(last->index + 1);
    auto next = after.next_part(0ms);
    REQUIRE(next);
    CHECK(next->index == 2);
    CHECK(next->name == "p2.csv");
    CHECK(drain(after) == strings{"p3.csv"});
  }
  SECTION("by name, after the parts before it were deleted") {
    for (auto* name : {"p0.csv", "p0.csv.done", "p1.csv", "p1.csv.done"})
      std::filesystem::remove(dir.file(name));
    stream_dir after{small_stream(dir), {}};
    after.seek(2, "p2.csv");
    auto next = after.next_part(0ms);
    REQUIRE(next);
    CHECK(next->index == 2);
    CHECK(next->name == "p2.csv");
    CHECK(drain(after) == strings{"p3.csv"});
    // By index alone the place is lost, and said so.
    stream_dir lost{small_stream(dir), {}};
    CHECK_THROWS_WITH(lost.seek(3),
                      Catch::Contains("cannot resume at part 3")
                        && Catch::Contains("holds only 2 complete parts"));
  }
}

TEST_CASE("a part that completes after a later-named part was read is "
          "reported as late and skipped",
          "[core][stream]") {
  temp_dir dir{"stream_late"};
  put_part(dir, "p1.csv", rows_text(0, 1));
  put_part(dir, "p3.csv", rows_text(1, 1));
  kept_log log;
  stream_dir src{small_stream(dir), log.env()};
  CHECK(drain(src) == strings{"p1.csv", "p3.csv"});
  put_part(dir, "p2.csv", rows_text(2, 1));
  put_part(dir, "p4.csv", rows_text(3, 1));
  auto next = src.next_part(0ms);
  REQUIRE(next);
  CHECK(next->name == "p4.csv");
  CHECK(next->index == 2); // a late part uses no index
  CHECK_FALSE(src.next_part(5ms));
  CHECK(src.stats().late_parts == 1);
  CHECK(log.count("p2.csv: late part") == 1); // once, however many polls
}

TEST_CASE("a marker without its part is reported once and does not hold "
          "the stream up",
          "[core][stream]") {
  temp_dir dir{"stream_lone_marker"};
  write_text(dir.file("p0.csv.done"), "");
  put_part(dir, "p1.csv", rows_text(0, 2));
  kept_log log;
  stream_dir src{small_stream(dir), log.env()};
  CHECK(drain(src) == strings{"p1.csv"});
  CHECK_FALSE(src.next_part(10ms));
  CHECK(src.stats().markers_without_part == 1);
  CHECK(log.count("p0.csv.done: a completion marker without its part") == 1);
}

TEST_CASE("bad records of a part are skipped, counted and named by file and "
          "line, or fail the read under on_bad_record fail",
          "[core][stream]") {
  temp_dir dir{"stream_bad"};
  put_part(dir, "p0.csv",
           "label,I1,C1\n"
           "1,0.5,7\n"
           "2,0.5,8\n"       // line 3: label
           "0,x,9\n"         // line 4: dense
           "0,1.5\n"         // line 5: columns
           "1,\"2\"x,10\n"   // line 6: quoting
           "0,2.5,11|12\n"); // multi-hot
  put_part(dir, "p1.csv", rows_text(20, 1));
  auto path = dir.file("p0.csv");
  SECTION("skip") {
    kept_log log;
    stream_dir src{small_stream(dir), log.env()};
    auto part = src.next_part(0ms);
    REQUIRE(part);
    CHECK(row_ids(*part->data) == std::vector<uint64_t>{7, 11, 12});
    CHECK(part->data->examples.fields[0].offsets
          == std::vector<uint64_t>{0, 1, 3});
    CHECK(src.stats().bad_records == 4);
    CHECK(log.count(path + ":3: label \"2\" is neither 0 nor 1") == 1);
    CHECK(log.count(path + ":4: I1 \"x\" is not a finite number") == 1);
    CHECK(log.count(path + ":5: expected 3 columns as in the header, got 2")
          == 1);
    CHECK(log.count(path + ":6: malformed CSV") == 1);
    CHECK(drain(src) == strings{"p1.csv"});
  }
  SECTION("fail") {
    auto cfg = small_stream(dir);
    cfg.bad_records = on_bad_record::fail;
    stream_dir src{cfg, {}};
    CHECK_THROWS_AS(src.next_part(0ms), input_error);
    // The part's index is used up: the next call reads the next part.
    auto next = src.next_part(0ms);
    REQUIRE(next);
    CHECK(next->name == "p1.csv");
    CHECK(next->index == 1);
    stream_dir again{cfg, {}};
    CHECK_THROWS_WITH(again.next_part(0ms),
                      path + ":3: label \"2\" is neither 0 nor 1");
  }
}

TEST_CASE("empty, headless and truncated parts are counted and skipped",
          "[core][stream]") {
  temp_dir dir{"stream_empty"};
  put_part(dir, "p0.csv", "");
  put_part(dir, "p1.csv", "label,I1,C1\n");
  put_part(dir, "p2.csv", "label,I9,C1\n0,1,2\n");     // not the schema
  put_part(dir, "p3.csv", "label,I1,C1\n0,1,2\n1,\"3"); // cut off
  put_part(dir, "p4.csv", rows_text(0, 1));
  kept_log log;
  stream_dir src{small_stream(dir), log.env()};
  auto part = src.next_part(0ms);
  REQUIRE(part);
  CHECK(part->name == "p3.csv");
  CHECK(part->index == 3); // p0..p2 used up their indices
  CHECK(row_ids(*part->data) == std::vector<uint64_t>{2});
  CHECK(drain(src) == strings{"p4.csv"});
  CHECK(src.stats().empty_parts == 2);
  CHECK(src.stats().bad_parts == 1);
  CHECK(src.stats().bad_records == 1);
  CHECK(log.count(dir.file("p0.csv") + ": empty part") == 1);
  CHECK(log.count(dir.file("p2.csv") + ":1: the header has \"I9\" as "
                                       "column 2, expected \"I1\"")
        == 1);
  CHECK(log.count(dir.file("p3.csv") + ":3: malformed CSV at the end of "
                                       "the file")
        == 1);
}

TEST_CASE("a part that vanishes before it is read is counted and skipped",
          "[core][stream]") {
  // A format that deletes the part first: the producer's clean-up racing
  // the reader, made certain.
  part_format vanishing = find_part_format("ctr_csv");
  auto read = vanishing.read;
  vanishing.read = [read](const std::string& path, const stream_config& cfg,
                          const data_schema& schema, bad_record_sink& bad) {
    if (path.find("gone") != std::string::npos)
      std::filesystem::remove(path);
    return read(path, cfg, schema, bad);
  };
  register_part_format("test_vanishing", vanishing);
  temp_dir dir{"stream_vanish"};
  put_part(dir, "a_gone.csv", rows_text(0, 1));
  put_part(dir, "b.csv", rows_text(1, 1));
  auto cfg = small_stream(dir);
  cfg.format = "test_vanishing";
  cfg.bad_records = on_bad_record::fail; // vanishing is not a bad record
  kept_log log;
  stream_dir src{cfg, log.env()};
  auto part = src.next_part(0ms);
  REQUIRE(part);
  CHECK(part->name == "b.csv");
  CHECK(part->index == 1);
  CHECK(src.stats().vanished_parts == 1);
  CHECK(log.count(dir.file("a_gone.csv") + ": the part vanished") == 1);
  CHECK(unregister_part_format("test_vanishing"));
}

TEST_CASE("a stream of LIBSVM parts reads them with the LIBSVM reader",
          "[core][stream]") {
  temp_dir dir{"stream_libsvm"};
  put_part(dir, "p0.svm", "+1 1:0.5 3:1\n-1 2:1\n1 9:1\n0 4:2\n");
  auto cfg = small_stream(dir);
  cfg.format = "libsvm";
  cfg.num_features = 4;
  kept_log log;
  stream_dir src{cfg, log.env()};
  auto part = src.next_part(0ms);
  REQUIRE(part);
  CHECK(part->data->rows() == 3);
  CHECK(part->data->examples.labels == std::vector<int32_t>{1, 0, 0});
  CHECK(src.schema().fields.at(0).vocabulary == 4);
  CHECK(src.stats().bad_records == 1);
  CHECK(log.count(dir.file("p0.svm") + ":3: index 9 is above the last "
                                       "feature 4")
        == 1);
}

TEST_CASE("a stream config is checked field by field", "[core][stream]") {
  temp_dir dir{"stream_config"};
  auto good = small_stream(dir);
  CHECK_NOTHROW(validate(good));
  struct bad_case {
    std::function<void(stream_config&)> change;
    std::string message;
  };
  const std::vector<bad_case> cases{
    {[](stream_config& c) { c.source = "kafka"; },
     "data.stream_source: unknown source \"kafka\" (known: dir)"},
    {[](stream_config& c) { c.dir.clear(); }, "data.stream_dir: "},
    {[](stream_config& c) { c.format = "parquet"; },
     "data.stream_format: unknown format \"parquet\""},
    {[](stream_config& c) { c.fields = 0; }, "data.stream_fields: 0 is out"},
    {[](stream_config& c) { c.poll_interval = 0ms; },
     "data.stream_poll_ms: 0 is out of range"},
    {[](stream_config& c) { c.idle_timeout = 1ms; c.poll_interval = 5ms; },
     "data.stream_idle_timeout_ms: 1 must be 0"},
    {[](stream_config& c) { c.format = "libsvm"; },
     "data.stream_num_features: required"},
  };
  for (auto& c : cases) {
    auto cfg = good;
    c.change(cfg);
    INFO(c.message);
    CHECK_THROWS_AS(validate(cfg), input_error);
    CHECK_THROWS_WITH(validate(cfg), Catch::StartsWith(c.message));
  }
  auto missing = good;
  missing.dir = dir.file("nowhere");
  CHECK_THROWS_WITH(open_stream(missing),
                    Catch::Contains("nowhere is not a folder"));
  CHECK(open_stream(good)->describe() == "parts of ctr_csv in " + good.dir);
  CHECK(parse_on_bad_record("fail", "x") == on_bad_record::fail);
  CHECK_THROWS_WITH(parse_on_bad_record("drop", "data.on_bad_record"),
                    "data.on_bad_record: expected fail or skip, got "
                    "\"drop\"");
}
