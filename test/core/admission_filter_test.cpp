#include "core/admission_filter.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <catch2/catch.hpp>

#include "core/table_store.hpp"
#include "test/core/table_helpers.hpp"

using namespace actorps;
using namespace table_test;

namespace {

/// n draws of Zipf(s) over keys 0 .. universe - 1 (rank r has weight
/// 1 / (r + 1)^s), by inverse transform on the cumulative weights. Keys are
/// the ranks scrambled, so that hot keys are not small numbers.
std::vector<uint64_t> zipf_keys(size_t universe, double s, size_t n,
                                uint64_t seed) {
  std::vector<double> cumulative(universe);
  double total = 0;
  for (size_t r = 0; r < universe; ++r) {
    total += 1.0 / std::pow(static_cast<double>(r + 1), s);
    cumulative[r] = total;
  }
  std::mt19937_64 gen{seed};
  std::uniform_real_distribution<double> u{0.0, total};
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) {
    auto r = std::lower_bound(cumulative.begin(), cumulative.end(), u(gen))
             - cumulative.begin();
    k = static_cast<uint64_t>(r) * 0x9e3779b97f4a7c15ULL + 12345;
  }
  return keys;
}

} // namespace

TEST_CASE("an exact counter is exact: it admits at the admit_after-th "
          "sighting and forgets a key once admitted",
          "[table][admission]") {
  exact_counter filter{3, 0};
  std::vector<uint64_t> stream{7, 8, 7, 9, 8, 7, 8, 8};
  std::map<uint64_t, uint64_t> truth;
  std::vector<bool> said;
  for (auto k : stream) {
    said.push_back(filter.observe(k));
    ++truth[k];
    CHECK(filter.estimate(k) == truth[k]);
  }
  // 7 reaches 3 at its third sighting (index 5), 8 at index 6 and stays
  // admitted at its fourth; 9 never.
  CHECK(said == std::vector<bool>{false, false, false, false, false, true,
                                  true, true});
  CHECK(filter.admits(7));
  CHECK(!filter.admits(9));
  CHECK(filter.estimate(9) == 1);
  CHECK(filter.size() == 3);
  filter.admitted(7);
  CHECK(filter.estimate(7) == 0);
  CHECK(!filter.admits(7));
  CHECK(filter.size() == 2);
  // Halving: 8 has 4 -> 2, 9 has 1 -> 0 and is dropped.
  filter.halve();
  CHECK(filter.estimate(8) == 2);
  CHECK(filter.estimate(9) == 0);
  CHECK(filter.size() == 1);
}

TEST_CASE("filters halve every count after filter_halve_every sightings",
          "[table][admission]") {
  exact_counter exact{5, 4};
  count_min_sketch sketch{5, 4, 4, 1024, 1};
  for (admission_filter* f :
       std::vector<admission_filter*>{&exact, &sketch}) {
    for (int i = 0; i < 3; ++i)
      f->observe(42);
    CHECK(f->estimate(42) == 3);
    f->observe(42); // the 4th sighting: 4, then halved to 2
    CHECK(f->estimate(42) == 2);
    f->observe(42);
    CHECK(f->estimate(42) == 3);
  }
}

TEST_CASE("a sketch never counts below the truth, so it never refuses a key "
          "seen admit_after times",
          "[table][admission]") {
  // A small sketch (many collisions) on a Zipf stream.
  count_min_sketch sketch{4, 0, 4, 4096, 3};
  exact_counter exact{4, 0};
  auto keys = zipf_keys(20000, 1.05, 50000, 5);
  absl::flat_hash_map<uint64_t, uint64_t> truth;
  size_t refused = 0; // sightings the exact counter admits and the sketch not
  for (auto k : keys) {
    bool s = sketch.observe(k);
    bool e = exact.observe(k);
    ++truth[k];
    if (e && !s)
      ++refused;
  }
  CHECK(refused == 0);
  // Never below the truth, up to the counters' 255 (Zipf's head has more).
  size_t below = 0;
  size_t saturated = 0;
  for (auto& [k, c] : truth) {
    if (sketch.estimate(k) < std::min<uint64_t>(c, 255))
      ++below;
    if (c > 255)
      ++saturated;
  }
  CHECK(below == 0);
  CHECK(saturated > 0);
  CHECK(sketch.memory_bytes() >= 4096 * 4);
  CHECK(sketch.depth() == 4);
  CHECK(sketch.width() == 4096);
}

TEST_CASE("a sketch's false admissions on Zipf keys stay within its bound "
          "(N / (w t))^d per key",
          "[table][admission]") {
  // N sightings of Zipf(1.1) keys; a key seen c < a times is falsely
  // admitted with probability at most (N / (w (a - c)))^d
  // (admission_filter.hpp). Sum the bound over those keys and compare with
  // what the sketch admitted, at two widths where the bound says something;
  // at a third, small enough that the bound says nothing (N / w > 3), the
  // count must see false admissions (so the count could fail the check).
  const uint64_t admit = 4;
  const size_t depth = 4;
  auto keys = zipf_keys(200000, 1.1, 200000, 9);
  absl::flat_hash_map<uint64_t, uint64_t> truth;
  for (auto k : keys)
    ++truth[k];
  const double n = static_cast<double>(keys.size());
  for (size_t width : {size_t{1} << 18, size_t{1} << 17, size_t{1} << 14}) {
    INFO("width " << width);
    count_min_sketch sketch{admit, 0, depth, width, 17};
    for (auto k : keys)
      sketch.observe(k);
    double bound = 0;
    size_t false_admissions = 0;
    size_t candidates = 0;
    for (auto& [k, c] : truth) {
      if (c >= admit)
        continue;
      ++candidates;
      double t = static_cast<double>(admit - c);
      bound += std::min(1.0, std::pow(n / (width * t), double(depth)));
      // Without halving, counts only grow: a key admitted at some sighting
      // still estimates >= admit at the end.
      if (sketch.estimate(k) >= admit)
        ++false_admissions;
    }
    INFO("keys below admit_after " << candidates << ", falsely admitted "
                                   << false_admissions << ", bound "
                                   << bound);
    if (width == (size_t{1} << 14)) {
      CHECK(false_admissions > 0);
    } else {
      CHECK(static_cast<double>(false_admissions) <= bound);
      CHECK(bound < candidates / 5); // the bound is not vacuous here
    }
  }
}

TEST_CASE("make_admission_filter builds nothing for admit_after 0 or 1 and "
          "the chosen kind above",
          "[table][admission]") {
  table_policy p;
  CHECK(make_admission_filter(p, 1) == nullptr);
  p.admit_after = 1;
  CHECK(make_admission_filter(p, 1) == nullptr);
  p.admit_after = 2;
  p.filter_counters = 1000;
  p.filter_depth = 3;
  auto sketch = make_admission_filter(p, 1);
  REQUIRE(dynamic_cast<count_min_sketch*>(sketch.get()) != nullptr);
  CHECK(dynamic_cast<count_min_sketch&>(*sketch).width() == 333);
  CHECK(sketch->admit_after() == 2);
  p.filter = admission_kind::exact;
  CHECK(dynamic_cast<exact_counter*>(make_admission_filter(p, 1).get())
        != nullptr);
  CHECK_THROWS_AS((count_min_sketch{2, 0, 0, 10, 1}), std::invalid_argument);
  CHECK_THROWS_AS((count_min_sketch{2, 0, 17, 10, 1}), std::invalid_argument);
  CHECK_THROWS_AS((count_min_sketch{2, 0, 4, 0, 1}), std::invalid_argument);
}

TEST_CASE("a saturated sketch counter stays at 255",
          "[table][admission]") {
  count_min_sketch sketch{255, 0, 2, 8, 1};
  for (int i = 0; i < 300; ++i)
    sketch.observe(5);
  CHECK(sketch.estimate(5) == 255);
  CHECK(sketch.admits(5));
}
