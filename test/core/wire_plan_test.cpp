// Push plans (core/wire_plan.hpp): which runs of each server's dense region
// a push sends in which wire format, from cluster.variable_formats.

#include "core/wire_plan.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/placement.hpp"

using namespace actorps;

namespace {

/// kernel 8x4 and bias 4x1, each in 2 shards over 2 servers: server 0 holds
/// kernel rows [0, 4) then bias rows [0, 2); server 1 the other halves.
placement two_layer() {
  partitioner_config p;
  p.type = partitioner_config::kind::fixed_shards;
  p.num_shards = 2;
  std::vector<variable_def> vars{variable_def::dense("kernel", 8, 4),
                                 variable_def::dense("bias", 4, 1),
                                 variable_def::table("ids", 0, 8, 0.1f)};
  return place_variables(vars, p, 2);
}

using format_map = std::map<std::string, std::shared_ptr<const wire_format>>;

} // namespace

TEST_CASE("a push plan covers each region in runs, one per format, "
          "merging neighbours of the same format",
          "[core][wire]") {
  auto pl = two_layer();
  REQUIRE(pl.ps_sizes == std::vector<uint64_t>{18, 18});
  // One format for all: one run per server, sent as plain floats.
  auto plain = make_push_plan(pl, nullptr, {});
  for (uint32_t p = 0; p < 2; ++p) {
    REQUIRE(plain[p].size() == 1);
    CHECK(plain[p][0].offset == 0);
    CHECK(plain[p][0].size == 18);
    CHECK(plain[p][0].format->name() == "fp32");
    CHECK(plain_floats(plain, p));
    CHECK(encoded_bytes(plain, p) == 18 * 4);
  }
  // The kernel in top-2, the bias in bf16: two runs per server.
  format_map per{{"kernel", make_wire_format("topk:2")},
                 {"bias", make_wire_format("bf16")}};
  auto mixed = make_push_plan(pl, nullptr, per);
  for (uint32_t p = 0; p < 2; ++p) {
    REQUIRE(mixed[p].size() == 2);
    CHECK(mixed[p][0].offset == 0);
    CHECK(mixed[p][0].size == 16);
    CHECK(mixed[p][0].format->name() == "topk:2");
    CHECK(mixed[p][1].offset == 16);
    CHECK(mixed[p][1].size == 2);
    CHECK(mixed[p][1].format->name() == "bf16");
    CHECK_FALSE(plain_floats(mixed, p));
    CHECK(encoded_bytes(mixed, p) == 2 * 8 + 2 * 2);
  }
  // The fallback bf16 and the bias in bf16 too: one run again.
  auto merged = make_push_plan(pl, make_wire_format("bf16"),
                               {{"bias", make_wire_format("bf16")}});
  REQUIRE(merged[0].size() == 1);
  CHECK(merged[0][0].size == 18);
}

TEST_CASE("a push plan refuses variables the model lacks, tables, and a "
          "top-k count above a run, naming them",
          "[core][wire]") {
  auto pl = two_layer();
  CHECK_THROWS_WITH(
    make_push_plan(pl, nullptr, {{"kernal", make_wire_format("bf16")}}),
    Catch::Contains("cluster.variable_formats")
      && Catch::Contains("no variable \"kernal\""));
  CHECK_THROWS_WITH(
    make_push_plan(pl, nullptr, {{"ids", make_wire_format("bf16")}}),
    Catch::Contains("\"ids\" is an embedding table"));
  // The bias runs hold 2 floats per server.
  CHECK_THROWS_AS(
    make_push_plan(pl, nullptr, {{"bias", make_wire_format("topk:3")}}),
    input_error);
  CHECK_THROWS_WITH(
    make_push_plan(pl, nullptr, {{"bias", make_wire_format("topk:3")}}),
    Catch::Contains("ps 0 sends 2 floats at offset 16 in \"topk:3\""));
}
