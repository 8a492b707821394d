// check_table_policy (cluster/job/job_setup.hpp): the tables a config names
// in tables.per_table against the model's, each table's policy checked as
// its own, and the start's estimate of what the tables may take.

#include <catch2/catch.hpp>

#include "cluster/job/job_setup.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "models/model.hpp"
#include "models/registry.hpp"

using namespace actorps;

namespace {

/// Sparse logistic regression on fields "user" (1000 ids) and "movie" (500):
/// tables weights/user and weights/movie of dimension 1, each in two shards,
/// one on each of the two servers.
job_config two_tables() {
  job_config cfg;
  cfg.source = "job.json";
  cfg.model = "sparse_logistic_regression";
  cfg.ps = 2;
  cfg.partitioner.num_shards = 2;
  cfg.table_optimizer = optimizer_config{"sgd", 0.1f, {}};
  return cfg;
}

placement layout_of(const job_config& cfg) {
  data_schema s;
  s.fields = {field_schema{"user", 1000, false},
              field_schema{"movie", 500, false}};
  s.labels = label_kind::binary;
  s.classes = 2;
  return job_placement(cfg, *make_model(cfg, s));
}

std::string check(const job_config& cfg) {
  return check_table_policy(cfg, layout_of(cfg));
}

} // namespace

TEST_CASE("a table the model does not declare is refused at start, naming "
          "it and the model's tables",
          "[cluster][table]") {
  auto cfg = two_tables();
  cfg.table_overrides["embedding/user"]["admit_after"] = "2";
  CHECK_THROWS_WITH(check(cfg),
                    "job.json: tables.per_table.embedding/user: model "
                    "sparse_logistic_regression has no table "
                    "\"embedding/user\" (its tables: weights/user, "
                    "weights/movie)");
  cfg.table_overrides.clear();
  cfg.table_overrides["weights/user"]["admit_after"] = "2";
  CHECK_NOTHROW(check(cfg));
  // A model without tables.
  job_config dense;
  dense.source = "job.json";
  dense.table_overrides["weights/user"] = {};
  data_schema images;
  images.dense_dim = 4;
  images.labels = label_kind::multiclass;
  images.classes = 3;
  dense.layers = {4, 3};
  auto net = make_model(dense, images);
  CHECK_THROWS_WITH(check_table_policy(dense, job_placement(dense, *net)),
                    Catch::Contains("model mlp has no table \"weights/user\" "
                                    "(it has no tables)"));
}

TEST_CASE("each table's policy is checked as its own, naming the table",
          "[cluster][table]") {
  auto cfg = two_tables();
  cfg.table_overrides["weights/movie"]["max_bytes"] = "10";
  CHECK_THROWS_WITH(check(cfg),
                    Catch::StartsWith("table weights/movie: max_bytes 10 is "
                                      "below one row"));
  // The same budget job-wide names the first table checked.
  auto wide = two_tables();
  wide.table_max_bytes = 10;
  CHECK_THROWS_WITH(check(wide), Catch::StartsWith("table weights/user: "));
  // A table of its own may lift the job-wide budget (0 = none).
  wide.table_overrides["weights/user"]["max_bytes"] = "0";
  CHECK_THROWS_WITH(check(wide), Catch::StartsWith("table weights/movie: "));
}

TEST_CASE("the start's estimate counts each table under its own policy",
          "[cluster][table]") {
  auto cfg = two_tables();
  CHECK_THAT(check(cfg), Catch::StartsWith("tables without a budget: they "
                                           "grow with the keys seen, up to"));
  cfg.table_overrides["weights/user"]["admit_after"] = "2";
  CHECK_THAT(check(cfg), Catch::StartsWith("tables without a budget: they "
                                           "grow with the keys seen often "
                                           "enough to be admitted"));
  // weights/user: 2 shards (one per ps) of at most 100 rows each;
  // weights/movie without a budget.
  cfg.table_overrides["weights/user"]["max_rows"] = "100";
  auto note = check(cfg);
  CHECK_THAT(note, Catch::StartsWith("tables within their budget: at most "
                                     "100 rows and "));
  CHECK_THAT(note, Catch::Contains("; 1 tables without a budget "
                                   "(weights/movie): they grow"));
  // Both with budgets of their own: 100 + 30 rows on one server.
  cfg.table_overrides["weights/movie"]["max_rows"] = "30";
  note = check(cfg);
  CHECK_THAT(note, Catch::StartsWith("tables within their budget: at most "
                                     "130 rows and "));
  CHECK_THAT(note, !Catch::Contains("without a budget"));
}
