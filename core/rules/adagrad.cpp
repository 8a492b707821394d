// Adagrad: Duchi, Hazan & Singer, "Adaptive Subgradient Methods for Online
// Learning and Stochastic Optimization", JMLR 2011, in the form of
// tf.keras.optimizers.Adagrad.

#include <fmt/format.h>

#include "core/rules/rules.hpp"

namespace actorps::detail {

namespace {

/// One slot, the accumulator a (starts at initial_accumulator). Per element:
///   a += g^2
///   w -= lr * g / (sqrt(a) + epsilon)
/// Settings: initial_accumulator (default 0.1, [0, 1e6]; Keras'
/// initial_accumulator_value) and epsilon (default 1e-7, [0, 1]). With both
/// at 0 a parameter whose gradients have all been 0 gets 0 / 0 = NaN, as in
/// Keras.
class adagrad final : public update_rule {
public:
  adagrad(float lr, float init, float eps) : lr_(lr), init_(init), eps_(eps) {
    // nop
  }

  const std::string& name() const override {
    static const std::string str = "adagrad";
    return str;
  }

  size_t slot_count() const override {
    return 1;
  }

  float slot_init(size_t) const override {
    return init_;
  }

  void apply(float* w_ptr, float* const* slots, const float* g_ptr, size_t n,
             uint64_t) const override {
    ensure_flush_denormals();
    // Settings and pointers as locals captured by value (kept in registers,
    // see sgd.cpp).
    const float lr = lr_;
    const float eps = eps_;
    float* a_ptr = slots[0];
    for_each_block(w_ptr, n, [=](size_t off, Eigen::Index len, auto size) {
      constexpr int s = decltype(size)::value;
      block_map<s> w{w_ptr + off, len};
      block_map<s> a{a_ptr + off, len};
      const_block_map<s> g{g_ptr + off, len};
      a += g.square();
      w -= lr * g / (a.sqrt() + eps);
    });
  }

  std::string describe() const override {
    return fmt::format("adagrad learning_rate {} initial_accumulator {} "
                       "epsilon {}",
                       lr_, init_, eps_);
  }

private:
  float lr_;
  float init_;
  float eps_;
};

} // namespace

std::unique_ptr<update_rule> make_adagrad(const optimizer_config& cfg,
                                          const std::string& section) {
  rule_params p{cfg, section, "adagrad"};
  auto init = p.get("initial_accumulator", 0.1, 0.0, 1e6);
  auto eps = p.get("epsilon", 1e-7, 0.0, 1.0);
  p.finish();
  return std::make_unique<adagrad>(cfg.learning_rate, init, eps);
}

} // namespace actorps::detail
