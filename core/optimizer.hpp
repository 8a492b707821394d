#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace actorps {

/// Server-side optimizer settings. The update rules and defaults are Keras'
/// (`tf.keras.optimizers`), so that a TensorFlow user gets the same numbers.
struct optimizer_config {
  enum class kind { sgd, momentum, adagrad, adam };
  kind type = kind::sgd;
  /// Step size (all kinds). Units: parameter units per gradient unit.
  float learning_rate = 0.01f;
  /// momentum: decay of the velocity, in [0, 1).
  float momentum = 0.9f;
  /// momentum: use Nesterov's look-ahead form.
  bool nesterov = false;
  /// adam: decay of the first and second moment estimates, in [0, 1).
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  /// adagrad, adam: added to the denominator for numerical stability.
  float epsilon = 1e-7f;
  /// adagrad: starting value of the accumulator (Keras: 0.1).
  float initial_accumulator = 0.1f;
};

/// Parses "sgd" | "momentum" | "adagrad" | "adam"; throws input_error.
optimizer_config::kind parse_optimizer_kind(const std::string& name);

/// Returns the name parse_optimizer_kind accepts for `k`.
const char* to_string(optimizer_config::kind k);

/// The optimizer slots of `n` contiguous parameters and the rule that updates
/// them. All four rules are elementwise, so one instance serves every shard of
/// a parameter server laid out in one buffer.
///
/// Rules, for parameter w, gradient g, learning rate lr (t counts applied steps,
/// starting at 1):
/// - sgd:      w -= lr * g
/// - momentum: v = m * v - lr * g; w += v (nesterov: w += m * v - lr * g)
/// - adagrad:  a += g^2; w -= lr * g / (sqrt(a) + eps)   (Duchi et al., 2011)
/// - adam:     m1 = b1 m1 + (1 - b1) g; m2 = b2 m2 + (1 - b2) g^2;
///             w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m1 / (sqrt(m2) + eps)
///             (Kingma & Ba, "Adam: A Method for Stochastic Optimization",
///             2015, in the form of Keras' implementation)
/// Not thread-safe; owned by one parameter server.
class optimizer_state {
public:
  optimizer_state() = default;

  optimizer_state(const optimizer_config& cfg, size_t n);

  /// Grows the slots to `n` parameters (new slots start at the rule's initial
  /// value). Used when a parameter server receives another shard.
  void resize(size_t n);

  /// Applies one step to `w` with gradient `g`, both `size()` floats.
  /// Side effect: turns on flush-to-zero / denormals-are-zero (MXCSR) for the
  /// calling thread, which stays on (see flush_denormals in optimizer.cpp).
  void apply(float* w, const float* g);

  size_t size() const noexcept {
    return n_;
  }

  /// Number of steps applied so far (Adam's t).
  uint64_t steps() const noexcept {
    return steps_;
  }

  /// Sets the step count (restoring a checkpoint).
  void set_steps(uint64_t n) noexcept {
    steps_ = n;
  }

  const optimizer_config& config() const noexcept {
    return cfg_;
  }

  /// The slot buffers (0, 1 or 2 of them, each size() floats), e.g. for
  /// checkpoints: momentum {velocity}, adagrad {accumulator}, adam {m, v}.
  std::vector<std::vector<float>>& slots() noexcept {
    return slots_;
  }

private:
  optimizer_config cfg_;
  size_t n_ = 0;
  uint64_t steps_ = 0;
  std::vector<std::vector<float>> slots_;
};

} // namespace actorps
