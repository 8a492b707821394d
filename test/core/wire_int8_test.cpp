// int8 (core/wire/int8.cpp): 8-bit codes per block of 256 floats with one
// scale each, the documented error bound, error feedback that loses
// nothing, non-finite blocks, and malformed payloads from a peer.

#include "core/wire_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "test/core/wire_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

/// The documented bound of entry i: max |x| of its block / 254, plus float
/// rounding of the scale and the product.
float int8_bound(const std::vector<float>& xs, size_t i) {
  auto lo = i / 256 * 256;
  auto hi = std::min(xs.size(), lo + 256);
  float m = 0;
  for (auto j = lo; j < hi; ++j)
    m = std::max(m, std::fabs(xs[j]));
  return m / 254.0f * (1.0f + 1e-5f);
}

float scale_of(const encoded_tensor& enc, size_t b) {
  float s;
  std::memcpy(&s, enc.bytes.data() + b * sizeof(float), sizeof(s));
  return s;
}

} // namespace

TEST_CASE("int8 is in the registry, takes no argument, keeps a residual and "
          "can carry pulls",
          "[core][wire]") {
  auto names = wire_format_names();
  CHECK(std::find(names.begin(), names.end(), "int8") != names.end());
  auto f = make_wire_format("int8");
  CHECK(f->name() == "int8");
  CHECK(f->uses_residual());
  CHECK_FALSE(f->is_sparse());
  CHECK(make_wire_format("topk:1")->is_sparse());
  CHECK_FALSE(make_wire_format("bf16")->is_sparse());
  CHECK_THROWS_AS(make_wire_format("int8:4"), input_error);
  // Its sizes: in wire_format_test.cpp's table of encoded sizes.
}

TEST_CASE("int8 round trips every entry within max |x| of its block / 254 "
          "and sends each block's largest entry exactly",
          "[core][wire]") {
  auto f = make_wire_format("int8");
  // Magnitudes from 2^-20 to 2^6 mixed in every block, a tail block of 83.
  const size_t n = 4 * 256 + 83;
  auto xs = random_values(n, -20, 6, 3);
  auto out = round_trip(*f, xs);
  for (size_t i = 0; i < n; ++i) {
    INFO("i = " << i << " x = " << xs[i]);
    REQUIRE(std::fabs(out[i] - xs[i]) <= int8_bound(xs, i));
  }
  for (size_t b = 0; b * 256 < n; ++b) {
    auto first = xs.begin() + static_cast<long>(b * 256);
    auto last = xs.begin() + static_cast<long>(std::min(n, b * 256 + 256));
    auto big = std::max_element(first, last, [](float a, float c) {
      return std::fabs(a) < std::fabs(c);
    });
    auto i = static_cast<size_t>(big - xs.begin());
    CHECK(out[i] == Approx(xs[i]).epsilon(1e-6));
  }
  // An all-zero block: scale 0, zeros back (signs of -0 aside).
  std::vector<float> zeros(300, 0.0f);
  zeros[299] = -0.0f;
  encoded_tensor enc;
  f->encode(zeros.data(), zeros.size(), enc, nullptr);
  CHECK(scale_of(enc, 0) == 0.0f);
  for (auto y : round_trip(*f, zeros))
    CHECK(y == 0.0f);
  // A block of tiny values (127 / max overflows; a subnormal max is 0 under
  // flush-to-zero): zeros with scale 0, not NaN; the residual keeps them.
  for (float tiny : {1e-38f, 1e-40f}) {
    INFO("tiny = " << tiny);
    std::vector<float> small(10, tiny);
    std::vector<float> r(10, 0.0f);
    f->encode(small.data(), small.size(), enc, r.data());
    CHECK(scale_of(enc, 0) == 0.0f);
    for (auto y : round_trip(*f, small))
      CHECK(y == 0.0f);
    for (auto y : r)
      CHECK(y == tiny);
  }
}

TEST_CASE("int8 error feedback keeps what was not sent: residual + decoded == "
          "g + old residual, and a small steady gradient gets through",
          "[core][wire]") {
  auto f = make_wire_format("int8");
  const size_t n = 1000;
  auto g = random_values(n, -8, 2, 5);
  auto old_residual = random_values(n, -12, -4, 6);
  auto residual = old_residual;
  encoded_tensor enc;
  f->encode(g.data(), n, enc, residual.data());
  std::vector<float> decoded(n);
  f->decode(enc, decoded.data(), n);
  std::vector<float> acc(n);
  for (size_t i = 0; i < n; ++i)
    acc[i] = g[i] + old_residual[i];
  for (size_t i = 0; i < n; ++i) {
    INFO("i = " << i);
    REQUIRE(residual[i] + decoded[i]
            == Approx(acc[i]).margin(std::fabs(acc[i]) * 1e-6f + 1e-12f));
    REQUIRE(std::fabs(residual[i]) <= int8_bound(acc, i));
  }
  // Entry 0 is 1000 times smaller than entry 1 (below one code): without
  // feedback it is never sent; with it, 100 pushes deliver its sum.
  std::vector<float> steady(2);
  steady[0] = 1e-3f;
  steady[1] = 1.0f;
  std::vector<float> r(2, 0.0f), out(2);
  double sent = 0, plain = 0;
  for (int step = 0; step < 100; ++step) {
    f->encode(steady.data(), 2, enc, r.data());
    f->decode(enc, out.data(), 2);
    sent += out[0];
    f->encode(steady.data(), 2, enc, nullptr);
    f->decode(enc, out.data(), 2);
    plain += out[0];
  }
  CHECK(plain == 0.0);
  CHECK(sent + r[0] == Approx(0.1).epsilon(1e-4));
  CHECK(std::fabs(r[0]) <= 1.0f / 254.0f);
}

TEST_CASE("int8: a block with NaN or an infinity decodes to NaN throughout, "
          "the other blocks as usual",
          "[core][wire]") {
  auto f = make_wire_format("int8");
  std::vector<float> xs(512, 0.5f);
  xs[3] = qnan;
  xs[300] = -inf;
  xs[301] = -1.0f;
  encoded_tensor enc;
  std::vector<float> residual(512, 0.0f);
  f->encode(xs.data(), xs.size(), enc, residual.data());
  CHECK(std::isnan(scale_of(enc, 0)));
  CHECK(std::isnan(scale_of(enc, 1)));
  std::vector<float> out(512);
  f->decode(enc, out.data(), out.size());
  CHECK(std::isnan(out[0]));
  CHECK(std::isnan(out[511]));
  xs[300] = 2.0f;
  xs[3] = 0.5f;
  auto ok = round_trip(*f, xs);
  CHECK(ok[300] == Approx(2.0f));
  CHECK(ok[301] == Approx(-1.0f).margin(2.0f / 254));
}

TEST_CASE("a malformed int8 payload is an input_error naming the format and "
          "writes nothing",
          "[core][wire]") {
  auto f = make_wire_format("int8");
  std::vector<float> xs(300, 1.0f);
  encoded_tensor good;
  f->encode(xs.data(), xs.size(), good, nullptr);
  auto refused = [&](encoded_tensor bad, size_t n, const char* says) {
    std::vector<float> out(n, 42.0f);
    try {
      f->decode(bad, out.data(), n);
      FAIL("decoded a malformed payload");
    } catch (const input_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("int8")
                             && Catch::Contains(says));
    }
    CHECK(std::all_of(out.begin(), out.end(),
                      [](float y) { return y == 42.0f; }));
  };
  refused(good, 299, "the tensor has 299 floats");
  auto cut = good;
  cut.bytes.pop_back();
  refused(cut, 300, "bytes");
  for (float s : {-1.0f, inf, -inf}) {
    auto bad = good;
    std::memcpy(bad.bytes.data() + sizeof(float), &s, sizeof(s));
    refused(bad, 300, "block 1 has scale");
  }
}
