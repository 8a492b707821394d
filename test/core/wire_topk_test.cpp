// Top-k with error feedback (core/wire/topk.cpp), pushes decoded before
// they are applied, and malformed encoded tensors from a peer.

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

// -- top-k with error feedback --------------------------------------------------

TEST_CASE("top-k sends exactly the k largest |g + residual| and keeps the rest "
          "as the residual",
          "[core][wire]") {
  const size_t n = 10000;
  for (auto spec : {"topk:0.01", "topk:1", "topk:777", "topk:1.0"}) {
    INFO(spec);
    auto f = make_wire_format(spec);
    auto g = random_values(n, -10, 5, 6);
    auto old_residual = random_values(n, -12, 3, 7);
    auto residual = old_residual;
    encoded_tensor enc;
    f->encode(g.data(), n, enc, residual.data());
    size_t k = f->encoded_bytes(n) / 8;
    REQUIRE(enc.k == k);
    std::vector<float> decoded(n, 42.0f);
    f->decode(enc, decoded.data(), n);
    float smallest_sent = inf;
    float largest_kept = 0;
    size_t sent = 0;
    for (size_t i = 0; i < n; ++i) {
      auto acc = g[i] + old_residual[i];
      // Exactly, element by element: the sent value is moved, not recomputed.
      REQUIRE(residual[i] + decoded[i] == acc);
      REQUIRE((decoded[i] == 0.0f || residual[i] == 0.0f));
      if (decoded[i] != 0.0f) {
        ++sent;
        smallest_sent = std::min(smallest_sent, std::fabs(acc));
      } else {
        largest_kept = std::max(largest_kept, std::fabs(acc));
      }
    }
    CHECK(sent == k);
    CHECK(smallest_sent >= largest_kept);
  }
}

TEST_CASE("top-k chooses the entries the definition names, small tensors and "
          "large, ties and special values included",
          "[core][wire]") {
  // Above 2^15 floats the selection goes through a histogram first.
  for (size_t n : {size_t{1000}, size_t{100000}}) {
    std::vector<std::pair<const char*, std::vector<float>>> inputs;
    inputs.emplace_back("random", random_values(n, -30, 30, 10));
    std::vector<float> ties(n), equal(n, 1.0f), one_bucket(n), special;
    for (size_t i = 0; i < n; ++i) {
      ties[i] = static_cast<float>(i % 5) * 0.25f - 0.5f; // zeros too
      one_bucket[i] = 1.0f + static_cast<float>(i % 100) * 0x1p-20f;
    }
    special = random_values(n, -5, 5, 11);
    for (size_t i = 0; i < n; i += n / 7) {
      special[i] = i % 2 ? qnan : -inf;
      special[i + 1] = 0.0f;
      special[i + 2] = inf;
    }
    inputs.emplace_back("ties", ties);
    inputs.emplace_back("equal", equal);
    inputs.emplace_back("one bucket", one_bucket);
    inputs.emplace_back("special", special);
    for (auto& [what, xs] : inputs) {
      // 2n/5: exactly the entries above a bucket in "ties".
      for (size_t k : {size_t{1}, n / 3, 2 * n / 5, n - 1, n}) {
        INFO(what << ", n = " << n << ", k = " << k);
        auto f = make_wire_format("topk:" + std::to_string(k));
        encoded_tensor enc;
        f->encode(xs.data(), n, enc, nullptr);
        REQUIRE(sent_indices(enc) == reference_top_k(xs, k));
      }
    }
  }
}

TEST_CASE("top-k breaks ties by the lower index and always sends NaN",
          "[core][wire]") {
  auto f = make_wire_format("topk:3");
  std::vector<float> g{1, -1, 1, -1, 1, -1, 1};
  std::vector<float> decoded(g.size());
  encoded_tensor enc;
  f->encode(g.data(), g.size(), enc, nullptr);
  f->decode(enc, decoded.data(), decoded.size());
  CHECK(decoded == std::vector<float>{1, -1, 1, 0, 0, 0, 0});
  encoded_tensor again;
  f->encode(g.data(), g.size(), again, nullptr);
  CHECK(again.bytes == enc.bytes);
  std::vector<float> with_nan{5, -inf, 7, qnan, 1, 2, 3};
  f->encode(with_nan.data(), with_nan.size(), enc, nullptr);
  f->decode(enc, decoded.data(), decoded.size());
  CHECK(std::isnan(decoded[3]));
  CHECK(decoded[1] == -inf);
  CHECK(decoded[2] == 7.0f);
  CHECK(decoded[0] == 0.0f);
}

TEST_CASE("top-k error feedback sends every entry eventually and loses nothing",
          "[core][wire]") {
  // Integer gradients: every sum below is exact in float.
  const size_t n = 8;
  std::vector<float> g{1, -2, 3, -4, 5, -6, 7, -8};
  std::vector<float> residual(n, 0.0f);
  std::vector<float> sent_sum(n, 0.0f);
  std::vector<float> decoded(n);
  std::vector<bool> ever_sent(n, false);
  auto f = make_wire_format("topk:1");
  encoded_tensor enc;
  const int steps = 100;
  for (int t = 0; t < steps; ++t) {
    f->encode(g.data(), n, enc, residual.data());
    f->decode(enc, decoded.data(), n);
    for (size_t i = 0; i < n; ++i) {
      sent_sum[i] += decoded[i];
      if (decoded[i] != 0.0f)
        ever_sent[i] = true;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    INFO("entry " << i);
    CHECK(ever_sent[i]);
    CHECK(sent_sum[i] + residual[i] == steps * g[i]);
    CHECK(std::fabs(residual[i]) < std::fabs(steps * g[i]) / 4);
  }
  // Without a residual the small entries are dropped every time.
  f->encode(g.data(), n, enc, nullptr);
  f->decode(enc, decoded.data(), n);
  CHECK(decoded == std::vector<float>{0, 0, 0, 0, 0, 0, 0, -8});
}

// -- decoded pushes ---------------------------------------------------------------

TEST_CASE("a decoded push moves the parameters as the uncompressed one does, "
          "within the format's error",
          "[core][wire]") {
  const size_t n = 5000;
  const float lr = 0.1f;
  auto init = random_values(n, -4, 1, 8);
  auto g = random_values(n, -20, 4, 9);
  optimizer_config cfg;
  cfg.learning_rate = lr;
  struct row {
    const char* spec;
    double rel; // bound on |decoded - g| / |g|
  };
  for (auto [spec, rel] : {row{"fp32", 0.0}, row{"bf16", 0x1p-8},
                           row{"fp16", 0x1p-11}, row{"topk:1.0", 0.0}}) {
    INFO(spec);
    dense_region plain{make_update_rule(cfg)};
    dense_region coded{make_update_rule(cfg)};
    plain.append(init.data(), n);
    coded.append(init.data(), n);
    auto f = make_wire_format(spec);
    std::vector<float> residual(n, 0.0f);
    encoded_tensor enc;
    f->encode(g.data(), n, enc, residual.data());
    std::vector<float> decoded(n);
    f->decode(enc, decoded.data(), n);
    plain.apply(g.data());
    coded.apply(decoded.data());
    for (size_t i = 0; i < n; ++i) {
      auto diff = std::fabs(double{plain.values()[i]} - coded.values()[i]);
      // The format's error times the learning rate, plus the roundings of
      // lr * g and of the new value on both sides.
      auto bound = lr * (rel + 0x1p-23) * std::fabs(g[i])
                   + std::ldexp(std::fabs(plain.values()[i]), -23);
      REQUIRE(diff <= bound);
    }
  }
}

// -- malformed messages -----------------------------------------------------------

TEST_CASE("a malformed encoded tensor is an input_error and writes nothing",
          "[core][wire]") {
  const size_t n = 6;
  std::vector<float> g{1, -2, 3, -4, 5, -6};
  auto write_index = [](encoded_tensor& e, size_t j, uint32_t index) {
    std::memcpy(e.bytes.data() + 8 * j, &index, sizeof(index));
  };
  struct row {
    const char* spec;
    const char* what;
    void (*spoil)(encoded_tensor&);
  };
  auto rows = {
    row{"fp32", "n too small", [](encoded_tensor& e) { e.n -= 1; }},
    row{"fp32", "n too large", [](encoded_tensor& e) { e.n += 1; }},
    row{"fp32", "k differs", [](encoded_tensor& e) { e.k -= 1; }},
    row{"fp32", "a byte more", [](encoded_tensor& e) { e.bytes.push_back(0); }},
    row{"bf16", "a byte less", [](encoded_tensor& e) { e.bytes.pop_back(); }},
    row{"bf16", "n differs", [](encoded_tensor& e) { e.n = 3; }},
    row{"fp16", "fp32's bytes", [](encoded_tensor& e) { e.bytes.resize(24); }},
    row{"fp16", "no bytes", [](encoded_tensor& e) { e.bytes.clear(); }},
    row{"topk:2", "n differs", [](encoded_tensor& e) { e.n = 7; }},
    row{"topk:2", "k without bytes", [](encoded_tensor& e) { e.k = 3; }},
    row{"topk:2", "k > n",
        [](encoded_tensor& e) {
          e.k = 7;
          e.bytes.resize(56);
        }},
    row{"topk:2", "a byte less", [](encoded_tensor& e) { e.bytes.pop_back(); }},
    row{"topk:2", "index == n",
        [](encoded_tensor& e) {
          uint32_t i = 6;
          std::memcpy(e.bytes.data() + 8, &i, 4);
        }},
    row{"topk:2", "index far out",
        [](encoded_tensor& e) {
          uint32_t i = 0xffffffffu;
          std::memcpy(e.bytes.data(), &i, 4);
        }},
  };
  for (auto [spec, what, spoil] : rows) {
    INFO(spec << ": " << what);
    auto f = make_wire_format(spec);
    encoded_tensor enc;
    f->encode(g.data(), n, enc, nullptr);
    spoil(enc);
    std::vector<float> out(n, 42.0f);
    CHECK_THROWS_AS(f->decode(enc, out.data(), n), input_error);
    CHECK_THROWS_WITH(f->decode(enc, out.data(), n),
                      Catch::Contains(std::string{"\""} + spec + "\""));
    CHECK(out == std::vector<float>(n, 42.0f));
  }
  // Repeated and decreasing indices (topk:2 sends indices 4 and 5).
  auto f = make_wire_format("topk:2");
  for (auto [first, second] : {std::pair{4u, 4u}, std::pair{5u, 4u}}) {
    encoded_tensor enc;
    f->encode(g.data(), n, enc, nullptr);
    write_index(enc, 0, first);
    write_index(enc, 1, second);
    std::vector<float> out(n, 42.0f);
    CHECK_THROWS_WITH(f->decode(enc, out.data(), n),
                      Catch::Contains("indices must increase strictly"));
    CHECK(out == std::vector<float>(n, 42.0f));
  }
  // A peer's fewer entries (another k) are fine: k <= n, sizes agree.
  encoded_tensor one;
  make_wire_format("topk:1")->encode(g.data(), n, one, nullptr);
  std::vector<float> out(n, 42.0f);
  f->decode(one, out.data(), n);
  CHECK(out == std::vector<float>{0, 0, 0, 0, 0, -6});
}
