// What a rule declares about itself in the registry (update_rule_traits),
// and what the job config does with it: a staleness-aware step is taken,
// refused or chosen by default by the rule's declaration, not its name.

#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/update_rule.hpp"

using namespace actorps;

namespace {

optimizer_config rule_named(const std::string& type) {
  optimizer_config cfg;
  cfg.type = type;
  return cfg;
}

/// Registers `name` as sgd under another name, with `traits`, for the
/// test's life.
struct scoped_rule {
  std::string name;

  scoped_rule(std::string rule_name, update_rule_traits traits)
    : name(std::move(rule_name)) {
    register_update_rule(
      name,
      [](const optimizer_config& cfg, const std::string& section) {
        auto sgd = cfg;
        sgd.type = "sgd";
        return make_update_rule(sgd, section);
      },
      traits);
  }

  ~scoped_rule() {
    unregister_update_rule(name);
  }
};

/// cfg.optimizer's staleness_aware after resolve_staleness_aware, for an
/// async job of 64 workers (where it is on by default).
bool resolved(const std::string& type) {
  auto cfg = parse_job_config(R"({"optimizer": {"type": ")" + type + R"("}})",
                              "test.json");
  cfg.workers = 64;
  cfg.mode = "async";
  resolve_staleness_aware(cfg);
  return cfg.optimizer.staleness_aware;
}

} // namespace

TEST_CASE("every built-in rule but ftrl takes a staleness-aware step",
          "[core][update_rule]") {
  for (auto& name : update_rule_names()) {
    INFO(name);
    CHECK(accepts_scaled_step(rule_named(name)) == (name != "ftrl"));
  }
  CHECK_FALSE(accepts_scaled_step(rule_named("rmsprop"))); // unknown
}

TEST_CASE("a rule's declared traits, not its name, decide whether a job "
          "takes staleness-aware steps with it",
          "[core][update_rule][config]") {
  scoped_rule plain{"test_plain_rule", {}};
  scoped_rule recomputing{"test_recomputing_rule",
                          {/*accepts_scaled_step*/ false}};
  CHECK(accepts_scaled_step(rule_named("test_plain_rule")));
  CHECK_FALSE(accepts_scaled_step(rule_named("test_recomputing_rule")));
  // On by default for a rule that takes it, off for one that does not.
  CHECK(resolved("test_plain_rule"));
  CHECK_FALSE(resolved("test_recomputing_rule"));
  CHECK(resolved("sgd"));
  CHECK_FALSE(resolved("ftrl"));
  // Chosen explicitly: refused, naming the rule, for one that does not.
  auto with_scaled_steps = [](const std::string& type) {
    return R"({"optimizer": {"type": ")" + type
           + R"(", "staleness_aware": true}})";
  };
  CHECK_NOTHROW(parse_job_config(with_scaled_steps("test_plain_rule"),
                                 "test.json"));
  CHECK_THROWS_WITH(parse_job_config(with_scaled_steps(
                                       "test_recomputing_rule"),
                                     "test.json"),
                    Catch::Contains("optimizer.staleness_aware: "
                                    "test_recomputing_rule recomputes"));
  CHECK_THROWS_AS(parse_job_config(with_scaled_steps("ftrl"), "test.json"),
                  input_error);
}
