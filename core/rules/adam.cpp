// Adam: Kingma & Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015,
// in the form of tf.keras.optimizers.Adam (epsilon added to sqrt(v), bias
// correction folded into the step size).

#include <cmath>

#include <fmt/format.h>

#include "core/rules/rules.hpp"

namespace actorps::detail {

namespace {

/// Two slots, the moment estimates m and v (both start at 0). Step t >= 1:
///   alpha = lr * sqrt(1 - beta2^t) / (1 - beta1^t)      (in double)
///   m = beta1 * m + (1 - beta1) * g
///   v = beta2 * v + (1 - beta2) * g^2
///   w -= alpha * m / (sqrt(v) + epsilon)
/// t is the caller's: a dense region's step count, or the number of updates
/// one embedding row has seen (lazy Adam: each row its own bias correction).
/// Settings: beta1 (0.9, [0, 0.999999]), beta2 (0.999, [0, 0.999999]),
/// epsilon (1e-7, [0, 1]), Keras' defaults. With epsilon 0 a parameter whose
/// gradients have all been 0 gets 0 / 0 = NaN, as in Keras.
class adam final : public update_rule {
public:
  adam(float lr, float b1, float b2, float eps)
    : lr_(lr),
      b1_(b1),
      b2_(b2),
      eps_(eps),
      log_b1_(std::log(double{b1})),
      log_b2_(std::log(double{b2})) {
    // nop
  }

  const std::string& name() const override {
    static const std::string str = "adam";
    return str;
  }

  size_t slot_count() const override {
    return 2;
  }

  void apply(float* w_ptr, float* const* slots, const float* g_ptr, size_t n,
             uint64_t t) const override {
    ensure_flush_denormals();
    // 1 - b^t as -expm1(t log b): one expm1 instead of pow per call (the row
    // path calls this per 16-float row), and no cancellation for small t.
    // For b == 0, log b = -inf and 1 - b^t = 1 for every t >= 1.
    auto td = static_cast<double>(t);
    const auto alpha = static_cast<float>(
      double{lr_} * std::sqrt(-std::expm1(td * log_b2_))
      / -std::expm1(td * log_b1_));
    // Settings and pointers as locals captured by value (kept in registers,
    // see sgd.cpp). The decays' complements in float, as Keras computes them
    // in the variable's dtype.
    const float b1 = b1_, c1 = 1.0f - b1_;
    const float b2 = b2_, c2 = 1.0f - b2_;
    const float eps = eps_;
    float* m_ptr = slots[0];
    float* v_ptr = slots[1];
    for_each_block(w_ptr, n, [=](size_t off, Eigen::Index len, auto size) {
      constexpr int s = decltype(size)::value;
      block_map<s> w{w_ptr + off, len};
      block_map<s> m{m_ptr + off, len};
      block_map<s> v{v_ptr + off, len};
      const_block_map<s> g{g_ptr + off, len};
      m = b1 * m + c1 * g;
      v = b2 * v + c2 * g.square();
      w -= alpha * m / (v.sqrt() + eps);
    });
  }

  std::string describe() const override {
    return fmt::format("adam learning_rate {} beta1 {} beta2 {} epsilon {}",
                       lr_, b1_, b2_, eps_);
  }

private:
  float lr_;
  float b1_;
  float b2_;
  float eps_;
  double log_b1_;
  double log_b2_;
};

} // namespace

std::unique_ptr<update_rule> make_adam(const optimizer_config& cfg,
                                       const std::string& section) {
  rule_params p{cfg, section, "adam"};
  auto b1 = p.get("beta1", 0.9, 0.0, 0.999999);
  auto b2 = p.get("beta2", 0.999, 0.0, 0.999999);
  auto eps = p.get("epsilon", 1e-7, 0.0, 1.0);
  p.finish();
  return std::make_unique<adam>(cfg.learning_rate, b1, b2, eps);
}

} // namespace actorps::detail
