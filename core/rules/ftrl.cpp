// FTRL-Proximal: McMahan et al., "Ad Click Prediction: a View from the
// Trenches", KDD 2013, Algorithm 1, in the form of tf.keras.optimizers.Ftrl
// (keras/src/optimizers/ftrl.py update_step; TensorFlow's ApplyFtrl kernel)
// with learning_rate_power = -0.5 and no l2 shrinkage.

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/rules/rules.hpp"

namespace actorps::detail {

namespace {

/// Two slots: n, the sum of squared gradients (starts at
/// initial_accumulator), and z, the "linear" term (starts at 0). Per element,
/// with learning rate lr (the paper's alpha):
///   n' = n + g^2
///   sigma = (sqrt(n') - sqrt(n)) / lr
///   z += g - sigma * w                        (w before this step)
///   n = n'
///   w = 0                                              if |z| <= l1
///   w = -(z - sign(z) l1) / ((beta + sqrt(n)) / lr + 2 l2)   otherwise
/// The denominator is Keras': sqrt(n) / lr + 2 (l2 + beta / (2 lr)). The
/// paper's is (beta + sqrt(n)) / alpha + lambda2; Keras' (and TensorFlow's)
/// l2_regularization_strength counts twice because its penalty is
/// l2 * w^2, whose derivative is 2 l2 w. The weights are a function of
/// (z, n) alone, so w is exactly 0 while |z| <= l1 (sparsity).
/// Settings (Keras' names without "_regularization_strength" / "_value"):
/// initial_accumulator (0.1, [0, 1e6]), l1, l2, beta (0, [0, 1e6] each).
/// Where n = 0 and z = 0 (initial_accumulator 0, no gradient yet) w is 0, as
/// in TensorFlow's kernel, not Keras' 0 / 0.
class ftrl final : public update_rule {
public:
  ftrl(float lr, float init, float l1, float l2, float beta)
    : lr_(lr), init_(init), l1_(l1), l2_(l2), beta_(beta) {
    // nop
  }

  const std::string& name() const override {
    static const std::string str = "ftrl";
    return str;
  }

  size_t slot_count() const override {
    return 2;
  }

  float slot_init(size_t i) const override {
    return i == 0 ? init_ : 0.0f;
  }

  void apply(float* w_ptr, float* const* slots, const float* g_ptr, size_t n,
             uint64_t) const override {
    ensure_flush_denormals();
    // Keras' clip form, not a select (Eigen 3.4 does not vectorise select:
    // 4x slower on a dense region): where |z| <= l1, clip(z) - z is exactly
    // 0. The denominator is 0 only where n = 0 and beta = l2 = 0, so every
    // gradient so far was 0 and z = 0; max(.., FLT_MIN) makes that
    // 0 / FLT_MIN = 0 instead of Keras' 0 / 0 = NaN.
    // Settings and pointers as locals captured by value (kept in registers,
    // see sgd.cpp).
    const float lr = lr_, l1 = l1_, l2x2 = 2.0f * l2_, beta = beta_;
    const float tiny = std::numeric_limits<float>::min();
    float* n_ptr = slots[0];
    float* z_ptr = slots[1];
    for_each_block(w_ptr, n, [=](size_t off, Eigen::Index len, auto size) {
      constexpr int s = decltype(size)::value;
      block_map<s> w{w_ptr + off, len};
      block_map<s> acc{n_ptr + off, len};
      block_map<s> z{z_ptr + off, len};
      const_block_map<s> g{g_ptr + off, len};
      // Stack temporaries (at most 16 floats): each root once.
      block<s> root_old = acc.sqrt();
      acc += g.square();
      block<s> root_new = acc.sqrt();
      z += g - (root_new - root_old) / lr * w;
      w = (z.min(l1).max(-l1) - z)
          / ((root_new + beta) / lr + l2x2).max(tiny);
    });
  }

  std::string describe() const override {
    return fmt::format("ftrl learning_rate {} initial_accumulator {} l1 {} "
                       "l2 {} beta {}",
                       lr_, init_, l1_, l2_, beta_);
  }

private:
  float lr_;
  float init_;
  float l1_;
  float l2_;
  float beta_;
};

} // namespace

std::unique_ptr<update_rule> make_ftrl(const optimizer_config& cfg,
                                       const std::string& section) {
  rule_params p{cfg, section, "ftrl"};
  auto init = p.get("initial_accumulator", 0.1, 0.0, 1e6);
  auto l1 = p.get("l1", 0.0, 0.0, 1e6);
  auto l2 = p.get("l2", 0.0, 0.0, 1e6);
  auto beta = p.get("beta", 0.0, 0.0, 1e6);
  p.finish();
  return std::make_unique<ftrl>(cfg.learning_rate, init, l1, l2, beta);
}

} // namespace actorps::detail
