#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace actorps {

/// Which update rule a parameter server applies, and its settings, as the
/// job config names them (the `optimizer` and `table_optimizer` sections).
/// `type` is a name in the update-rule registry; `params` holds every other
/// field of the section (numbers; booleans as 0 or 1), which the rule itself
/// checks (an unknown or out-of-range field is an input_error naming it).
struct optimizer_config {
  /// Registry name: "sgd", "momentum", "adagrad", "adam", "ftrl", ...
  std::string type = "sgd";
  /// Step size. Units: parameter units per gradient unit.
  float learning_rate = 0.01f;
  /// Rule-specific settings by field name (e.g. "beta1" -> 0.9).
  std::map<std::string, double> params;
  /// Staleness-aware step (Zhang et al., "Staleness-aware Async-SGD", IJCAI
  /// 2016): a parameter server divides the change an update makes by the
  /// push's staleness tau (its clock at arrival minus the clock the worker
  /// read; 1 when tau is 0), i.e. learning_rate / tau for that step. Exact
  /// for sgd, adagrad and adam (their change is learning_rate times a term
  /// free of it); for momentum the velocity keeps the whole step. Not for
  /// ftrl (its weights are recomputed from its accumulators): refused.
  bool staleness_aware = false;
  /// Whether staleness_aware was chosen (config, flag, code); if not, a
  /// job's default applies (resolve_staleness_aware, core/job_config.hpp).
  bool staleness_aware_chosen = false;
};

/// An elementwise update rule: the values of some parameters and their
/// optimizer slots advance by one step given a gradient.
///
/// A rule is immutable and holds only its settings: the caller owns the
/// parameters, the slots and the step count. A parameter server applies a
/// rule in two ways with the same code:
/// - to a dense region (every dense shard it holds, one contiguous buffer),
///   with one step count for the region;
/// - to single rows of an embedding table, each with its own step count
///   ("lazy" rules: only the rows a push touches move, and a row's Adam bias
///   correction uses the number of updates that row has seen).
/// Thread-safe (const); apply() may be called from several threads on
/// disjoint parameters.
class update_rule {
public:
  virtual ~update_rule();

  /// The rule's registry name ("adam").
  virtual const std::string& name() const = 0;

  /// Slots kept per parameter (momentum 1, adagrad 1, adam 2, ftrl 2).
  virtual size_t slot_count() const = 0;

  /// Initial value of slot `i` (e.g. Adagrad's initial accumulator).
  virtual float slot_init(size_t i) const;

  /// Applies step number `t` (1 for the first update these parameters see;
  /// t >= 1) to `n` parameters: `w[j]` moves given gradient `g[j]`;
  /// `slots[s][j]` is slot s of parameter j (slot_count() pointers, each to
  /// n floats; not read when slot_count() is 0). Units of `g`:
  /// d(loss)/d(parameter), not yet scaled by the learning rate. Any n and
  /// any float alignment; no allocation (cheap enough to call once per
  /// 16-float embedding row: about 8-22 ns).
  /// Side effect: turns on flush-to-zero / denormals-are-zero for the calling
  /// thread (see flush_denormals).
  virtual void apply(float* w, float* const* slots, const float* g, size_t n,
                     uint64_t t) const
    = 0;

  /// The rule and every setting as canonical text, e.g. "adam learning_rate
  /// 0.001 beta1 0.9 beta2 0.999 epsilon 1e-07" (job fingerprints, logs).
  virtual std::string describe() const = 0;
};

/// Builds the rule `cfg` names from the registry (core/rules/registry.cpp;
/// one file per rule in core/rules/). Rules, settings and defaults are
/// Keras' (tf.keras.optimizers), so a TensorFlow user gets the same numbers:
/// - sgd:      w -= lr g. No settings.
/// - momentum: v = m v - lr g; w += v (nesterov: w += m v - lr g).
///             momentum 0.9 [0, 0.999999], nesterov 0 (0 or 1).
/// - adagrad:  a += g^2; w -= lr g / (sqrt(a) + eps) (Duchi et al., JMLR
///             2011). initial_accumulator 0.1 [0, 1e6], epsilon 1e-7 [0, 1].
/// - adam:     Kingma & Ba, ICLR 2015, Keras' form with step t.
///             beta1 0.9, beta2 0.999 (both [0, 0.999999]), epsilon 1e-7.
/// - ftrl:     FTRL-Proximal (McMahan et al., KDD 2013), Keras' form with
///             learning_rate_power -0.5. initial_accumulator 0.1, l1 0,
///             l2 0, beta 0 (all [0, 1e6]).
/// The formulas are written out next to each rule in core/rules/NAME.cpp.
/// @param section  the config section, for messages ("optimizer" or
///                 "table_optimizer").
/// @throws input_error "SECTION.type: unknown update rule \"x\" (known: ...)",
///         "SECTION.FIELD: unknown field for adam",
///         "SECTION.FIELD: V is out of range [lo, hi]",
///         "SECTION.nesterov: V must be 0 or 1" or
///         "SECTION.learning_rate: V is out of range (0, 1000000]".
std::unique_ptr<update_rule> make_update_rule(const optimizer_config& cfg,
                                              const std::string& section
                                              = "optimizer");

/// The names the registry knows, sorted: the built-in rules and those added
/// with register_update_rule.
std::vector<std::string> update_rule_names();

/// What a rule declares about itself in the registry, beside its factory:
/// properties a job config checks by the rule's name, without building it.
struct update_rule_traits {
  /// Whether the rule takes a staleness-aware step (optimizer_config::
  /// staleness_aware: the change a step makes scaled by 1 / tau). False for
  /// a rule whose weights are recomputed from its slots at every step
  /// (ftrl), so that the next step undoes the scale: a job refuses
  /// staleness_aware for it and does not turn it on by default
  /// (resolve_staleness_aware, core/job_config.hpp).
  bool accepts_scaled_step = true;
};

/// Whether the rule `cfg` names takes a staleness-aware step (its
/// update_rule_traits); false for a name the registry does not know (which
/// make_update_rule refuses). Thread-safe.
bool accepts_scaled_step(const optimizer_config& cfg);

/// Builds a rule from its config section (`section` names it in messages:
/// "optimizer" or "table_optimizer"). Checks every field of cfg.params and
/// throws input_error naming "SECTION.FIELD" for an unknown or out-of-range
/// one.
using update_rule_factory = std::function<std::unique_ptr<update_rule>(
  const optimizer_config& cfg, const std::string& section)>;

/// Adds the rule `name` to the registry at run time, so that a program built
/// on the library (an outside project) can name its own rule in
/// optimizer.type or table_optimizer.type without editing actorps. Call it
/// before the job config is validated, in every process of a cluster (each
/// parameter server builds its rules itself). `traits` declares what the job
/// config checks by name (see update_rule_traits). Thread-safe.
/// @throws std::invalid_argument "register_update_rule(\"NAME\"): ..." if
///         `name` is empty or taken (built in or registered before), or
///         `make` is empty; nothing changes then.
void register_update_rule(const std::string& name, update_rule_factory make,
                          update_rule_traits traits = {});

/// Removes the rule `name` that register_update_rule added (built-in rules
/// are never removed); its name is free again. Rules built from it live on.
/// Thread-safe. Returns whether it was registered.
bool unregister_update_rule(const std::string& name);

/// Turns on flush-to-zero and denormals-are-zero (x86 MXCSR) for the calling
/// thread. Adam's and momentum's slots decay geometrically where gradients
/// are zero (e.g. the always-blank border pixels of Fashion-MNIST) into the
/// denormal range, where x86 arithmetic is ~100x slower; values that small
/// cannot change a float32 weight anyway.
void flush_denormals();

/// Scales the change of a step: w[j] = before[j] + step_scale * (w[j] -
/// before[j]) for j < n (a staleness-aware step, see optimizer_config).
void scale_step(float* w, const float* before, size_t n, float step_scale);

/// Staleness-aware step scale (Zhang et al., IJCAI 2016): 1 / tau for a
/// push of staleness tau >= 1, 1 for tau = 0.
inline float staleness_step_scale(uint64_t staleness) {
  return staleness <= 1 ? 1.0f : 1.0f / static_cast<float>(staleness);
}

/// The parameters, slots and step count of one contiguous dense region (all
/// dense shards of one parameter server, one after another) under one rule.
/// Not thread-safe; owned by one parameter server. The values are
/// copy-on-write: snapshot() hands them out without a copy, and the next
/// change while a snapshot is held goes to a copy of its own.
class dense_region {
public:
  dense_region() = default;

  explicit dense_region(std::shared_ptr<const update_rule> rule);

  /// Appends `n` parameters with initial values `init` (n floats; slots
  /// start at the rule's slot_init). Returns the offset of the first one.
  /// Existing values and slots keep their values (the buffers may move).
  uint64_t append(const float* init, size_t n);

  /// Applies one step with gradient `g` (size() floats) to every parameter:
  /// steps() + 1, then the rule with t = steps(). `step_scale` (in (0, 1])
  /// multiplies the change the step makes to the values (the slots take the
  /// whole step): 1 / tau for a staleness-aware step, see optimizer_config.
  /// @pre constructed with a rule; every slot buffer has size() floats
  ///      (slots() may be replaced, e.g. from a checkpoint, at that size).
  void apply(const float* g, float step_scale = 1.0f);

  /// Starts a step that arrives in runs (a push in pieces, one per layer;
  /// actors/ps_replica.hpp, partial_push): steps() + 1, returned as the
  /// step number every run of it passes to apply_run().
  uint64_t begin_step() noexcept {
    return ++steps_;
  }

  /// Applies step `t` (from begin_step()) to the `n` parameters from
  /// `offset` with gradient `g` (n floats), as apply() does to all of them;
  /// the step count stays.
  /// @pre offset + n <= size(); constructed with a rule.
  void apply_run(const float* g, uint64_t offset, size_t n, uint64_t t,
                 float step_scale = 1.0f);

  size_t size() const noexcept {
    return values_ ? values_->size() : 0;
  }

  /// Steps applied so far (Adam's t).
  uint64_t steps() const noexcept {
    return steps_;
  }

  void set_steps(uint64_t n) noexcept {
    steps_ = n;
  }

  /// The values, to change: first a copy of their own if a snapshot still
  /// holds them.
  std::vector<float>& values() {
    unshare();
    return *values_;
  }

  const std::vector<float>& values() const noexcept;

  /// The values as they are now, without a copy; later changes to the
  /// region leave the returned buffer as it is. A pull reply to another
  /// process sends it from the network thread (actors/messages.hpp,
  /// pull_reply::shared_values); copying 1M floats into the reply took as
  /// long as serialising them (each ~13% of a loopback pull's profile).
  /// Another thread may read and release the snapshot.
  std::shared_ptr<const std::vector<float>> snapshot() const {
    return values_;
  }

  /// The slot buffers, slot_count() of them, each size() floats.
  std::vector<std::vector<float>>& slots() noexcept {
    return slots_;
  }

  const std::vector<std::vector<float>>& slots() const noexcept {
    return slots_;
  }

  const update_rule& rule() const {
    return *rule_;
  }

private:
  /// Makes values_ a buffer that no snapshot holds (copying it if one does).
  void unshare();

  std::shared_ptr<const update_rule> rule_;
  std::shared_ptr<std::vector<float>> values_; // null: empty
  std::vector<std::vector<float>> slots_;
  std::vector<float*> slot_ptrs_;
  std::vector<float> before_; // values before a scaled step
  uint64_t steps_ = 0;
};

} // namespace actorps
