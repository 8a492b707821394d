// The run-time registration API next to each fixed registry: models,
// update rules and step functions an outside project adds by name, and
// models and step functions removed again. The models and step functions
// registered here are unregistered when their test ends (the registries
// are global, and registry_test.cpp checks their exact lists in the same
// process).

#include <algorithm>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/update_rule.hpp"
#include "models/mlp.hpp"
#include "models/registry.hpp"
#include "models/step_function.hpp"

using namespace actorps;

namespace {

bool contains(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

double half_loss(const model& net, const model_inputs& in,
                 const example_batch& batch, float* grad,
                 model_workspace& ws) {
  return 0.5 * net.loss_and_gradient(in, batch, grad, ws);
}

/// Unregisters `name` when the test ends, however it ends (also when
/// registering it failed: then unregister finds nothing).
struct scoped_registration {
  std::string name;
  bool (*unregister)(const std::string&);

  ~scoped_registration() {
    unregister(name);
  }
};

} // namespace

TEST_CASE("a registered model is built by name like the built-in ones",
          "[registry][registration]") {
  job_config cfg;
  cfg.model = "test_registered_mlp";
  data_schema schema;
  schema.dense_dim = 3;
  schema.classes = 2;
  CHECK_THROWS_AS(make_model(cfg, schema), input_error);
  scoped_registration cleanup{"test_registered_mlp", unregister_model};
  register_model("test_registered_mlp",
                 [](const job_config&, const data_schema& s) {
                   return std::make_shared<mlp>(
                     std::vector<uint64_t>{s.dense_dim, 4, s.classes});
                 });
  auto net = make_model(cfg, schema);
  CHECK(net->dense_parameters() == 3 * 4 + 4 + 4 * 2 + 2);
  auto names = model_names();
  CHECK(contains(names, "mlp"));
  CHECK(contains(names, "test_registered_mlp"));
  CHECK(std::is_sorted(names.begin(), names.end()));
  // Taken names and empty ones are refused, and nothing changes.
  auto any = [](const job_config&, const data_schema&) {
    return std::shared_ptr<const model>{};
  };
  CHECK_THROWS_AS(register_model("test_registered_mlp", any),
                  std::invalid_argument);
  CHECK_THROWS_AS(register_model("mlp", any), std::invalid_argument);
  CHECK_THROWS_AS(register_model("", any), std::invalid_argument);
  CHECK_THROWS_AS(register_model("test_no_factory", nullptr),
                  std::invalid_argument);
  CHECK(model_names().size() == names.size());
}

TEST_CASE("a registered update rule passes config validation and builds",
          "[registry][registration]") {
  job_config cfg;
  cfg.optimizer.type = "test_registered_sgd";
  auto error = [&] {
    try {
      validate(cfg);
    } catch (const input_error& e) {
      return std::string{e.what()};
    }
    return std::string{};
  };
  CHECK_THAT(error(), Catch::Contains("unknown update rule"));
  scoped_registration cleanup{"test_registered_sgd", unregister_update_rule};
  register_update_rule("test_registered_sgd",
                       [](const optimizer_config& c, const std::string& s) {
                         optimizer_config plain = c;
                         plain.type = "sgd";
                         return make_update_rule(plain, s);
                       });
  CHECK(error().empty());
  auto rule = make_update_rule(cfg.optimizer);
  CHECK(rule->name() == "sgd"); // what the factory built
  CHECK(contains(update_rule_names(), "test_registered_sgd"));
  // An unknown rule's message lists the registered ones too.
  cfg.optimizer.type = "no_such_rule";
  CHECK_THAT(error(), Catch::Contains("test_registered_sgd"));
  auto any = [](const optimizer_config&, const std::string&) {
    return std::unique_ptr<update_rule>{};
  };
  CHECK_THROWS_AS(register_update_rule("adam", any), std::invalid_argument);
  CHECK_THROWS_AS(register_update_rule("test_registered_sgd", any),
                  std::invalid_argument);
  // Removed, it is gone and its name free; a built-in rule is not removed.
  CHECK(unregister_update_rule("test_registered_sgd"));
  CHECK_FALSE(contains(update_rule_names(), "test_registered_sgd"));
  CHECK_FALSE(unregister_update_rule("test_registered_sgd"));
  CHECK_FALSE(unregister_update_rule("adam"));
  CHECK(contains(update_rule_names(), "adam"));
  register_update_rule("test_registered_sgd", any); // the cleanup removes it
}

TEST_CASE("a registered step function is found by name and keeps its name",
          "[registry][registration]") {
  CHECK(find_step_function("test_half_loss") == nullptr);
  std::string name = "test_half_loss";
  scoped_registration cleanup{name, unregister_step_function};
  register_step_function({name.c_str(), false, half_loss});
  name = "changed"; // the registry copied it
  auto* f = find_step_function("test_half_loss");
  REQUIRE(f != nullptr);
  CHECK(std::string{f->name} == "test_half_loss");
  CHECK_FALSE(f->pushes);
  CHECK(f->compute == half_loss);
  CHECK(contains(step_function_names(), "test_half_loss"));
  CHECK(find_step_function("train_step") != nullptr);
  CHECK_THROWS_AS(register_step_function({"train_step", true, half_loss}),
                  std::invalid_argument);
  CHECK_THROWS_AS(register_step_function({"test_half_loss", true, half_loss}),
                  std::invalid_argument);
  CHECK_THROWS_AS(register_step_function({"test_no_compute", true, nullptr}),
                  std::invalid_argument);
  CHECK_THROWS_AS(register_step_function({nullptr, true, half_loss}),
                  std::invalid_argument);
}

TEST_CASE("an unregistered model or step function is gone from its registry "
          "and its name is free again, and built-in ones stay",
          "[registry][registration]") {
  const auto models = model_names();
  const auto steps = step_function_names();
  job_config cfg;
  cfg.model = "test_unregistered_mlp";
  data_schema schema;
  schema.dense_dim = 3;
  schema.classes = 2;
  auto factory = [](uint64_t hidden) {
    return [hidden](const job_config&, const data_schema& s) {
      return std::make_shared<mlp>(
        std::vector<uint64_t>{s.dense_dim, hidden, s.classes});
    };
  };
  {
    scoped_registration cleanup{"test_unregistered_mlp", unregister_model};
    register_model("test_unregistered_mlp", factory(4));
    CHECK(model_names().size() == models.size() + 1);
    CHECK(make_model(cfg, schema)->dense_parameters() == 3 * 4 + 4 + 4 * 2 + 2);
  }
  CHECK(model_names() == models);
  CHECK_THROWS_AS(make_model(cfg, schema), input_error);
  CHECK_FALSE(unregister_model("test_unregistered_mlp")); // gone already
  CHECK_FALSE(unregister_model("mlp"));                   // built in
  CHECK(model_names() == models);
  // The name is free: registered again, the new factory builds.
  {
    scoped_registration cleanup{"test_unregistered_mlp", unregister_model};
    register_model("test_unregistered_mlp", factory(5));
    CHECK(make_model(cfg, schema)->dense_parameters() == 3 * 5 + 5 + 5 * 2 + 2);
  }
  CHECK(model_names() == models);

  const step_function* before = nullptr;
  {
    scoped_registration cleanup{"test_unregistered_step",
                                unregister_step_function};
    register_step_function({"test_unregistered_step", false, half_loss});
    before = find_step_function("test_unregistered_step");
    REQUIRE(before != nullptr);
  }
  CHECK(step_function_names() == steps);
  CHECK(find_step_function("test_unregistered_step") == nullptr);
  // What was found before stays readable (a closure may be running it).
  CHECK(std::string{before->name} == "test_unregistered_step");
  CHECK(before->compute == half_loss);
  CHECK_FALSE(unregister_step_function("test_unregistered_step"));
  CHECK_FALSE(unregister_step_function("train_step"));
  CHECK(find_step_function("train_step") != nullptr);
  {
    scoped_registration cleanup{"test_unregistered_step",
                                unregister_step_function};
    register_step_function({"test_unregistered_step", true, half_loss});
    auto* again = find_step_function("test_unregistered_step");
    REQUIRE(again != nullptr);
    CHECK(again->pushes);
  }
  CHECK(step_function_names() == steps);
}
