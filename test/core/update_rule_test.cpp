#include "core/update_rule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#if defined(__SSE__)
#  include <xmmintrin.h>
#endif

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "test/core/update_rule_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

// Every expected value below is the update rule written out by hand for that
// step (in double), so a wrong rule, a wrong slot or a wrong step count shows
// up as a mismatch in the first element it touches.

// -- the rules, step by step ---------------------------------------------------

TEST_CASE("sgd subtracts the learning rate times the gradient",
          "[core][update_rule]") {
  auto region = make_region("sgd", 0.1f, {1.0f, -2.0f, 0.5f});
  CHECK(region.slots().empty());
  // step 1: g = (0.5, -1, 2)
  std::vector<float> g1{0.5f, -1.0f, 2.0f};
  region.apply(g1.data());
  check_values(region.values(),
               {1.0 - 0.1 * 0.5, -2.0 + 0.1 * 1.0, 0.5 - 0.1 * 2.0});
  // step 2: g = (-1, 0.5, 0)
  std::vector<float> g2{-1.0f, 0.5f, 0.0f};
  region.apply(g2.data());
  check_values(region.values(), {0.95 + 0.1 * 1.0, -1.9 - 0.1 * 0.5, 0.3});
  CHECK(region.steps() == 2);
}

TEST_CASE("momentum accumulates a velocity v = m v - lr g and adds it to the "
          "weights",
          "[core][update_rule]") {
  auto region = make_region("momentum", 0.1f, {1.0f, -2.0f},
                            {{"momentum", 0.9}});
  REQUIRE(region.slots().size() == 1);
  auto& v = region.slots()[0];
  std::vector<float> g1{1.0f, -2.0f};
  std::vector<float> g2{0.5f, 1.0f};
  std::vector<float> zero{0.0f, 0.0f};
  // step 1: v = -0.1 g1 = (-0.1, 0.2); w = (0.9, -1.8)
  region.apply(g1.data());
  check_values(v, {-0.1, 0.2});
  check_values(region.values(), {0.9, -1.8});
  // step 2: v = 0.9 (-0.1, 0.2) - 0.1 (0.5, 1) = (-0.14, 0.08);
  //         w = (0.9 - 0.14, -1.8 + 0.08)
  region.apply(g2.data());
  check_values(v, {-0.14, 0.08});
  check_values(region.values(), {0.76, -1.72});
  // step 3, no gradient: v = 0.9 v = (-0.126, 0.072); the weights coast on.
  region.apply(zero.data());
  check_values(v, {-0.126, 0.072});
  check_values(region.values(), {0.76 - 0.126, -1.72 + 0.072});
}

TEST_CASE("nesterov momentum adds m v - lr g with the updated velocity",
          "[core][update_rule]") {
  auto region = make_region("momentum", 0.1f, {1.0f, -2.0f},
                            {{"momentum", 0.9}, {"nesterov", 1}});
  auto& v = region.slots()[0];
  std::vector<float> g1{1.0f, -2.0f};
  std::vector<float> g2{0.5f, 1.0f};
  std::vector<float> zero{0.0f, 0.0f};
  // step 1: v = (-0.1, 0.2); w += 0.9 v - 0.1 g1 = (-0.19, 0.38)
  region.apply(g1.data());
  check_values(v, {-0.1, 0.2});
  check_values(region.values(), {1.0 - 0.19, -2.0 + 0.38});
  // step 2: v = (-0.14, 0.08); w += 0.9 v - 0.1 g2 = (-0.176, -0.028)
  region.apply(g2.data());
  check_values(v, {-0.14, 0.08});
  check_values(region.values(), {0.81 - 0.176, -1.62 - 0.028});
  // step 3: v = (-0.126, 0.072); w += 0.9 v = (-0.1134, 0.0648)
  region.apply(zero.data());
  check_values(region.values(), {0.634 - 0.1134, -1.648 + 0.0648});
}

TEST_CASE("adagrad divides by the root of the accumulated squared gradients, "
          "starting from initial_accumulator",
          "[core][update_rule]") {
  const double eps = 1e-7;
  auto region = make_region("adagrad", 0.1f, {1.0f, -1.0f, 0.0f},
                            {{"initial_accumulator", 0.1}, {"epsilon", eps}});
  REQUIRE(region.slots().size() == 1);
  auto& a = region.slots()[0];
  check_values(a, {0.1, 0.1, 0.1});
  // step 1: g = (0.3, -0.4, 0); a = 0.1 + g^2 = (0.19, 0.26, 0.1)
  std::vector<float> g1{0.3f, -0.4f, 0.0f};
  region.apply(g1.data());
  check_values(a, {0.19, 0.26, 0.1});
  double w0 = 1.0 - 0.1 * 0.3 / (std::sqrt(0.19) + eps);
  double w1 = -1.0 + 0.1 * 0.4 / (std::sqrt(0.26) + eps);
  check_values(region.values(), {w0, w1, 0.0});
  // step 2: g = (0.3, 1, -2); a = (0.28, 1.26, 4.1)
  std::vector<float> g2{0.3f, 1.0f, -2.0f};
  region.apply(g2.data());
  check_values(a, {0.28, 1.26, 4.1});
  check_values(region.values(), {w0 - 0.1 * 0.3 / (std::sqrt(0.28) + eps),
                                 w1 - 0.1 * 1.0 / (std::sqrt(1.26) + eps),
                                 0.0 + 0.1 * 2.0 / (std::sqrt(4.1) + eps)});
}

TEST_CASE("adam's first step moves every weight by about lr * sign(g)",
          "[core][update_rule]") {
  // t = 1: m = (1 - b1) g, v = (1 - b2) g^2,
  // alpha = lr sqrt(1 - b2) / (1 - b1), so alpha m / sqrt(v) = lr sign(g).
  auto region = make_region("adam", 0.1f, {1.0f, 1.0f, 1.0f, 1.0f});
  std::vector<float> g{0.01f, -1.0f, 100.0f, 0.0f};
  region.apply(g.data());
  auto& w = region.values();
  CHECK(w[0] == Approx(0.9).epsilon(1e-3));
  CHECK(w[1] == Approx(1.1).epsilon(1e-3));
  CHECK(w[2] == Approx(0.9).epsilon(1e-3));
  CHECK(w[3] == 1.0f); // no gradient, no move
  CHECK(region.steps() == 1);
}

TEST_CASE("adam follows Keras' bias-corrected rule over several steps",
          "[core][update_rule]") {
  // The decays as the float32 the rule holds: 1 - 0.999f is 1.3e-5 off
  // 0.001, more than the tolerance below.
  const double lr = 0.1, b1 = 0.9f, b2 = 0.999f, eps = 1e-7;
  auto region = make_region("adam", 0.1f, {1.0f, -1.0f, 0.5f});
  REQUIRE(region.slots().size() == 2);
  const std::vector<std::vector<float>> grads{
    {0.5f, -2.0f, 0.0f}, {0.5f, 1.0f, 4.0f}, {-0.25f, 1.0f, 0.0f}};
  std::vector<double> m(3, 0.0), v(3, 0.0), expected{1.0, -1.0, 0.5};
  for (size_t t = 1; t <= grads.size(); ++t) {
    INFO("step " << t);
    auto& g = grads[t - 1];
    double alpha = lr * std::sqrt(1.0 - std::pow(b2, double(t)))
                   / (1.0 - std::pow(b1, double(t)));
    for (size_t i = 0; i < 3; ++i) {
      m[i] = b1 * m[i] + (1.0 - b1) * g[i];
      v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
      expected[i] -= alpha * m[i] / (std::sqrt(v[i]) + eps);
    }
    region.apply(g.data());
    check_values(region.slots()[0], m);
    check_values(region.slots()[1], v);
    check_values(region.values(), expected);
    if (t == 2) {
      // Spelled out for element 0 after two steps of g = 0.5:
      // m = 0.9 * 0.05 + 0.1 * 0.5, v = 0.999 * 0.00025 + 0.001 * 0.25,
      // w = 0.9 - 0.1 sqrt(1 - 0.999^2) / (1 - 0.9^2) * m / sqrt(v)
      CHECK(region.slots()[0][0] == Approx(0.095));
      CHECK(region.slots()[1][0] == Approx(0.00049975).epsilon(1e-4));
      CHECK(region.values()[0]
            == Approx(0.9 - 0.1 * std::sqrt(0.001999) / 0.19 * 0.095
                              / std::sqrt(0.00049975))
                 .epsilon(1e-4));
    }
  }
  CHECK(region.steps() == 3);
}

TEST_CASE("adam corrects the bias of each row by the step count the caller "
          "passes, so rows with different update counts move differently",
          "[core][update_rule]") {
  // Two embedding rows with fresh slots take the same gradient g = (1, -2);
  // row a is at its first update (t = 1), row b at its third (t = 3, e.g. a
  // restored row). After the moment updates m = 0.1 g, v = 0.001 g^2 in
  // both, so the step is alpha_t * 0.1 / sqrt(0.001) * sign(g) (eps aside):
  //   t = 1: alpha = lr sqrt(0.001) / 0.1            -> step = lr = 0.1
  //   t = 3: alpha = lr sqrt(1 - 0.999^3) / (1 - 0.9^3)
  //               = lr * 0.0547449 / 0.271 = lr * 0.2020106
  //                                                  -> step = lr * 0.6388136
  auto rule = make_rule("adam", 0.1f);
  const std::vector<float> g{1.0f, -2.0f};
  std::vector<float> wa{0.0f, 0.0f}, ma(2, 0.0f), va(2, 0.0f);
  std::vector<float> wb{0.0f, 0.0f}, mb(2, 0.0f), vb(2, 0.0f);
  float* slots_a[] = {ma.data(), va.data()};
  float* slots_b[] = {mb.data(), vb.data()};
  rule->apply(wa.data(), slots_a, g.data(), 2, 1);
  rule->apply(wb.data(), slots_b, g.data(), 2, 3);
  // The moments do not depend on t ...
  CHECK(ma == mb);
  CHECK(va == vb);
  // ... the bias correction does. Tolerance: eps = 1e-7 next to
  // sqrt(v) = 0.0316 |g|, and the float32 decays.
  check_values(wa, {-0.1, 0.1});
  check_values(wb, {-0.06388136, 0.06388136});
  CHECK(wa[0] == Approx(-0.1).epsilon(1e-4));
  CHECK(wb[0] == Approx(-0.06388136).epsilon(1e-4));
}

TEST_CASE("ftrl follows Keras' FTRL-Proximal rule without regularization",
          "[core][update_rule]") {
  // lr = 0.1, n0 = initial_accumulator = 0.1, z0 = 0, l1 = l2 = beta = 0,
  // so w = -z / (sqrt(n) / lr) = -lr z / sqrt(n).
  auto region = make_region("ftrl", 0.1f, {0.5f},
                            {{"initial_accumulator", 0.1}});
  REQUIRE(region.slots().size() == 2);
  auto& n = region.slots()[0];
  auto& z = region.slots()[1];
  check_values(n, {0.1});
  check_values(z, {0.0});
  // step 1, g = 1: n = 1.1; sigma = (sqrt 1.1 - sqrt 0.1) / 0.1 = 7.3258108;
  //   z = 0 + 1 - 7.3258108 * 0.5 = -2.6629054; w = 0.1 * 2.6629054 /
  //   sqrt 1.1 = 0.2538981
  std::vector<float> g{1.0f};
  region.apply(g.data());
  double s1 = (std::sqrt(1.1) - std::sqrt(0.1)) / 0.1;
  double z1 = 1.0 - s1 * 0.5;
  double w1 = -0.1 * z1 / std::sqrt(1.1);
  check_values(n, {1.1});
  check_values(z, {z1});
  check_values(region.values(), {w1});
  CHECK(region.values()[0] == Approx(0.2538981).epsilon(1e-5));
  // step 2, g = -0.5: n = 1.35; sigma = (sqrt 1.35 - sqrt 1.1) / 0.1
  //   = 1.1308616; z = -2.6629054 - 0.5 - 1.1308616 * 0.2538981
  //   = -3.4500290; w = 0.1 * 3.4500290 / sqrt 1.35 = 0.2969312
  g[0] = -0.5f;
  region.apply(g.data());
  double s2 = (std::sqrt(1.35) - std::sqrt(1.1)) / 0.1;
  double z2 = z1 - 0.5 - s2 * w1;
  double w2 = -0.1 * z2 / std::sqrt(1.35);
  check_values(n, {1.35});
  check_values(z, {z2});
  check_values(region.values(), {w2});
  CHECK(region.values()[0] == Approx(0.2969312).epsilon(1e-5));
  // step 3, g = 0.25: n = 1.4125; z = -3.2789872; w = 0.2758961
  g[0] = 0.25f;
  region.apply(g.data());
  double s3 = (std::sqrt(1.4125) - std::sqrt(1.35)) / 0.1;
  double z3 = z2 + 0.25 - s3 * w2;
  check_values(n, {1.4125});
  check_values(z, {z3});
  check_values(region.values(), {-0.1 * z3 / std::sqrt(1.4125)});
  CHECK(region.values()[0] == Approx(0.2758961).epsilon(1e-5));
}

TEST_CASE("ftrl keeps a weight exactly zero while |z| <= l1 and shrinks it "
          "by l1 beyond",
          "[core][update_rule]") {
  // lr = 0.1, n0 = 0.1, l1 = 1, w0 = 0.
  auto region = make_region("ftrl", 0.1f, {0.0f},
                            {{"initial_accumulator", 0.1}, {"l1", 1.0}});
  auto& w = region.values();
  auto& z = region.slots()[1];
  std::vector<float> g{0.5f};
  // step 1, g = 0.5: z = 0.5 - sigma * 0 = 0.5 <= 1 -> w = 0 exactly
  region.apply(g.data());
  check_values(z, {0.5});
  CHECK(w[0] == 0.0f);
  // step 2, g = 0.4: z = 0.9 <= 1 -> w = 0 exactly (n = 0.51)
  g[0] = 0.4f;
  region.apply(g.data());
  check_values(z, {0.9});
  CHECK(w[0] == 0.0f);
  // step 3, g = 0.3: z = 1.2 > 1, n = 0.6 ->
  //   w = -(1.2 - 1) / (sqrt 0.6 / 0.1) = -0.2 / 7.7459667 = -0.0258199
  g[0] = 0.3f;
  region.apply(g.data());
  check_values(z, {1.2});
  double w3 = -(1.2 - 1.0) / (std::sqrt(0.6) / 0.1);
  check_values(w, {w3});
  CHECK(w[0] == Approx(-0.0258199).epsilon(1e-5));
  // step 4, g = -0.5: n = 0.85, sigma = (sqrt 0.85 - sqrt 0.6) / 0.1
  //   = 1.4735778; z = 1.2 - 0.5 - 1.4735778 * (-0.0258199) = 0.7380476
  //   <= 1 -> w = 0 exactly again
  g[0] = -0.5f;
  region.apply(g.data());
  double s4 = (std::sqrt(0.85) - std::sqrt(0.6)) / 0.1;
  check_values(z, {0.7 - s4 * w3});
  CHECK(z[0] == Approx(0.7380476).epsilon(1e-5));
  CHECK(w[0] == 0.0f);
}

TEST_CASE("ftrl keeps a weight exactly zero while z >= -l1 and shrinks it "
          "by l1 below, on the negative side too",
          "[core][update_rule]") {
  // FTRL-Proximal (McMahan et al. 2013, Algorithm 1) per coordinate, with
  // Keras' 2 l2 for the paper's lambda2 (see core/rules/ftrl.cpp):
  //   w = 0                                           if |z| <= l1
  //   w = -(z - sgn(z) l1) / ((beta + sqrt n) / lr + 2 l2)   otherwise
  // with z < 0: sgn(z) = -1, so w = -(z + l1) / ... > 0.
  // lr = 0.1, n0 = 0.1, l1 = 1, l2 = 0.5, beta = 1, w0 = 0; the first three
  // gradients are those of the test above with their signs turned, so z
  // goes down.
  auto region = make_region("ftrl", 0.1f, {0.0f},
                            {{"initial_accumulator", 0.1},
                             {"l1", 1.0},
                             {"l2", 0.5},
                             {"beta", 1.0}});
  auto& w = region.values();
  auto& n = region.slots()[0];
  auto& z = region.slots()[1];
  auto denominator = [](double acc) {
    return (1.0 + std::sqrt(acc)) / 0.1 + 2 * 0.5;
  };
  std::vector<float> g{-0.5f};
  // step 1, g = -0.5: n = 0.35, z = -0.5 >= -1 -> w = 0 exactly
  region.apply(g.data());
  check_values(n, {0.35});
  check_values(z, {-0.5});
  CHECK(w[0] == 0.0f);
  // step 2, g = -0.4: n = 0.51, z = -0.9 >= -1 -> w = 0 exactly
  g[0] = -0.4f;
  region.apply(g.data());
  check_values(z, {-0.9});
  CHECK(w[0] == 0.0f);
  // step 3, g = -0.3: n = 0.6, z = -1.2 < -1 ->
  //   w = -(-1.2 + 1) / ((1 + sqrt 0.6) / 0.1 + 1) = 0.2 / 18.7459667
  //     = 0.0106690
  g[0] = -0.3f;
  region.apply(g.data());
  check_values(n, {0.6});
  check_values(z, {-1.2});
  double w3 = -(-1.2 + 1.0) / denominator(0.6);
  check_values(w, {w3});
  CHECK(w[0] == Approx(0.0106690).epsilon(1e-5));
  // step 4, g = -2: n = 4.6, sigma = (sqrt 4.6 - sqrt 0.6) / 0.1
  //   = 13.7016439; z = -1.2 - 2 - 13.7016439 * 0.0106690 = -3.3461823
  //   < -1 -> w = 2.3461823 / ((1 + sqrt 4.6) / 0.1 + 1) = 0.0723068
  g[0] = -2.0f;
  region.apply(g.data());
  double s4 = (std::sqrt(4.6) - std::sqrt(0.6)) / 0.1;
  double z4 = -3.2 - s4 * w3;
  check_values(z, {z4});
  double w4 = -(z4 + 1.0) / denominator(4.6);
  check_values(w, {w4});
  CHECK(z[0] == Approx(-3.3461823).epsilon(1e-5));
  CHECK(w[0] == Approx(0.0723068).epsilon(1e-5));
  // step 5, g = 1.5: n = 6.85, sigma = (sqrt 6.85 - sqrt 4.6) / 0.1
  //   = 4.7248941; z = -3.3461823 + 1.5 - 4.7248941 * 0.0723068
  //   = -2.1878242 < -1 -> w = 1.1878242 / ((1 + sqrt 6.85) / 0.1 + 1)
  //   = 0.0319544
  g[0] = 1.5f;
  region.apply(g.data());
  double s5 = (std::sqrt(6.85) - std::sqrt(4.6)) / 0.1;
  double z5 = z4 + 1.5 - s5 * w4;
  check_values(z, {z5});
  check_values(w, {-(z5 + 1.0) / denominator(6.85)});
  CHECK(w[0] == Approx(0.0319544).epsilon(1e-5));
}

TEST_CASE("ftrl adds beta / lr and twice l2 to the denominator, as Keras does",
          "[core][update_rule]") {
  // lr = 0.1, n0 = 0.1, l2 = 0.5, beta = 1, w0 = 0:
  //   w = -z / ((beta + sqrt n) / lr + 2 l2) = -z / (10 (1 + sqrt n) + 1)
  auto region = make_region("ftrl", 0.1f, {0.0f},
                            {{"l2", 0.5}, {"beta", 1.0}});
  auto& w = region.values();
  std::vector<float> g{1.0f};
  // step 1, g = 1: n = 1.1, z = 1 -> w = -1 / (20.488088 + 1) = -0.0465374
  region.apply(g.data());
  double w1 = -1.0 / ((1.0 + std::sqrt(1.1)) / 0.1 + 2 * 0.5);
  check_values(w, {w1});
  CHECK(w[0] == Approx(-0.0465374).epsilon(1e-5));
  // step 2, g = -2: n = 5.1, sigma = (sqrt 5.1 - sqrt 1.1) / 0.1 = 12.095091;
  //   z = 1 - 2 - 12.095091 * (-0.0465374) = -0.4371258;
  //   w = 0.4371258 / (10 * 3.2583180 + 1) = 0.0130162
  g[0] = -2.0f;
  region.apply(g.data());
  double z2 = 1.0 - 2.0 - (std::sqrt(5.1) - std::sqrt(1.1)) / 0.1 * w1;
  check_values(region.slots()[1], {z2});
  check_values(w, {-z2 / ((1.0 + std::sqrt(5.1)) / 0.1 + 2 * 0.5)});
  CHECK(w[0] == Approx(0.0130162).epsilon(1e-5));
}

TEST_CASE("ftrl with no accumulator and no gradient leaves a weight at zero, "
          "not NaN",
          "[core][update_rule]") {
  // n = 0, z = 0: the denominator sqrt(0) / lr is 0; Keras' clip form would
  // compute 0 / 0, TensorFlow's kernel (and this rule) select 0.
  auto region = make_region("ftrl", 0.1f, {0.0f, 1.0f},
                            {{"initial_accumulator", 0.0}});
  std::vector<float> g{0.0f, 0.0f};
  region.apply(g.data());
  CHECK(region.values()[0] == 0.0f);
  CHECK(region.values()[1] == 0.0f); // z = 0: the weight is a function of z
}
