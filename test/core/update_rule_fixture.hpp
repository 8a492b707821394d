#pragma once

// What the update-rule tests share (update_rule_test.cpp,
// update_rule_region_test.cpp): rules and regions from a name and settings,
// and a comparison with values computed by hand in double.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/update_rule.hpp"

namespace actorps::test {

using param_map = std::map<std::string, double>;

inline std::shared_ptr<const update_rule> make_rule(const std::string& type, float lr,
                                             param_map params = {}) {
  optimizer_config cfg;
  cfg.type = type;
  cfg.learning_rate = lr;
  cfg.params = std::move(params);
  return make_update_rule(cfg);
}

/// A region holding `init` under the rule `type`.
inline dense_region make_region(const std::string& type, float lr,
                         const std::vector<float>& init,
                         param_map params = {}) {
  dense_region region{make_rule(type, lr, std::move(params))};
  region.append(init.data(), init.size());
  return region;
}

/// Compares a float buffer with values computed in double.
inline void check_values(const std::vector<float>& actual,
                  const std::vector<double>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    CHECK(actual[i] == Approx(expected[i]).epsilon(1e-5).margin(1e-7));
  }
}

/// make_update_rule's message for `cfg`, or "" if it accepts it.
inline std::string rejection(const std::string& type, float lr, param_map params,
                      const std::string& section = "optimizer") {
  optimizer_config cfg;
  cfg.type = type;
  cfg.learning_rate = lr;
  cfg.params = std::move(params);
  try {
    make_update_rule(cfg, section);
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}


} // namespace actorps::test
