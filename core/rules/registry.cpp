// The update-rule registry: one line per rule. A new rule is one file in
// core/rules/ plus one line here (and its factory's declaration in rules.hpp).

#include "core/rules/rules.hpp"

namespace actorps::detail {

namespace {

const rule_entry registry[] = {
  {"sgd", make_sgd},
  {"momentum", make_momentum},
  {"adagrad", make_adagrad},
  {"adam", make_adam},
  // Its weights are recomputed from its accumulators at every step.
  {"ftrl", make_ftrl, {/*accepts_scaled_step*/ false}},
};

} // namespace

rule_list registered_rules() noexcept {
  return {registry, sizeof(registry) / sizeof(registry[0])};
}

} // namespace actorps::detail
