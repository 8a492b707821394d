// Plain stochastic gradient descent (tf.keras.optimizers.SGD, momentum 0).

#include <fmt/format.h>

#include "core/rules/rules.hpp"

namespace actorps::detail {

namespace {

/// w -= lr * g. No slots, no settings but the learning rate.
class sgd final : public update_rule {
public:
  explicit sgd(float lr) : lr_(lr) {
    // nop
  }

  const std::string& name() const override {
    static const std::string str = "sgd";
    return str;
  }

  size_t slot_count() const override {
    return 0;
  }

  void apply(float* w_ptr, float* const*, const float* g_ptr, size_t n,
             uint64_t) const override {
    ensure_flush_denormals();
    // Settings as locals captured by value: the compiler keeps them in
    // registers instead of reloading them after every store (a float store
    // may alias a float member).
    const float lr = lr_;
    for_each_block(w_ptr, n, [=](size_t off, Eigen::Index len, auto size) {
      constexpr int s = decltype(size)::value;
      block_map<s> w{w_ptr + off, len};
      const_block_map<s> g{g_ptr + off, len};
      w -= lr * g;
    });
  }

  std::string describe() const override {
    return fmt::format("sgd learning_rate {}", lr_);
  }

private:
  float lr_;
};

} // namespace

std::unique_ptr<update_rule> make_sgd(const optimizer_config& cfg,
                                      const std::string& section) {
  rule_params p{cfg, section, "sgd"};
  p.finish();
  return std::make_unique<sgd>(cfg.learning_rate);
}

} // namespace actorps::detail
