#include "core/update_rule.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/registry.hpp"
#include "core/rules/rules.hpp"

namespace actorps {

// -- update_rule ----------------------------------------------------------------

update_rule::~update_rule() {
  // nop
}

float update_rule::slot_init(size_t) const {
  return 0.0f;
}

// -- registry -------------------------------------------------------------------

namespace {

/// What the registry holds per rule.
struct rule_descriptor {
  update_rule_factory make;
  update_rule_traits traits;
};

/// The built-in rules (core/rules/registry.cpp), then those added at run time.
registry<rule_descriptor>& rules() {
  static registry<rule_descriptor> r{
    "register_update_rule", "rule", detail::registered_rules(),
    [](auto& line) { return rule_descriptor{line.make, line.traits}; }};
  return r;
}

} // namespace

std::unique_ptr<update_rule> make_update_rule(const optimizer_config& cfg,
                                              const std::string& section) {
  if (auto rule = rules().find(cfg.type))
    return rule->make(cfg, section);
  throw input_error(fmt::format("{}.type: unknown update rule \"{}\" (known: "
                                "{})",
                                section, cfg.type, rules().known()));
}

std::vector<std::string> update_rule_names() {
  return rules().names();
}

bool accepts_scaled_step(const optimizer_config& cfg) {
  auto rule = rules().find(cfg.type);
  return rule && rule->traits.accepts_scaled_step;
}

void register_update_rule(const std::string& name, update_rule_factory make,
                          update_rule_traits traits) {
  if (!make)
    throw std::invalid_argument(
      fmt::format("register_update_rule(\"{}\"): empty factory", name));
  rules().add(name, {std::move(make), traits});
}

bool unregister_update_rule(const std::string& name) {
  return rules().remove(name).has_value();
}

void flush_denormals() {
  detail::ensure_flush_denormals();
}

// -- rule_params ----------------------------------------------------------------

namespace detail {

rule_params::rule_params(const optimizer_config& cfg,
                         const std::string& section, const char* rule)
  : cfg_(cfg), section_(section), rule_(rule) {
  // The same upper bound as the job config's other numbers; the lower bound
  // is open: a rate of 0 (or below) would silently train nothing.
  double lr = cfg.learning_rate;
  if (!(lr > 0.0 && lr <= 1e6))
    throw input_error(fmt::format("{}.learning_rate: {} is out of range (0, "
                                  "{}]",
                                  section_, lr, 1e6));
}

float rule_params::get(const char* field, double fallback, double lo,
                       double hi) {
  read_.emplace_back(field);
  auto i = cfg_.params.find(field);
  if (i == cfg_.params.end())
    return static_cast<float>(fallback);
  auto x = i->second;
  if (!(x >= lo && x <= hi)) // NaN fails both
    throw input_error(fmt::format("{}.{}: {} is out of range [{}, {}]",
                                  section_, field, x, lo, hi));
  return static_cast<float>(x);
}

bool rule_params::get_flag(const char* field, bool fallback) {
  read_.emplace_back(field);
  auto i = cfg_.params.find(field);
  if (i == cfg_.params.end())
    return fallback;
  if (i->second != 0.0 && i->second != 1.0)
    throw input_error(fmt::format("{}.{}: {} must be 0 or 1", section_, field,
                                  i->second));
  return i->second == 1.0;
}

void rule_params::finish() const {
  for (auto& kv : cfg_.params)
    if (std::find(read_.begin(), read_.end(), kv.first) == read_.end())
      throw input_error(fmt::format("{}.{}: unknown field for {}", section_,
                                    kv.first, rule_));
}

} // namespace detail

// -- dense_region ---------------------------------------------------------------

dense_region::dense_region(std::shared_ptr<const update_rule> rule)
  : rule_(std::move(rule)) {
  if (rule_) {
    slots_.resize(rule_->slot_count());
    slot_ptrs_.resize(slots_.size(), nullptr);
  }
}

void scale_step(float* w, const float* before, size_t n, float step_scale) {
  for (size_t j = 0; j < n; ++j)
    w[j] = before[j] + step_scale * (w[j] - before[j]);
}

const std::vector<float>& dense_region::values() const noexcept {
  static const std::vector<float> empty;
  return values_ ? *values_ : empty;
}

void dense_region::unshare() {
  if (!values_) {
    values_ = std::make_shared<std::vector<float>>();
  } else if (values_.use_count() == 1) {
    // No snapshot left. The last holder may have read the buffer on another
    // thread; its release (an acq_rel decrement) happens before this fence,
    // so those reads happen before the writes that follow.
    std::atomic_thread_fence(std::memory_order_acquire);
  } else {
    // Only this region hands out references, so the count cannot rise
    // behind our back: a holder's copy needs a second reference already.
    values_ = std::make_shared<std::vector<float>>(*values_);
  }
}

uint64_t dense_region::append(const float* init, size_t n) {
  unshare();
  auto& values = *values_;
  auto offset = values.size();
  values.insert(values.end(), init, init + n);
  for (size_t s = 0; s < slots_.size(); ++s)
    slots_[s].resize(values.size(), rule_->slot_init(s));
  for (size_t s = 0; s < slots_.size(); ++s)
    slot_ptrs_[s] = slots_[s].data();
  return offset;
}

void dense_region::apply(const float* g, float step_scale) {
  assert(rule_ != nullptr);
  // slots() hands out the buffers (checkpoint restore may replace them), so
  // the pointers are taken again here: slot_count() loads, once per push.
  unshare();
  auto& values = *values_;
  for (size_t s = 0; s < slots_.size(); ++s) {
    assert(slots_[s].size() == values.size());
    slot_ptrs_[s] = slots_[s].data();
  }
  ++steps_;
  if (step_scale == 1.0f) {
    rule_->apply(values.data(), slot_ptrs_.data(), g, values.size(), steps_);
    return;
  }
  before_.assign(values.begin(), values.end());
  rule_->apply(values.data(), slot_ptrs_.data(), g, values.size(), steps_);
  scale_step(values.data(), before_.data(), values.size(), step_scale);
}

void dense_region::apply_run(const float* g, uint64_t offset, size_t n,
                             uint64_t t, float step_scale) {
  assert(rule_ != nullptr);
  unshare();
  auto& values = *values_;
  assert(offset + n <= values.size());
  for (size_t s = 0; s < slots_.size(); ++s) {
    assert(slots_[s].size() == values.size());
    slot_ptrs_[s] = slots_[s].data() + offset;
  }
  float* w = values.data() + offset;
  if (step_scale == 1.0f) {
    rule_->apply(w, slot_ptrs_.data(), g, n, t);
    return;
  }
  before_.assign(w, w + n);
  rule_->apply(w, slot_ptrs_.data(), g, n, t);
  scale_step(w, before_.data(), n, step_scale);
}

} // namespace actorps
