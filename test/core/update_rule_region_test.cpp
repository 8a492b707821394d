#include "core/update_rule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#if defined(__SSE__)
#  include <xmmintrin.h>
#endif

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "test/core/update_rule_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

// Update rules on rows and dense regions (row by row, long unaligned ranges,
// growing slot buffers), the registry and its settings, denormals and
// staleness-aware steps. The rules step by step: update_rule_test.cpp.

// -- rows and regions ------------------------------------------------------------

TEST_CASE("a rule applied row by row with the region's step count gives the "
          "dense region's values and slots",
          "[core][update_rule]") {
  const size_t rows = 3, dim = 16, n = rows * dim;
  for (auto& type : update_rule_names()) {
    INFO(type);
    std::vector<float> init(n);
    for (size_t i = 0; i < n; ++i)
      init[i] = 0.1f * static_cast<float>(static_cast<int>(i % 7) - 3);
    auto rule = make_rule(type, 0.05f);
    dense_region region{rule};
    region.append(init.data(), n);
    auto w = init;
    std::vector<std::vector<float>> slots(rule->slot_count());
    for (size_t s = 0; s < slots.size(); ++s)
      slots[s].assign(n, rule->slot_init(s));
    std::vector<float> g(n);
    for (uint64_t t = 1; t <= 3; ++t) {
      for (size_t i = 0; i < n; ++i)
        g[i] = 0.25f * static_cast<float>(static_cast<int>((i * t) % 5) - 2);
      region.apply(g.data());
      for (size_t r = 0; r < rows; ++r) {
        std::vector<float*> row_slots;
        for (auto& s : slots)
          row_slots.push_back(s.data() + r * dim);
        rule->apply(w.data() + r * dim, row_slots.data(), g.data() + r * dim,
                    dim, t);
      }
    }
    // Bit for bit (EIGEN_FAST_MATH=0: Eigen's packet sqrt is exact, as
    // its scalar one).
    for (size_t i = 0; i < n; ++i) {
      INFO("element " << i);
      CHECK(region.values()[i] == w[i]);
      for (size_t s = 0; s < slots.size(); ++s)
        CHECK(region.slots()[s][i] == slots[s][i]);
    }
  }
}

TEST_CASE("apply updates every parameter of a long unaligned range exactly "
          "once",
          "[core][update_rule]") {
  // 203 floats starting 1 float past an allocation: a head up to the next
  // 64-byte boundary, whole blocks and a tail. The same floats one at a time
  // (n = 1, Eigen's scalar code) are the reference, bit for bit.
  const size_t n = 203;
  for (auto& type : update_rule_names()) {
    INFO(type);
    auto rule = make_rule(type, 0.05f);
    std::vector<float> w(n + 2), w1(n + 2), g(n + 2);
    for (size_t i = 0; i < n + 2; ++i) {
      w[i] = w1[i] = 0.01f * static_cast<float>(static_cast<int>(i % 13) - 6);
      g[i] = 0.1f * static_cast<float>(static_cast<int>(i % 5) - 2);
    }
    std::vector<std::vector<float>> slots, slots1;
    for (size_t s = 0; s < rule->slot_count(); ++s)
      slots.emplace_back(n + 2, rule->slot_init(s));
    slots1 = slots;
    for (uint64_t t = 1; t <= 2; ++t) {
      std::vector<float*> ptrs;
      for (auto& s : slots)
        ptrs.push_back(s.data() + 1);
      rule->apply(w.data() + 1, ptrs.data(), g.data() + 1, n, t);
      for (size_t i = 1; i <= n; ++i) {
        std::vector<float*> one;
        for (auto& s : slots1)
          one.push_back(s.data() + i);
        rule->apply(w1.data() + i, one.data(), g.data() + i, 1, t);
      }
    }
    for (size_t i = 0; i < n + 2; ++i) {
      INFO("element " << i);
      CHECK(w[i] == w1[i]);
      for (size_t s = 0; s < slots.size(); ++s)
        CHECK(slots[s][i] == slots1[s][i]);
    }
    // The floats just outside the range were not touched.
    CHECK(w[0] == w1[0]);
    CHECK(w[n + 1] == w1[n + 1]);
    CHECK(w[0] == Approx(-0.06));
  }
}

TEST_CASE("a rule gives a float the same value wherever its buffers start "
          "and however long the range around it is",
          "[core][update_rule]") {
  // Which floats take Eigen's packets and which its scalar code depends on
  // the addresses (the head up to a 64-byte boundary, the peeling inside a
  // short block): with Eigen's rsqrt-based packet sqrt, adagrad, adam and
  // ftrl gave some floats other values at other offsets, and training
  // depended on where malloc had put the parameters. The reference: the
  // first n of 203 floats, all buffers at offset 0.
  const size_t total = 203, shift = 16;
  std::vector<float> w0(total), g0(total);
  for (size_t i = 0; i < total; ++i) {
    w0[i] = 0.01f * static_cast<float>(static_cast<int>(i % 13) - 6);
    g0[i] = 0.37f * std::sin(static_cast<float>(i));
  }
  for (auto& type : update_rule_names()) {
    INFO(type);
    auto rule = make_rule(type, 0.05f);
    auto k = rule->slot_count();
    // Three steps on n floats with w and the slots at float `at`, g at
    // `g_at`; returns w, then each slot.
    auto run = [&](size_t n, size_t at, size_t g_at) {
      std::vector<float> w(total + shift), g(total + shift);
      std::copy(w0.begin(), w0.begin() + n, w.begin() + at);
      std::copy(g0.begin(), g0.begin() + n, g.begin() + g_at);
      std::vector<std::vector<float>> slots;
      std::vector<float*> ptrs;
      for (size_t s = 0; s < k; ++s) {
        slots.emplace_back(total + shift, rule->slot_init(s));
        ptrs.push_back(slots.back().data() + at);
      }
      for (uint64_t t = 1; t <= 3; ++t)
        rule->apply(w.data() + at, ptrs.data(), g.data() + g_at, n, t);
      std::vector<std::vector<float>> out;
      out.emplace_back(w.begin() + at, w.begin() + at + n);
      for (auto& s : slots)
        out.emplace_back(s.begin() + at, s.begin() + at + n);
      return out;
    };
    auto ref = run(total, 0, 0);
    for (size_t n : {1u, 7u, 16u, 23u, 65u, 203u})
      for (size_t at = 0; at < shift; ++at)
        for (size_t g_at : {0u, 5u}) {
          INFO(n << " floats at float " << at << ", gradient at " << g_at);
          auto got = run(n, at, g_at);
          for (size_t a = 0; a < got.size(); ++a)
            CHECK(std::equal(got[a].begin(), got[a].end(), ref[a].begin()));
        }
  }
}

TEST_CASE("apply on one row touches only its n parameters and slots",
          "[core][update_rule]") {
  for (auto& type : update_rule_names()) {
    INFO(type);
    auto rule = make_rule(type, 0.1f);
    // 5 floats, the rule gets the middle 3; the ends are sentinels.
    std::vector<float> w{7.0f, 1.0f, 1.0f, 1.0f, 7.0f};
    std::vector<float> g{9.0f, 1.0f, -1.0f, 0.5f, 9.0f};
    std::vector<std::vector<float>> slots(rule->slot_count(),
                                          std::vector<float>(5, 0.5f));
    std::vector<float*> ptrs;
    for (auto& s : slots)
      ptrs.push_back(s.data() + 1);
    rule->apply(w.data() + 1, ptrs.data(), g.data() + 1, 3, 1);
    CHECK(w[0] == 7.0f);
    CHECK(w[4] == 7.0f);
    CHECK(w[1] != 1.0f);
    for (auto& s : slots) {
      CHECK(s[0] == 0.5f);
      CHECK(s[4] == 0.5f);
    }
  }
}

TEST_CASE("append keeps existing slots and starts new ones at the rule's "
          "initial value",
          "[core][update_rule]") {
  SECTION("adagrad's new accumulators start at initial_accumulator") {
    auto region = make_region("adagrad", 0.1f, {0.0f, 0.0f},
                              {{"initial_accumulator", 0.25}});
    std::vector<float> g{1.0f, 2.0f};
    region.apply(g.data());
    std::vector<float> more{0.0f, 0.0f};
    CHECK(region.append(more.data(), 2) == 2);
    CHECK(region.size() == 4);
    REQUIRE(region.slots().size() == 1);
    check_values(region.slots()[0], {1.25, 4.25, 0.25, 0.25});
    // The grown region updates all four: new ones with a = 0.25 + g^2.
    std::vector<float> g4{0.0f, 0.0f, 1.0f, 0.0f};
    region.apply(g4.data());
    check_values(region.slots()[0], {1.25, 4.25, 1.25, 0.25});
    CHECK(region.values()[2] == Approx(-0.1 / (std::sqrt(1.25) + 1e-7)));
  }
  SECTION("ftrl's new accumulators start at initial_accumulator, z at zero") {
    auto region = make_region("ftrl", 0.1f, {0.0f},
                              {{"initial_accumulator", 0.5}});
    std::vector<float> g{1.0f};
    region.apply(g.data());
    std::vector<float> more{3.0f};
    CHECK(region.append(more.data(), 1) == 1);
    check_values(region.slots()[0], {1.5, 0.5});
    check_values(region.slots()[1], {1.0, 0.0});
    CHECK(region.values()[1] == 3.0f);
  }
  SECTION("momentum's and adam's new slots start at zero") {
    for (auto type : {"momentum", "adam"}) {
      INFO(type);
      auto region = make_region(type, 0.1f, {0.0f});
      std::vector<float> g{1.0f};
      region.apply(g.data());
      std::vector<float> more{0.0f, 0.0f};
      region.append(more.data(), 2);
      for (auto& slot : region.slots()) {
        REQUIRE(slot.size() == 3);
        CHECK(slot[0] != 0.0f);
        CHECK(slot[1] == 0.0f);
        CHECK(slot[2] == 0.0f);
      }
    }
  }
  SECTION("sgd has no slots at any size") {
    auto region = make_region("sgd", 0.1f, {0.0f, 0.0f});
    std::vector<float> more(8, 1.0f);
    CHECK(region.append(more.data(), 8) == 2);
    CHECK(region.size() == 10);
    CHECK(region.slots().empty());
  }
}

TEST_CASE("a dense region counts its steps and passes the count on as t, "
          "also after set_steps",
          "[core][update_rule]") {
  // A region restored at step 1 takes step 2: its Adam update equals the
  // rule's at t = 2 on the same state.
  auto rule = make_rule("adam", 0.1f);
  dense_region region{rule};
  std::vector<float> init{1.0f, -1.0f};
  CHECK(region.append(init.data(), 2) == 0);
  CHECK(region.steps() == 0);
  region.set_steps(1);
  std::vector<float> g{0.5f, 2.0f};
  region.apply(g.data());
  CHECK(region.steps() == 2);
  auto w = init;
  std::vector<float> m(2, 0.0f), v(2, 0.0f);
  float* slots[] = {m.data(), v.data()};
  rule->apply(w.data(), slots, g.data(), 2, 2);
  CHECK(region.values() == w);
  // t = 1 would have moved element 0 by lr = 0.1; t = 2 moves it by
  // lr * sqrt(1 - 0.999^2) / (1 - 0.9^2) * 0.1 / sqrt(0.001) = 0.0744 lr.
  CHECK(region.values()[0] == Approx(1.0 - 0.1 * 0.744136).epsilon(1e-4));
}

TEST_CASE("a dense region keeps applying correctly after its slot buffers "
          "are replaced or grow",
          "[core][update_rule]") {
  // Grow the region many times (the buffers move), then replace the slots
  // as a checkpoint restore does: apply must use the current buffers.
  auto region = make_region("momentum", 0.1f, {0.0f}, {{"momentum", 0.5}});
  std::vector<float> one{0.0f};
  for (int i = 0; i < 100; ++i)
    region.append(one.data(), 1);
  region.slots()[0] = std::vector<float>(101, 1.0f);
  std::vector<float> g(101, 0.0f);
  region.apply(g.data());
  // v = 0.5 * 1 - 0 = 0.5; w = 0 + 0.5
  CHECK(region.slots()[0][100] == 0.5f);
  CHECK(region.values()[100] == 0.5f);
}

TEST_CASE("a snapshot of a dense region keeps the values it was taken at "
          "while the region steps on, and a step with no snapshot held "
          "writes in place",
          "[core][update_rule]") {
  auto region = make_region("sgd", 0.5f, {1.0f, 2.0f});
  std::vector<float> g{1.0f, -1.0f};
  auto snap = region.snapshot();
  const float* before = snap->data();
  region.apply(g.data());
  CHECK(*snap == std::vector<float>{1.0f, 2.0f});
  CHECK(std::as_const(region).values() == std::vector<float>{0.5f, 2.5f});
  CHECK(std::as_const(region).values().data() != before);
  // Appending and handing out values to change copy too.
  auto snap2 = region.snapshot();
  std::vector<float> more{7.0f};
  region.append(more.data(), 1);
  region.values()[0] = 9.0f;
  CHECK(*snap2 == std::vector<float>{0.5f, 2.5f});
  CHECK(std::as_const(region).values()
        == std::vector<float>{9.0f, 2.5f, 7.0f});
  // Released snapshots: the next step writes to the same buffer.
  snap.reset();
  snap2.reset();
  const float* now = std::as_const(region).values().data();
  std::vector<float> g3{0.0f, 0.0f, 2.0f};
  region.apply(g3.data());
  CHECK(std::as_const(region).values().data() == now);
  CHECK(std::as_const(region).values()[2] == 6.0f);
}

// -- registry and settings -----------------------------------------------------

TEST_CASE("the registry lists sgd, momentum, adagrad, adam and ftrl, and "
          "builds each by name",
          "[core][update_rule]") {
  CHECK(update_rule_names()
        == std::vector<std::string>{"adagrad", "adam", "ftrl", "momentum",
                                    "sgd"});
  const std::map<std::string, size_t> slots{
    {"sgd", 0}, {"momentum", 1}, {"adagrad", 1}, {"adam", 2}, {"ftrl", 2}};
  for (auto& name : update_rule_names()) {
    INFO(name);
    auto rule = make_rule(name, 0.01f);
    REQUIRE(rule != nullptr);
    CHECK(rule->name() == name);
    CHECK(rule->slot_count() == slots.at(name));
  }
  // Initial slot values: Keras' defaults.
  CHECK(make_rule("adagrad", 0.01f)->slot_init(0) == 0.1f);
  CHECK(make_rule("ftrl", 0.01f)->slot_init(0) == 0.1f);
  CHECK(make_rule("ftrl", 0.01f)->slot_init(1) == 0.0f);
  CHECK(make_rule("adam", 0.01f)->slot_init(0) == 0.0f);
  CHECK(make_rule("adam", 0.01f)->slot_init(1) == 0.0f);
}

TEST_CASE("an unknown rule name is rejected with input_error naming the "
          "section, the name and the known rules",
          "[core][update_rule]") {
  for (std::string bad : {"rmsprop", "SGD", "", "adamw", "adam "}) {
    INFO("name \"" << bad << "\"");
    optimizer_config cfg;
    cfg.type = bad;
    CHECK_THROWS_AS(make_update_rule(cfg), input_error);
    CHECK(rejection(bad, 0.01f, {})
          == "optimizer.type: unknown update rule \"" + bad
               + "\" (known: adagrad, adam, ftrl, momentum, sgd)");
  }
  CHECK_THAT(rejection("lamb", 0.01f, {}, "table_optimizer"),
             Catch::StartsWith("table_optimizer.type: unknown update rule "
                               "\"lamb\""));
}

TEST_CASE("a field a rule does not have is rejected with the field and the "
          "rule named",
          "[core][update_rule]") {
  CHECK(rejection("adam", 0.01f, {{"beta3", 0.5}})
        == "optimizer.beta3: unknown field for adam");
  CHECK(rejection("sgd", 0.01f, {{"momentum", 0.9}})
        == "optimizer.momentum: unknown field for sgd");
  CHECK(rejection("adagrad", 0.01f, {{"beta1", 0.9}}, "table_optimizer")
        == "table_optimizer.beta1: unknown field for adagrad");
  CHECK(rejection("ftrl", 0.01f, {{"l1_regularization_strength", 0.1}})
        == "optimizer.l1_regularization_strength: unknown field for ftrl");
  CHECK(rejection("momentum", 0.01f, {{"learning_rate", 0.1}})
        == "optimizer.learning_rate: unknown field for momentum");
}

TEST_CASE("a setting outside its range is rejected with the field, the value "
          "and the range",
          "[core][update_rule]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct row {
    const char* type;
    param_map params;
    const char* message;
  };
  const std::vector<row> rows{
    {"adam", {{"beta1", 1.5}}, "optimizer.beta1: 1.5 is out of range [0, "
                               "0.999999]"},
    {"adam", {{"beta2", 1.0}}, "optimizer.beta2: 1 is out of range [0, "
                               "0.999999]"},
    {"adam", {{"epsilon", -1e-8}}, "optimizer.epsilon: -1e-08 is out of "
                                   "range [0, 1]"},
    {"adam", {{"beta1", nan}}, "optimizer.beta1: nan is out of range [0, "
                               "0.999999]"},
    {"momentum", {{"momentum", -0.1}}, "optimizer.momentum: -0.1 is out of "
                                       "range [0, 0.999999]"},
    {"momentum", {{"nesterov", 0.5}}, "optimizer.nesterov: 0.5 must be 0 or "
                                      "1"},
    {"adagrad", {{"initial_accumulator", 2e6}},
     "optimizer.initial_accumulator: 2000000 is out of range [0, 1000000]"},
    {"ftrl", {{"l1", -1.0}}, "optimizer.l1: -1 is out of range [0, "
                             "1000000]"},
    {"ftrl", {{"l2", -0.5}}, "optimizer.l2: -0.5 is out of range [0, "
                             "1000000]"},
    {"ftrl", {{"beta", -2.0}}, "optimizer.beta: -2 is out of range [0, "
                               "1000000]"},
  };
  for (auto& r : rows) {
    INFO(r.message);
    CHECK(rejection(r.type, 0.01f, r.params) == r.message);
  }
  for (auto& name : update_rule_names()) {
    INFO(name);
    CHECK(rejection(name, 0.0f, {})
          == "optimizer.learning_rate: 0 is out of range (0, 1000000]");
    CHECK(rejection(name, -0.5f, {}, "table_optimizer")
          == "table_optimizer.learning_rate: -0.5 is out of range (0, "
             "1000000]");
    CHECK_FALSE(rejection(name, std::numeric_limits<float>::quiet_NaN(), {})
                  .empty());
  }
  // The ends of a range are in it.
  CHECK(rejection("adam", 0.01f, {{"beta1", 0.0}, {"beta2", 0.999999}})
        == "");
  CHECK(rejection("momentum", 0.01f, {{"nesterov", 1.0}}) == "");
}

TEST_CASE("describe names the rule and every setting, Keras' defaults "
          "included",
          "[core][update_rule]") {
  CHECK(make_rule("sgd", 0.01f)->describe() == "sgd learning_rate 0.01");
  CHECK(make_rule("momentum", 0.01f)->describe()
        == "momentum learning_rate 0.01 momentum 0.9 nesterov 0");
  CHECK(make_rule("momentum", 0.01f, {{"nesterov", 1}})->describe()
        == "momentum learning_rate 0.01 momentum 0.9 nesterov 1");
  CHECK(make_rule("adagrad", 0.05f)->describe()
        == "adagrad learning_rate 0.05 initial_accumulator 0.1 epsilon 1e-07");
  CHECK(make_rule("adam", 0.001f)->describe()
        == "adam learning_rate 0.001 beta1 0.9 beta2 0.999 epsilon 1e-07");
  CHECK(make_rule("ftrl", 0.001f)->describe()
        == "ftrl learning_rate 0.001 initial_accumulator 0.1 l1 0 l2 0 "
           "beta 0");
}

TEST_CASE("describe differs when any one setting differs",
          "[core][update_rule]") {
  // Each field of each rule: its default, and a valid other value.
  struct field {
    const char* name;
    double fallback;
    double other;
  };
  const std::map<std::string, std::vector<field>> fields{
    {"sgd", {}},
    {"momentum", {{"momentum", 0.9, 0.5}, {"nesterov", 0, 1}}},
    {"adagrad", {{"initial_accumulator", 0.1, 0.2}, {"epsilon", 1e-7, 1e-6}}},
    {"adam",
     {{"beta1", 0.9, 0.8}, {"beta2", 0.999, 0.99}, {"epsilon", 1e-7, 1e-8}}},
    {"ftrl",
     {{"initial_accumulator", 0.1, 0.2},
      {"l1", 0, 0.1},
      {"l2", 0, 0.1},
      {"beta", 0, 1}}},
  };
  REQUIRE(fields.size() == update_rule_names().size());
  std::vector<std::string> seen;
  for (auto& [type, list] : fields) {
    INFO(type);
    auto base = make_rule(type, 0.01f)->describe();
    CHECK(make_rule(type, 0.02f)->describe() != base);
    seen.push_back(base);
    for (auto& f : list) {
      INFO(f.name);
      CHECK(make_rule(type, 0.01f, {{f.name, f.other}})->describe() != base);
      // Writing the default explicitly changes nothing.
      CHECK(make_rule(type, 0.01f, {{f.name, f.fallback}})->describe()
            == base);
    }
  }
  // The rules differ from one another too.
  std::sort(seen.begin(), seen.end());
  CHECK(std::unique(seen.begin(), seen.end()) == seen.end());
}

// -- denormals ---------------------------------------------------------------------

#if defined(__SSE__)

TEST_CASE("apply turns on flush-to-zero, so decaying slots reach zero instead "
          "of the slow denormal range",
          "[core][update_rule]") {
  const unsigned ftz_daz = 0x8040;
  const auto saved = _mm_getcsr();
  _mm_setcsr(saved & ~ftz_daz);
  // 1e-37 (above FLT_MIN = 1.2e-38) times 0.01 is a denormal while the bits
  // are off ...
  volatile float tiny = 1e-37f, factor = 0.01f;
  CHECK(tiny * factor != 0.0f);
  // ... and Adam's first moment with beta1 = 0.01 and no gradient decays
  // from 1e-37 to that denormal, which apply() flushes to 0.
  auto rule = make_rule("adam", 0.1f, {{"beta1", 0.01}});
  std::vector<float> w{1.0f}, m{1e-37f}, v{1.0f}, g{0.0f};
  float* slots[] = {m.data(), v.data()};
  rule->apply(w.data(), slots, g.data(), 1, 1);
  CHECK((_mm_getcsr() & ftz_daz) == ftz_daz);
  CHECK(m[0] == 0.0f);
  CHECK(tiny * factor == 0.0f);
  // flush_denormals() alone turns them on as well.
  _mm_setcsr(saved & ~ftz_daz);
  flush_denormals();
  CHECK((_mm_getcsr() & ftz_daz) == ftz_daz);
  _mm_setcsr(saved);
}

#endif

// -- staleness-aware steps ------------------------------------------------------

TEST_CASE("a staleness-aware step is 1 / tau of the rule's step: adam with "
          "step_scale 1/4 matches adam at a quarter of the learning rate",
          "[core][update_rule]") {
  CHECK(staleness_step_scale(0) == 1.0f);
  CHECK(staleness_step_scale(1) == 1.0f);
  CHECK(staleness_step_scale(4) == 0.25f);
  auto scaled = make_region("adam", 0.1f, {1.0f, -2.0f, 0.5f});
  auto slower = make_region("adam", 0.025f, {1.0f, -2.0f, 0.5f});
  for (auto g : {std::vector<float>{0.5f, -1.0f, 2.0f},
                 std::vector<float>{-1.0f, 0.5f, 0.0f}}) {
    scaled.apply(g.data(), 0.25f);
    slower.apply(g.data());
  }
  REQUIRE(scaled.values().size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO("element " << i);
    CHECK(scaled.values()[i] == Approx(slower.values()[i]).epsilon(1e-6));
    // The slots took the whole step: adam's moments do not depend on lr.
    CHECK(scaled.slots()[0][i] == slower.slots()[0][i]);
    CHECK(scaled.slots()[1][i] == slower.slots()[1][i]);
  }
  CHECK(scaled.steps() == 2);
  // sgd: w - step_scale * lr * g
  auto sgd = make_region("sgd", 0.1f, {1.0f, -2.0f});
  std::vector<float> g{0.5f, -1.0f};
  sgd.apply(g.data(), 0.5f);
  check_values(sgd.values(), {1.0 - 0.5 * 0.1 * 0.5, -2.0 + 0.5 * 0.1 * 1.0});
}
