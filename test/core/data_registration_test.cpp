// Datasets a program adds at run time (register_dataset) and removes again:
// the registry is global, so each test removes what it registered.

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/data_registry.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/memory_provider.hpp"
#include "core/options.hpp"

using namespace actorps;

namespace {

job_config config_for(const std::string& dataset, option_map opts = {}) {
  job_config cfg;
  cfg.dataset = dataset;
  cfg.data_options = std::move(opts);
  return cfg;
}

/// `rows` examples of 2 dense features: row i is (i, -i), labelled i % 2;
/// the test split has its rows negated.
dataset tiny(uint64_t rows, float sign) {
  dataset ds;
  ds.schema.dense_dim = 2;
  ds.schema.classes = 2;
  auto& ex = ds.examples;
  ex.reset(2, 0);
  for (uint64_t i = 0; i < rows; ++i) {
    ex.dense.push_back(sign * static_cast<float>(i));
    ex.dense.push_back(-sign * static_cast<float>(i));
    ex.labels.push_back(static_cast<int32_t>(i % 2));
    ++ex.rows;
  }
  return ds;
}

/// Unregisters the dataset `name` when the test ends, however it ends.
struct scoped_dataset {
  std::string name;
  ~scoped_dataset() {
    unregister_dataset(name);
  }
};

} // namespace

TEST_CASE("a dataset registered at run time is opened and read by name "
          "through a job config, then removed",
          "[core][data_registry]") {
  scoped_dataset cleanup{"test_tiny"};
  CHECK_THROWS_AS(parse_job_config(R"({"data": {"dataset": "test_tiny"}})",
                                   "test.json"),
                  input_error);
  uint64_t opened = 0;
  register_dataset("test_tiny", [&opened](const job_config& cfg) {
    option_reader opts{cfg.data_options, "data", "test_tiny"};
    auto rows = opts.get_uint("rows", 8, 1, 1000);
    opts.finish();
    ++opened;
    return std::make_unique<memory_provider>(
      "test_tiny", [rows] { return tiny(rows, 1.0f); },
      [] { return tiny(4, -1.0f); });
  });
  auto names = dataset_names();
  CHECK(std::find(names.begin(), names.end(), "test_tiny") != names.end());
  // The normal path: a config naming it passes validation and opens it.
  auto cfg = parse_job_config(R"({"data": {"dataset": "test_tiny", )"
                              R"("rows": 6, "batch_size": 3}})",
                              "test.json");
  auto data = open_dataset(cfg);
  CHECK(opened == 1);
  CHECK(data->describe() == "test_tiny");
  CHECK(data->schema().dense_dim == 2);
  CHECK(data->train_rows() == 6);
  auto source = data->train_source({2, 1}, cfg.batch_size, cfg.shuffle_seed);
  CHECK(source->shard_rows() == 3); // rows 1, 3, 5
  example_batch batch;
  source->next(batch);
  REQUIRE(batch.rows == 3);
  for (uint64_t r = 0; r < batch.rows; ++r) {
    INFO(r);
    CHECK(batch.labels[r] == 1);
    CHECK(batch.dense[2 * r] == -batch.dense[2 * r + 1]);
  }
  CHECK(data->test_set()->rows() == 4);
  CHECK(data->test_set()->examples.dense[2] == -1.0f);
  // Its options are its own to check.
  CHECK_THROWS_WITH(open_dataset(config_for("test_tiny", {{"colour", "1"}})),
                    "data.colour: unknown field for test_tiny");
  // Removed, the name is unknown again; the provider opened before lives on.
  CHECK(unregister_dataset("test_tiny"));
  CHECK_FALSE(unregister_dataset("test_tiny"));
  CHECK_THROWS_WITH(open_dataset(cfg),
                    Catch::StartsWith("data.dataset: unknown dataset "
                                      "\"test_tiny\""));
  CHECK(dataset_names().size() == names.size() - 1);
  CHECK(data->test_set()->rows() == 4);
}

TEST_CASE("register_dataset refuses a taken, empty or built-in name and an "
          "empty opener, naming the dataset",
          "[core][data_registry]") {
  scoped_dataset cleanup{"test_twice"};
  auto open = [](const job_config&) {
    return std::make_unique<memory_provider>(
      "test_twice", [] { return tiny(2, 1.0f); },
      [] { return tiny(2, 1.0f); });
  };
  register_dataset("test_twice", open);
  const auto names = dataset_names();
  CHECK_THROWS_WITH(register_dataset("test_twice", open),
                    "register_dataset(\"test_twice\"): registered before");
  CHECK_THROWS_WITH(register_dataset("a9a", open),
                    "register_dataset(\"a9a\"): a built-in dataset has that "
                    "name");
  CHECK_THROWS_AS(register_dataset("", open), std::invalid_argument);
  CHECK_THROWS_AS(register_dataset("test_empty", nullptr),
                  std::invalid_argument);
  CHECK(dataset_names() == names);
  CHECK_FALSE(unregister_dataset("a9a")); // built in
  CHECK(open_dataset(config_for("test_twice"))->describe() == "test_twice");
}
