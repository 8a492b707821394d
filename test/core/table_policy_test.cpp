#include "core/table_policy.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "test/core/table_helpers.hpp"

using namespace actorps;
using namespace table_test;

TEST_CASE("the default policy is valid and keeps no filter and no limit",
          "[table][policy]") {
  table_policy p;
  CHECK_NOTHROW(validate_table_policy(p, make_def(16), 2));
  CHECK(!p.filters());
  CHECK(!p.has_budget());
  CHECK(table_filter_bytes(p) == 0);
  CHECK(table_row_limit(p, 16, 2) == std::numeric_limits<uint64_t>::max());
}

TEST_CASE("bad policy values are refused with a message naming the table "
          "and the field",
          "[table][policy]") {
  auto def = make_def(16);
  struct bad_case {
    const char* what;
    void (*spoil)(table_policy&);
    std::vector<const char*> message;
  };
  const std::vector<bad_case> cases{
    {"negative admit_after", [](table_policy& p) { p.admit_after = -1; },
     {"admit_after -1", "negative"}},
    {"admit_after above the sketch's 8 bits",
     [](table_policy& p) { p.admit_after = 256; },
     {"admit_after 256", "255", "exact"}},
    {"admit_after above the exact counter's 32 bits",
     [](table_policy& p) {
       p.admit_after = int64_t{1} << 32;
       p.filter = admission_kind::exact;
     },
     {"admit_after 4294967296", "2^32 - 1"}},
    {"fewer counters than hash rows",
     [](table_policy& p) {
       p.admit_after = 3;
       p.filter_counters = 3;
     },
     {"filter_counters 3", "filter_depth 4"}},
    {"no counters",
     [](table_policy& p) {
       p.admit_after = 3;
       p.filter_counters = 0;
     },
     {"filter_counters 0"}},
    {"depth 0",
     [](table_policy& p) {
       p.admit_after = 3;
       p.filter_depth = 0;
     },
     {"filter_depth 0"}},
    {"a negative halving period",
     [](table_policy& p) {
       p.admit_after = 3;
       p.filter_halve_every = -5;
     },
     {"filter_halve_every -5"}},
    {"a zero time to live", [](table_policy& p) { p.steps_to_live = 0; },
     {"steps_to_live 0", "at least 1"}},
    {"a negative time to live",
     [](table_policy& p) { p.steps_to_live = -10; }, {"steps_to_live -10"}},
    {"a negative L2 threshold", [](table_policy& p) { p.l2_threshold = -1; },
     {"l2_threshold -1"}},
    {"a NaN L2 threshold",
     [](table_policy& p) { p.l2_threshold = std::nan(""); },
     {"l2_threshold"}},
    {"max_rows 0", [](table_policy& p) { p.max_rows = 0; },
     {"max_rows 0", "no room"}},
    {"max_bytes below one row", [](table_policy& p) { p.max_bytes = 100; },
     // 4 * 16 * 3 + 8 + 8 + 1 + 20 + 8 (last access) = 237 bytes a row.
     {"max_bytes 100", "one row of 237 bytes", "dimension 16", "2 slots"}},
    {"max_bytes below one row and the sketch",
     [](table_policy& p) {
       p.admit_after = 2;
       p.filter_counters = 4096;
       p.max_bytes = 4000;
     },
     {"max_bytes 4000", "sketch's 4096 bytes"}},
    {"no samples", [](table_policy& p) { p.evict_samples = 0; },
     {"evict_samples 0"}},
    {"no half-life", [](table_policy& p) { p.lfu_half_life = 0; },
     {"lfu_half_life 0"}},
  };
  for (auto& bad : cases) {
    INFO(bad.what);
    table_policy p;
    bad.spoil(p);
    CHECK_THROWS_AS(validate_table_policy(p, def, 2), input_error);
    try {
      validate_table_policy(p, def, 2);
    } catch (const input_error& e) {
      std::string msg = e.what();
      INFO(msg);
      CHECK(msg.rfind("table emb: ", 0) == 0);
      for (auto part : bad.message)
        CHECK(msg.find(part) != std::string::npos);
    }
    // A store refuses the same policy.
    CHECK_THROWS_AS(
      (table_store{def, std::make_shared<counting_sgd>(0.1f), p}),
      input_error);
  }
}

TEST_CASE("filter settings do not matter while admit_after is 0 or 1",
          "[table][policy]") {
  table_policy p;
  p.admit_after = 1;
  p.filter_counters = 0;
  p.filter_depth = 0;
  CHECK_NOTHROW(validate_table_policy(p, make_def(), 0));
  CHECK(table_filter_bytes(p) == 0);
}

TEST_CASE("max_bytes and max_rows give the row limit, net of the sketch",
          "[table][policy]") {
  table_policy p;
  p.max_rows = 1000;
  CHECK(table_row_limit(p, 16, 0) == 1000);
  // dim 16, no slots, LRU: 64 + 8 + 8 + 1 + 20 + 8 = 109 bytes a row.
  CHECK(table_row_bytes(p, 16, 0) == 109);
  p.max_bytes = 109 * 500 + 108;
  CHECK(table_row_limit(p, 16, 0) == 500);
  p.max_rows = 300;
  CHECK(table_row_limit(p, 16, 0) == 300);
  p.max_rows.reset();
  p.evict = eviction_order::lfu;
  p.steps_to_live = 10; // + 8 frequency + 8 last update
  CHECK(table_row_bytes(p, 16, 0) == 125);
  p.admit_after = 3;
  p.filter_counters = 1000;
  p.filter_depth = 3; // 333 counters a row: 999 bytes
  CHECK(table_filter_bytes(p) == 999);
  p.max_bytes = 999 + 125 * 7;
  CHECK(table_row_limit(p, 16, 0) == 7);
  p.filter = admission_kind::exact; // not part of the budget
  CHECK(table_row_limit(p, 16, 0) == (999 + 125 * 7) / 125);
}

TEST_CASE("filter kinds and eviction orders parse from their names",
          "[table][policy]") {
  CHECK(parse_admission_kind("sketch") == admission_kind::sketch);
  CHECK(parse_admission_kind("exact") == admission_kind::exact);
  CHECK(parse_eviction_order("lru") == eviction_order::lru);
  CHECK(parse_eviction_order("lfu") == eviction_order::lfu);
  CHECK(std::string{to_string(admission_kind::exact)} == "exact");
  CHECK(std::string{to_string(eviction_order::lfu)} == "lfu");
  CHECK_THROWS_WITH(parse_admission_kind("bloom"),
                    Catch::Contains("\"bloom\"")
                      && Catch::Contains("\"sketch\" or \"exact\""));
  CHECK_THROWS_AS(parse_eviction_order("fifo"), input_error);
}
