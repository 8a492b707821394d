// Wire formats (core/wire_format.hpp): the registry, encoded sizes, and
// the fp32, bf16 and fp16 round trips within their documented errors.
// Top-k, decoded pushes and malformed tensors: wire_topk_test.cpp.

#include "core/wire_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#if defined(__SSE__)
#  include <xmmintrin.h>
#endif

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/update_rule.hpp"
#include "test/core/wire_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

// -- the registry -----------------------------------------------------------------

TEST_CASE("the wire-format registry lists its formats and parses their specs",
          "[core][wire]") {
  auto names = wire_format_names();
  REQUIRE(names.size() >= 4);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 4)
        == std::vector<std::string>{"bf16", "fp16", "fp32", "int8"});
  struct row {
    const char* spec;
    const char* name;
    bool residual;
  };
  for (auto [spec, name, residual] : {row{"fp32", "fp32", false},
                                      row{"bf16", "bf16", false},
                                      row{"fp16", "fp16", false},
                                      row{"topk:0.01", "topk:0.01", true},
                                      row{"topk:1e-2", "topk:0.01", true},
                                      row{"topk:1.0", "topk:1.0", true},
                                      row{"topk:1", "topk:1", true},
                                      row{"topk:1000", "topk:1000", true},
                                      row{"topk:0042", "topk:42", true}}) {
    INFO(spec);
    auto f = make_wire_format(spec);
    REQUIRE(f != nullptr);
    CHECK(f->name() == name);
    CHECK(f->uses_residual() == residual);
    CHECK(make_wire_format(f->name())->name() == name);
  }
}

TEST_CASE("a bad wire-format spec is an input_error naming it",
          "[core][wire]") {
  for (auto spec :
       {"", ":", "fp64", "FP32", "fp32 ", "bf16:3", "fp16:", "fp32:x", "topk",
        "topk:", "topk:abc", "topk:0", "topk:0.0", "topk:1.5", "topk:-0.1",
        "topk:-3", "topk:+5", "topk: 5", "topk:5 ", "topk:nan", "topk:inf",
        "topk:0x10", "topk:1:2", "topk:4294967296",
        "topk:99999999999999999999999"}) {
    INFO(spec);
    CHECK_THROWS_AS(make_wire_format(spec), input_error);
    CHECK_THROWS_WITH(make_wire_format(spec),
                      Catch::Contains(std::string{"\""} + spec + "\""));
  }
  CHECK_THROWS_WITH(make_wire_format("fp64"),
                    Catch::Contains("known: bf16, fp16, fp32, int8"));
}

TEST_CASE("a program can register its own wire format, and remove it",
          "[core][wire]") {
  auto fp32 = make_wire_format("fp32");
  struct cleanup {
    ~cleanup() {
      unregister_wire_format("test_plain");
    }
  } remove_when_done;
  register_wire_format("test_plain", [fp32](const std::string& spec,
                                            const auto& arg) {
    if (arg)
      throw input_error("wire format \"" + spec + "\": no argument");
    return fp32;
  });
  auto names = wire_format_names();
  CHECK(std::find(names.begin(), names.end(), "test_plain") != names.end());
  CHECK(make_wire_format("test_plain") == fp32);
  CHECK_THROWS_AS(make_wire_format("test_plain:1"), input_error);
  auto any = [fp32](const std::string&, const auto&) { return fp32; };
  CHECK_THROWS_AS(register_wire_format("test_plain", any),
                  std::invalid_argument);
  CHECK_THROWS_AS(register_wire_format("bf16", any), std::invalid_argument);
  CHECK_THROWS_AS(register_wire_format("", any), std::invalid_argument);
  CHECK_THROWS_AS(register_wire_format("a:b", any), std::invalid_argument);
  CHECK_THROWS_AS(register_wire_format("test_empty", {}),
                  std::invalid_argument);
  CHECK(wire_format_names().size() == names.size());
  CHECK(unregister_wire_format("test_plain"));
  CHECK_THROWS_AS(make_wire_format("test_plain"), input_error);
  CHECK_FALSE(unregister_wire_format("test_plain"));
  CHECK_FALSE(unregister_wire_format("fp32")); // built in
  CHECK(make_wire_format("fp32") != nullptr);
}

// -- sizes ------------------------------------------------------------------------

TEST_CASE("an encoded tensor has the documented size in bytes",
          "[core][wire]") {
  struct row {
    const char* spec;
    size_t n;
    size_t k;
    size_t bytes;
  };
  for (auto [spec, n, k, bytes] :
       {row{"fp32", 1000, 1000, 4000}, row{"bf16", 1000, 1000, 2000},
        row{"fp16", 1000, 1000, 2000}, row{"fp32", 0, 0, 0},
        row{"bf16", 7, 7, 14}, row{"topk:10", 1000, 10, 80},
        row{"topk:1000", 1000, 1000, 8000}, row{"topk:0.01", 1000, 10, 80},
        row{"topk:0.01", 10, 1, 8}, row{"topk:0.5", 3, 2, 16},
        row{"topk:1.0", 5, 5, 40}, row{"topk:0.5", 0, 0, 0},
        row{"int8", 0, 0, 0}, row{"int8", 1, 1, 5}, row{"int8", 256, 256, 260},
        row{"int8", 257, 257, 265}, row{"int8", 1000, 1000, 1016}}) {
    INFO(spec << " n = " << n);
    auto f = make_wire_format(spec);
    CHECK(f->encoded_bytes(n) == bytes);
    auto xs = random_values(n, -3, 3, 7);
    std::vector<float> residual(n, 0.0f);
    encoded_tensor enc;
    f->encode(xs.data(), n, enc, residual.data());
    CHECK(enc.n == n);
    CHECK(enc.k == k);
    CHECK(enc.bytes.size() == bytes);
  }
}

TEST_CASE("a top-k count larger than the tensor is an input_error and changes "
          "nothing",
          "[core][wire]") {
  auto f = make_wire_format("topk:10");
  CHECK_THROWS_WITH(f->encoded_bytes(5),
                    Catch::Contains("\"topk:10\"")
                      && Catch::Contains("larger than the tensor (5 floats)"));
  std::vector<float> xs{1, 2, 3, 4, 5};
  std::vector<float> residual{0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  encoded_tensor enc;
  enc.n = 99;
  CHECK_THROWS_AS(f->encode(xs.data(), xs.size(), enc, residual.data()),
                  input_error);
  CHECK(enc.n == 99);
  CHECK(residual == std::vector<float>(5, 0.5f));
}

// -- fp32, bf16, fp16 -------------------------------------------------------------

TEST_CASE("fp32 round trips every float bit for bit", "[core][wire]") {
  ieee_denormals ieee;
  auto xs = random_values(1000, -149, 127, 1);
  xs.insert(xs.end(), {0.0f, -0.0f, inf, -inf, qnan, -qnan, 1e-45f,
                       std::numeric_limits<float>::max()});
  auto ys = round_trip(*make_wire_format("fp32"), xs);
  for (size_t i = 0; i < xs.size(); ++i)
    CHECK(bits_of(ys[i]) == bits_of(xs[i]));
}

TEST_CASE("bf16 round trips normal floats within a relative error of 2^-8",
          "[core][wire]") {
  auto f = make_wire_format("bf16");
  auto xs = random_values(100000, -126, 127, 2);
  auto ys = round_trip(*f, xs);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    worst = std::max(worst, std::fabs(double{ys[i]} - xs[i])
                              / std::fabs(xs[i]));
  CHECK(worst <= std::ldexp(1.0, -8));
  CHECK(worst > std::ldexp(1.0, -9)); // it does round
  // Ties go to the even neighbour: 1 + 2^-8 lies halfway between 1 and
  // 1 + 2^-7, 1 + 3 * 2^-8 between 1 + 2^-7 and 1 + 2^-6.
  auto ties = round_trip(*f, {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                              1.0f + 0x1p-8f + 0x1p-20f});
  CHECK(ties == std::vector<float>{1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f});
}

TEST_CASE("bf16 keeps zeros, infinities, NaN, subnormals and the largest "
          "floats",
          "[core][wire]") {
  ieee_denormals ieee;
  auto f = make_wire_format("bf16");
  const float bf16_max = 0x1.FEp127f; // 0x7f7f << 16
  const float fmax = std::numeric_limits<float>::max();
  auto ys = round_trip(*f, {0.0f, -0.0f, inf, -inf, qnan, -qnan, bf16_max,
                            fmax, -fmax, 0x1p-126f, -0x1p-126f});
  CHECK(bits_of(ys[0]) == bits_of(0.0f));
  CHECK(bits_of(ys[1]) == bits_of(-0.0f));
  CHECK(ys[2] == inf);
  CHECK(ys[3] == -inf);
  CHECK(std::isnan(ys[4]));
  CHECK(std::isnan(ys[5]));
  CHECK(ys[6] == bf16_max);
  CHECK(ys[7] == bf16_max); // saturates instead of becoming inf
  CHECK(ys[8] == -bf16_max);
  CHECK(std::fabs(double{ys[7]} - fmax) <= std::ldexp(fmax, -8));
  CHECK(ys[9] == 0x1p-126f);
  CHECK(ys[10] == -0x1p-126f);
  // Subnormal floats: an absolute error of at most 2^-134.
  auto xs = random_values(10000, -149, -127, 3);
  auto zs = round_trip(*f, xs);
  for (size_t i = 0; i < xs.size(); ++i)
    REQUIRE(std::fabs(double{zs[i]} - xs[i]) <= std::ldexp(1.0, -134));
}

TEST_CASE("fp16 round trips floats in half's normal range within a relative "
          "error of 2^-11",
          "[core][wire]") {
  auto f = make_wire_format("fp16");
  auto xs = random_values(100000, -14, 15, 4);
  for (auto& x : xs)
    x = std::clamp(x, -65504.0f, 65504.0f);
  auto ys = round_trip(*f, xs);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    worst = std::max(worst, std::fabs(double{ys[i]} - xs[i])
                              / std::fabs(xs[i]));
  CHECK(worst <= std::ldexp(1.0, -11));
  CHECK(worst > std::ldexp(1.0, -12));
  // Below 2^-14 (half's subnormals): an absolute error of at most 2^-25.
  auto small = random_values(10000, -40, -15, 5);
  auto zs = round_trip(*f, small);
  for (size_t i = 0; i < small.size(); ++i)
    REQUIRE(std::fabs(double{zs[i]} - small[i]) <= std::ldexp(1.0, -25));
}

TEST_CASE("fp16 keeps zeros, infinities, NaN and subnormals, and saturates "
          "beyond 65504",
          "[core][wire]") {
  ieee_denormals ieee;
  auto f = make_wire_format("fp16");
  std::vector<float> xs{0.0f,     -0.0f,    inf,       -inf,     qnan,
                        65504.0f, 65519.0f, 65520.0f,  1e10f,    -1e10f,
                        0x1p-14f, 0x1p-24f, 0x1p-25f,  0x1.8p-25f, -1e-30f,
                        std::numeric_limits<float>::max(), 1e-45f};
  auto ys = round_trip(*f, xs);
  CHECK(bits_of(ys[0]) == bits_of(0.0f));
  CHECK(bits_of(ys[1]) == bits_of(-0.0f));
  CHECK(ys[2] == inf);
  CHECK(ys[3] == -inf);
  CHECK(std::isnan(ys[4]));
  CHECK(ys[5] == 65504.0f);
  CHECK(ys[6] == 65504.0f);
  CHECK(ys[7] == 65504.0f); // would round to inf
  CHECK(ys[8] == 65504.0f);
  CHECK(ys[9] == -65504.0f);
  CHECK(ys[10] == 0x1p-14f);  // smallest normal half
  CHECK(ys[11] == 0x1p-24f);  // smallest subnormal half
  CHECK(ys[12] == 0.0f);      // halfway to 2^-24: ties to even (0)
  CHECK(ys[13] == 0x1p-24f);
  CHECK(bits_of(ys[14]) == bits_of(-0.0f));
  CHECK(ys[15] == 65504.0f);
  CHECK(bits_of(ys[16]) == bits_of(0.0f));
}

TEST_CASE("bf16 and fp16 convert a value alone as they do in a long tensor",
          "[core][wire]") {
  // Long tensors convert 8 values per instruction, a tail of fewer than 8
  // one at a time: both must give the same bytes.
  ieee_denormals ieee;
  auto xs = random_values(4096, -30, 20, 12);
  auto wide = random_values(4096, -149, 127, 13);
  xs.insert(xs.end(), wide.begin(), wide.end());
  for (int e = -26; e <= 16; ++e) // halfway cases of both formats
    for (float m : {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-11f,
                    1.0f + 3 * 0x1p-11f})
      xs.push_back(std::ldexp(m, e));
  xs.insert(xs.end(), {0.0f, -0.0f, inf, -inf, 65504.0f, 65520.0f, 1e30f,
                       std::numeric_limits<float>::max(), 1e-45f});
  for (auto spec : {"bf16", "fp16"}) {
    INFO(spec);
    auto f = make_wire_format(spec);
    encoded_tensor all;
    f->encode(xs.data(), xs.size(), all, nullptr);
    encoded_tensor one;
    for (size_t i = 0; i < xs.size(); ++i) {
      f->encode(&xs[i], 1, one, nullptr);
      REQUIRE(std::memcmp(one.bytes.data(), all.bytes.data() + 2 * i, 2) == 0);
    }
    // Every 16-bit pattern decodes alike in bulk and alone.
    encoded_tensor patterns{65536, 65536, {}};
    patterns.bytes.resize(2 * 65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      auto h16 = static_cast<uint16_t>(h);
      std::memcpy(patterns.bytes.data() + 2 * h, &h16, 2);
    }
    std::vector<float> bulk(65536);
    f->decode(patterns, bulk.data(), bulk.size());
    for (uint32_t h = 0; h < 65536; ++h) {
      encoded_tensor single{1, 1, {}};
      single.bytes.assign(patterns.bytes.begin() + 2 * h,
                          patterns.bytes.begin() + 2 * h + 2);
      float x = 0;
      f->decode(single, &x, 1);
      if (std::isnan(x))
        REQUIRE(std::isnan(bulk[h]));
      else
        REQUIRE(bits_of(x) == bits_of(bulk[h]));
    }
  }
}
