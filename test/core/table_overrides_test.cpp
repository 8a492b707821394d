#include "core/table_overrides.hpp"

#include <string>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/job_options.hpp"

using namespace actorps;

namespace {

/// A config of two job-wide fields and two tables of their own.
const char* two_tables = R"({
  "tables": {
    "admit_after": 2,
    "max_rows": 100,
    "per_table": {
      "embedding/user": {"admit_after": 5, "steps_to_live": 50,
                         "filter": "exact"},
      "embedding/genres": {"admit_after": 0, "max_rows": 0,
                           "l2_threshold": 0.25, "evict": "lfu"}
    }
  }
})";

/// parse_job_config's error for a config whose tables.per_table is
/// `per_table` (JSON text).
std::string error_of(const std::string& per_table) {
  try {
    parse_job_config(R"({"tables": {"per_table": )" + per_table + "}}",
                     "job.json");
  } catch (const input_error& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST_CASE("a table's own fields override the job-wide ones, and the fields "
          "it leaves out keep them",
          "[core][table][job_options]") {
  auto cfg = parse_job_config(two_tables, "job.json");
  REQUIRE(cfg.table_overrides.size() == 2);
  CHECK(cfg.table_overrides.at("embedding/user").at("admit_after") == "5");
  auto p = table_policies_of(cfg);
  // Every other table: the job-wide policy.
  CHECK(p.defaults.admit_after == 2);
  CHECK(p.defaults.max_rows == int64_t{100});
  CHECK_FALSE(p.defaults.steps_to_live);
  CHECK(&p.for_table("embedding/movie") == &p.defaults);
  auto& user = p.for_table("embedding/user");
  CHECK(user.admit_after == 5);
  CHECK(user.steps_to_live == int64_t{50});
  CHECK(user.filter == admission_kind::exact);
  CHECK(user.max_rows == int64_t{100}); // kept
  CHECK(user.evict == eviction_order::lru);
  auto& genres = p.for_table("embedding/genres");
  CHECK(genres.admit_after == 0);
  CHECK_FALSE(genres.max_rows); // 0: none, as for the job-wide field
  CHECK_FALSE(genres.has_budget());
  CHECK(genres.l2_threshold == Approx(0.25));
  CHECK(genres.evict == eviction_order::lfu);
  CHECK(genres.filter == admission_kind::sketch); // kept
}

TEST_CASE("a job-wide flag reaches the fields a table leaves out, whatever "
          "the order",
          "[core][table][job_options]") {
  auto cfg = parse_job_config(two_tables, "job.json");
  set_from_flag(cfg, *find_job_flag("--table-max-rows"), "7");
  set_from_flag(cfg, *find_job_flag("--admit-after"), "3");
  auto p = table_policies_of(cfg);
  CHECK(p.defaults.admit_after == 3);
  CHECK(p.for_table("embedding/user").admit_after == 5);
  CHECK(p.for_table("embedding/user").max_rows == int64_t{7});
  CHECK_FALSE(p.for_table("embedding/genres").max_rows);
}

TEST_CASE("a config without per_table gives every table the job-wide "
          "policy",
          "[core][table][job_options]") {
  auto cfg = parse_job_config(R"({"tables": {"steps_to_live": 9}})");
  CHECK(cfg.table_overrides.empty());
  auto p = table_policies_of(cfg);
  CHECK(p.by_table.empty());
  CHECK(p.for_table("embedding/C1").steps_to_live == int64_t{9});
  // A table named without fields of its own is still named (the start
  // checks that the model has it), with the job-wide policy.
  cfg = parse_job_config(R"({"tables": {"per_table": {"embedding/C1": {}}}})");
  CHECK(cfg.table_overrides.count("embedding/C1") == 1);
  CHECK_FALSE(table_policies_of(cfg).for_table("embedding/C1").filters());
}

TEST_CASE("unknown fields, wrong types and values out of bounds of a table's "
          "policy are refused, naming the key",
          "[core][table][job_options]") {
  CHECK_THAT(error_of(R"({"user": {"admit_afte": 3}})"),
             Catch::StartsWith("job.json: tables.per_table.user.admit_afte: "
                               "unknown field; a table's own policy sets "
                               "admit_after, filter,"));
  // Per server, not per table.
  CHECK_THAT(error_of(R"({"user": {"sweep_rows": 3}})"),
             Catch::StartsWith("job.json: tables.per_table.user.sweep_rows: "
                               "unknown field"));
  CHECK(error_of(R"({"user": {"admit_after": 300}})")
        == "job.json: tables.per_table.user.admit_after: 300 is out of range "
           "[0, 255]");
  CHECK(error_of(R"({"user": {"admit_after": -1}})")
        == "job.json: tables.per_table.user.admit_after: expected a whole "
           "number >= 0, got \"-1\"");
  CHECK(error_of(R"({"user": {"max_rows": 2.5}})")
        == "job.json: tables.per_table.user.max_rows: expected a whole "
           "number >= 0, got \"2.5\"");
  CHECK(error_of(R"({"user": {"admit_after": "3"}})")
        == "job.json: tables.per_table.user.admit_after: must be a number");
  CHECK(error_of(R"({"user": {"evict": "fifo"}})")
        == "job.json: tables.per_table.user.evict: \"fifo\": must be \"lru\" "
           "or \"lfu\"");
  CHECK(error_of(R"({"user": {"evict": 1}})")
        == "job.json: tables.per_table.user.evict: must be a string");
  CHECK(error_of(R"({"user": 3})")
        == "job.json: tables.per_table.user: must be an object");
  CHECK(error_of(R"([])") == "job.json: tables.per_table: must be an object");
}

TEST_CASE("the flag --table-policy TABLE.FIELD=VALUE sets one field of one "
          "table, and another shape is refused",
          "[core][table][job_options]") {
  job_config cfg;
  auto& row = *find_job_flag("--table-policy");
  CHECK(row.key == "tables.per_table");
  set_from_flag(cfg, row, "embedding/user.admit_after=3");
  set_from_flag(cfg, row, "embedding/user.evict=lfu");
  set_from_flag(cfg, row, "embedding/user.admit_after=4"); // the last wins
  set_from_flag(cfg, row, "a.b.max_rows=8"); // a name with a dot
  auto p = table_policies_of(cfg);
  CHECK(p.for_table("embedding/user").admit_after == 4);
  CHECK(p.for_table("embedding/user").evict == eviction_order::lfu);
  CHECK(p.for_table("a.b").max_rows == int64_t{8});
  CHECK(p.defaults.admit_after == 0);
  for (auto bad : {"user", "user.admit_after", "admit_after=3",
                   ".admit_after=3", "user.=3", "user.admit_after="})
    CHECK_THROWS_WITH(set_from_flag(cfg, row, bad),
                      "--table-policy " + std::string{bad}
                        + ": expected TABLE.FIELD=VALUE, e.g. "
                          "embedding/user.admit_after=3");
  CHECK_THROWS_WITH(set_from_flag(cfg, row, "user.admit_afte=3"),
                    Catch::StartsWith("--table-policy user.admit_afte: "
                                      "unknown field"));
  CHECK_THROWS_WITH(set_from_flag(cfg, row, "user.admit_after=many"),
                    "--table-policy user.admit_after: expected a whole "
                    "number >= 0, got \"many\"");
  CHECK_THROWS_WITH(set_from_flag(cfg, row, "user.evict=fifo"),
                    "--table-policy user.evict: \"fifo\": must be \"lru\" or "
                    "\"lfu\"");
  // A refused flag changes nothing.
  CHECK(cfg.table_overrides.count("user") == 0);
}

TEST_CASE("validate checks overrides set in code as the config's are",
          "[core][table][job_options]") {
  job_config cfg;
  cfg.source = "code";
  cfg.table_overrides["user"]["admit_after"] = "2";
  CHECK_NOTHROW(validate(cfg));
  cfg.table_overrides["user"]["ttl"] = "2";
  CHECK_THROWS_WITH(validate(cfg),
                    Catch::StartsWith("code: tables.per_table.user.ttl: "
                                      "unknown field"));
  cfg.table_overrides["user"].erase("ttl");
  cfg.table_overrides["user"]["max_bytes"] = "lots";
  CHECK_THROWS_WITH(validate(cfg),
                    "code: tables.per_table.user.max_bytes: expected a whole "
                    "number >= 0, got \"lots\"");
}
