#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cluster/net/handshake.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "models/registry.hpp"
#include "models/model.hpp"

using namespace actorps;

namespace {

/// Fashion-MNIST's shape, without reading its files.
data_schema images() {
  data_schema s;
  s.dense_dim = 784;
  s.labels = label_kind::multiclass;
  s.classes = 10;
  return s;
}

/// A9a's shape: one weighted field of 123 features, binary labels.
data_schema sparse() {
  data_schema s;
  s.fields.push_back(field_schema{"features", 123, true});
  s.labels = label_kind::binary;
  return s;
}

handshake hello(const job_config& cfg, const std::string& role,
                uint32_t index, const data_schema& schema = images()) {
  auto net = make_model(cfg, schema);
  return make_handshake(cfg, job_placement(cfg, *net), role, index);
}

} // namespace

TEST_CASE("nodes of one job agree", "[handshake]") {
  job_config cfg;
  auto chief = hello(cfg, "chief", 0);
  auto ps = hello(cfg, "ps", 1);
  CHECK(handshake_differences(chief, ps).empty());
  CHECK(fingerprint_id(chief.job) == fingerprint_id(ps.job));
  CHECK(chief.protocol == protocol_version);
  CHECK(chief.build.find("actorps") == 0);
}

TEST_CASE("a differing field is named, with both nodes", "[handshake]") {
  job_config cfg;
  auto chief = hello(cfg, "chief", 0);
  auto other = cfg;
  other.optimizer.type = "adam"; // cfg: sgd
  auto ps = hello(other, "ps", 1);
  auto diffs = handshake_differences(ps, chief);
  REQUIRE(diffs.size() == 1);
  CHECK(diffs[0].rfind("job optimizer: \"adam learning_rate", 0) == 0);
  CHECK(diffs[0].find("at ps1, \"sgd") != std::string::npos);
  CHECK(diffs[0].find("at coordinator") != std::string::npos);
  CHECK(fingerprint_id(chief.job) != fingerprint_id(ps.job));
}

TEST_CASE("model, shapes, partitioning, mode and size each count",
          "[handshake]") {
  job_config cfg;
  auto base = hello(cfg, "worker", 0);
  auto differs = [&](job_config c, const std::string& field) {
    auto diffs = handshake_differences(base, hello(c, "ps", 0));
    INFO(field);
    REQUIRE(!diffs.empty());
    CHECK(join_lines(diffs).find(field) != std::string::npos);
  };
  auto c1 = cfg;
  c1.layers = {784, 64, 10};
  differs(c1, "job variables");
  auto c2 = cfg;
  c2.partitioner.num_shards = 3;
  differs(c2, "job partitioning");
  auto c3 = cfg;
  c3.mode = "ssp";
  differs(c3, "job consistency");
  auto c4 = cfg;
  c4.workers = 3;
  differs(c4, "job cluster");
  auto c5 = cfg;
  c5.init_seed = 7;
  differs(c5, "job model");
  auto c6 = cfg;
  c6.batch_size = 32;
  differs(c6, "job data");
  auto c7 = cfg;
  c7.data_options["seed"] = "7";
  differs(c7, "job data");
}

TEST_CASE("tables, their partitioning and their rule count", "[handshake]") {
  job_config cfg;
  cfg.model = "sparse_logistic_regression";
  cfg.dataset = "a9a";
  auto base = hello(cfg, "worker", 0, sparse());
  CHECK(base.job.variables.find("weights/features table 123x1")
        != std::string::npos);
  auto differs = [&](job_config c, const std::string& field) {
    auto diffs = handshake_differences(base, hello(c, "ps", 0, sparse()));
    INFO(field);
    REQUIRE(!diffs.empty());
    CHECK(join_lines(diffs).find(field) != std::string::npos);
  };
  auto c1 = cfg;
  c1.table_optimizer.type = "ftrl";
  differs(c1, "job optimizer");
  auto c2 = cfg;
  c2.table_partition_strategy = table_partition::div;
  differs(c2, "job partitioning");
  auto c3 = cfg;
  c3.table_optimizer.params["initial_accumulator"] = 0.5;
  differs(c3, "job optimizer");
}

TEST_CASE("another protocol version or build is named", "[handshake]") {
  job_config cfg;
  auto a = hello(cfg, "chief", 0);
  auto b = a;
  b.role = "worker";
  b.protocol = protocol_version + 1;
  b.build = "actorps 9.9.9 (git deadbeef, CAF 0.17.6)";
  auto text = join_lines(handshake_differences(a, b));
  CHECK(text.find(fmt::format("protocol version: {} at coordinator, {} at "
                              "worker0",
                              protocol_version, protocol_version + 1))
        != std::string::npos);
  CHECK(text.find("build: ") != std::string::npos);
}

TEST_CASE("long fields are shown around their first difference",
          "[handshake]") {
  job_config cfg;
  cfg.layers = {784, 100, 100, 100, 100, 100, 100, 100, 10};
  cfg.partitioner.num_shards = 4;
  cfg.ps = 4;
  auto a = hello(cfg, "chief", 0);
  auto c = cfg;
  c.layers[7] = 99;
  auto diffs = handshake_differences(a, hello(c, "ps", 0));
  REQUIRE(!diffs.empty());
  for (auto& d : diffs)
    CHECK(d.size() < 400);
  CHECK(join_lines(diffs).find("dense_6/kernel 100x99") != std::string::npos);
}
