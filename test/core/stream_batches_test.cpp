#include "core/stream_batches.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <thread>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "test/core/stream_helpers.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

/// Parts of uneven sizes (a part smaller than the workers, one of a single
/// row); part p's rows are numbered on from the previous parts'.
const std::vector<uint64_t> part_sizes{5, 1, 7, 3, 2, 8};

uint64_t total_rows() {
  uint64_t n = 0;
  for (auto s : part_sizes)
    n += s;
  return n;
}

void put_parts(const temp_dir& dir) {
  uint64_t first = 0;
  for (size_t p = 0; p < part_sizes.size(); ++p) {
    put_part(dir, fmt::format("p{:02}.csv", p),
             rows_text(first, part_sizes[p]));
    first += part_sizes[p];
  }
}

/// The first row number of part p.
uint64_t first_of(uint64_t p) {
  uint64_t first = 0;
  for (uint64_t q = 0; q < p; ++q)
    first += part_sizes[q];
  return first;
}

struct batch_record {
  std::vector<uint64_t> ids;
  data_position after;
};

/// Every batch of worker `w` of `workers` until the stream ends (end_after
/// = the parts written), at most `limit` batches, starting at `from` if set.
std::vector<batch_record>
read_batches(const temp_dir& dir, uint32_t w, uint32_t workers,
             uint64_t batch, std::optional<uint64_t> seed,
             std::optional<std::pair<data_position, std::string>> from = {},
             size_t limit = 1000, std::string* name = nullptr) {
  auto cfg = small_stream(dir);
  cfg.end_after = part_sizes.size();
  kept_log log; // the end of each stream, not for the test's output
  std::shared_ptr<stream_source> src = open_stream(cfg, log.env());
  stream_batches batches{src, input_context{workers, w}, batch, seed};
  if (from)
    batches.seek(from->first, from->second);
  std::vector<batch_record> out;
  example_batch b;
  while (out.size() < limit && batches.try_next(b, 1s)) {
    REQUIRE(b.rows >= 1);
    REQUIRE(b.rows <= batch);
    out.push_back({b.fields[0].keys, batches.position()});
  }
  if (out.size() < limit)
    CHECK(batches.ended());
  if (name != nullptr)
    *name = batches.part_name();
  return out;
}

/// The part a row number belongs to.
uint64_t part_of(uint64_t id) {
  uint64_t p = 0;
  while (id >= first_of(p + 1))
    ++p;
  return p;
}

} // namespace

TEST_CASE("W workers of a stream train every example exactly once between "
          "them, a part at a time",
          "[core][stream]") {
  temp_dir dir{"stream_batches"};
  put_parts(dir);
  for (uint32_t workers = 1; workers <= 3; ++workers) {
    for (std::optional<uint64_t> seed : {std::optional<uint64_t>{},
                                         std::optional<uint64_t>{7}}) {
      INFO("workers " << workers << (seed ? ", shuffled" : ", in order"));
      std::vector<uint64_t> all;
      for (uint32_t w = 0; w < workers; ++w) {
        auto batches = read_batches(dir, w, workers, 2, seed);
        std::vector<uint64_t> mine;
        for (auto& b : batches) {
          // A batch holds rows of one part, this worker's (j % W == w).
          auto p = part_of(b.ids.front());
          CHECK(b.after.epoch == p);
          for (auto id : b.ids) {
            CHECK(part_of(id) == p);
            CHECK((id - first_of(p)) % workers == w);
          }
          mine.insert(mine.end(), b.ids.begin(), b.ids.end());
        }
        // Per part: ceil(rows / 2) batches, the last one short if odd.
        std::map<uint64_t, uint64_t> per_part;
        for (auto& b : batches)
          ++per_part[b.after.epoch];
        for (auto& [p, n] : per_part) {
          auto share = (part_sizes[p] + workers - 1 - w) / workers;
          CHECK(n == (share + 1) / 2);
        }
        if (!seed)
          CHECK(std::is_sorted(mine.begin(), mine.end()));
        all.insert(all.end(), mine.begin(), mine.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<uint64_t> every(total_rows());
      for (uint64_t i = 0; i < every.size(); ++i)
        every[i] = i;
      CHECK(all == every);
    }
  }
}

TEST_CASE("a shuffled stream gives the same batches on every run, in "
          "another order than the file's",
          "[core][stream]") {
  temp_dir dir{"stream_shuffle"};
  put_parts(dir);
  auto ids = [](const std::vector<batch_record>& bs) {
    std::vector<uint64_t> out;
    for (auto& b : bs)
      out.insert(out.end(), b.ids.begin(), b.ids.end());
    return out;
  };
  auto a = ids(read_batches(dir, 0, 1, 3, 11));
  auto b = ids(read_batches(dir, 0, 1, 3, 11));
  auto c = ids(read_batches(dir, 0, 1, 3, 12));
  CHECK(a == b);
  CHECK(a != c);
  CHECK_FALSE(std::is_sorted(a.begin(), a.end()));
}

TEST_CASE("batches resumed at a saved position continue exactly: nothing "
          "twice, nothing skipped",
          "[core][stream]") {
  temp_dir dir{"stream_batches_resume"};
  put_parts(dir);
  for (std::optional<uint64_t> seed : {std::optional<uint64_t>{},
                                       std::optional<uint64_t>{5}}) {
    for (uint32_t w = 0; w < 2; ++w) {
      auto whole = read_batches(dir, w, 2, 2, seed);
      std::vector<uint64_t> expected;
      for (auto& b : whole)
        expected.insert(expected.end(), b.ids.begin(), b.ids.end());
      // Stop after k batches (mid-part and at a part's end), "restart"
      // with a new source and seek, by index and by name.
      for (size_t k = 1; k < whole.size(); ++k) {
        for (bool by_name : {false, true}) {
          INFO("worker " << w << ", stopped after " << k << " batches"
                         << (by_name ? ", by name" : ", by index"));
          std::string name;
          auto first = read_batches(dir, w, 2, 2, seed, {}, k, &name);
          REQUIRE(first.size() == k);
          auto pos = first.back().after;
          auto rest = read_batches(dir, w, 2, 2, seed,
                                   std::make_pair(pos, by_name ? name : ""));
          std::vector<uint64_t> got;
          for (auto* part : {&first, &rest})
            for (auto& b : *part)
              got.insert(got.end(), b.ids.begin(), b.ids.end());
          CHECK(got == expected);
        }
      }
    }
  }
}

TEST_CASE("stream batches wait for a part and tell a slow stream from an "
          "ended one",
          "[core][stream]") {
  temp_dir dir{"stream_batches_wait"};
  auto cfg = small_stream(dir);
  cfg.end_after = 2;
  kept_log log;
  std::shared_ptr<stream_source> src = open_stream(cfg, log.env());
  stream_batches batches{src, input_context{1, 0}, 4};
  example_batch b;
  CHECK_FALSE(batches.try_next(b, 5ms));
  CHECK_FALSE(batches.ended());
  CHECK(b.rows == 0);
  std::thread producer{[&] {
    std::this_thread::sleep_for(5ms);
    put_part(dir, "p0.csv", rows_text(0, 6));
    put_part(dir, "p1.csv", rows_text(6, 1));
  }};
  REQUIRE(batches.try_next(b, 10s));
  producer.join();
  CHECK(b.fields[0].keys == std::vector<uint64_t>{0, 1, 2, 3});
  CHECK(batches.position().epoch == 0);
  CHECK(batches.position().offset == 4);
  CHECK(batches.part_name() == "p0.csv");
  REQUIRE(batches.try_next(b, 0ms));
  CHECK(b.fields[0].keys == std::vector<uint64_t>{4, 5}); // short: part end
  REQUIRE(batches.try_next(b, 0ms));
  CHECK(b.fields[0].keys == std::vector<uint64_t>{6});
  CHECK_FALSE(batches.try_next(b, 10s)); // end_after 2: at once
  CHECK(batches.ended());
  // A position past the worker's rows of its part is refused on resume.
  std::shared_ptr<stream_source> again = open_stream(cfg, log.env());
  stream_batches resumed{again, input_context{1, 0}, 4};
  resumed.seek(data_position{0, 7});
  CHECK_THROWS_AS(resumed.try_next(b, 0ms), input_error);
  CHECK_THROWS_AS(stream_batches(again, input_context{1, 0}, 0), input_error);
}
