// SGD with momentum, classic or Nesterov, in the form of
// tf.keras.optimizers.SGD(momentum=m, nesterov=...).

#include <fmt/format.h>

#include "core/rules/rules.hpp"

namespace actorps::detail {

namespace {

/// One slot, the velocity v (starts at 0). Per element, with learning rate
/// lr and momentum m:
///   v = m * v - lr * g
///   w += v                      (classic)
///   w += m * v - lr * g         (nesterov, with the updated v)
/// Settings: momentum (default 0.9, [0, 0.999999]), nesterov (0 or 1,
/// default 0), as Keras' SGD.
class momentum final : public update_rule {
public:
  momentum(float lr, float m, bool nesterov)
    : lr_(lr), m_(m), nesterov_(nesterov) {
    // nop
  }

  const std::string& name() const override {
    static const std::string str = "momentum";
    return str;
  }

  size_t slot_count() const override {
    return 1;
  }

  void apply(float* w_ptr, float* const* slots, const float* g_ptr, size_t n,
             uint64_t) const override {
    ensure_flush_denormals();
    // Settings and pointers as locals captured by value (kept in registers,
    // see sgd.cpp).
    const float lr = lr_;
    const float m = m_;
    float* v_ptr = slots[0];
    if (nesterov_)
      for_each_block(w_ptr, n, [=](size_t off, Eigen::Index len, auto size) {
        constexpr int s = decltype(size)::value;
        block_map<s> w{w_ptr + off, len};
        block_map<s> v{v_ptr + off, len};
        const_block_map<s> g{g_ptr + off, len};
        v = m * v - lr * g;
        w += m * v - lr * g;
      });
    else
      for_each_block(w_ptr, n, [=](size_t off, Eigen::Index len, auto size) {
        constexpr int s = decltype(size)::value;
        block_map<s> w{w_ptr + off, len};
        block_map<s> v{v_ptr + off, len};
        const_block_map<s> g{g_ptr + off, len};
        v = m * v - lr * g;
        w += v;
      });
  }

  std::string describe() const override {
    return fmt::format("momentum learning_rate {} momentum {} nesterov {}",
                       lr_, m_, nesterov_ ? 1 : 0);
  }

private:
  float lr_;
  float m_;
  bool nesterov_;
};

} // namespace

std::unique_ptr<update_rule> make_momentum(const optimizer_config& cfg,
                                           const std::string& section) {
  rule_params p{cfg, section, "momentum"};
  auto m = p.get("momentum", 0.9, 0.0, 0.999999);
  auto nesterov = p.get_flag("nesterov", false);
  p.finish();
  return std::make_unique<momentum>(cfg.learning_rate, m, nesterov);
}

} // namespace actorps::detail
