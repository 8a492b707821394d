#include "cluster/services/checkpoint_fit.hpp"

#include <string>

#include <catch2/catch.hpp>

#include "checkpoint_fixture.hpp"
#include "core/error.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

/// The message check_checkpoint throws ("" if it accepts).
std::string refusal(const checkpoint_state& st, const job_config& cfg,
                    const data_schema& schema = images()) {
  try {
    check_checkpoint(st, cfg, layout_of(cfg, schema), "ck/ckpt-0000000200");
  } catch (const input_error& e) {
    return e.what();
  }
  return {};
}

/// The message check_checkpoint_variables throws ("" if it accepts).
std::string variables_refusal(const checkpoint_state& st,
                              const job_config& cfg) {
  try {
    check_checkpoint_variables(st, cfg, layout_of(cfg, images()),
                               "ck/ckpt-0000000200");
  } catch (const input_error& e) {
    return e.what();
  }
  return {};
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("a checkpoint of the same job is accepted", "[checkpoint_fit]") {
  job_config cfg;
  auto st = written_by(cfg);
  CHECK(refusal(st, cfg).empty());
  CHECK(variables_refusal(st, cfg).empty());
}

TEST_CASE("a checkpoint written with other data is refused in one sentence "
          "naming only the data settings that differ",
          "[checkpoint_fit]") {
  job_config cfg;
  auto st = written_by(cfg);
  auto limited = cfg;
  limited.train_limit = 1000;
  CHECK(refusal(st, limited)
        == "ck/ckpt-0000000200/manifest.json: the checkpoint was written with "
           "other data: train limit 0 in the checkpoint; train limit 1000 in "
           "this job; use --restore-variables-only to start a new run from "
           "its variables");
  limited.batch_size = 32;
  CHECK(refusal(st, limited)
        == "ck/ckpt-0000000200/manifest.json: the checkpoint was written with "
           "other data: train limit 0, batch size 64 in the checkpoint; train "
           "limit 1000, batch size 32 in this job; use "
           "--restore-variables-only to start a new run from its variables");
  auto reshuffled = cfg;
  reshuffled.shuffle_seed = 9;
  CHECK(has(refusal(st, reshuffled), "other data: shuffle seed 1 in the "
                                     "checkpoint; shuffle seed 9 in this job"));
  auto options = cfg;
  options.data_options["seed"] = "7";
  CHECK(has(refusal(st, options),
            "other data: none in the checkpoint; seed=7 in this job"));
}

TEST_CASE("a checkpoint that records no data settings is refused for a "
          "continuation but not for its variables",
          "[checkpoint_fit]") {
  job_config cfg;
  auto st = written_by(cfg);
  st.job.erase("data");
  auto text = refusal(st, cfg);
  CHECK(has(text, "written with no record of its data"));
  CHECK(has(text, "use --restore-variables-only"));
  CHECK(variables_refusal(st, cfg).empty());
}

TEST_CASE("several differing fields are named in one sentence, without those "
          "that follow from another",
          "[checkpoint_fit]") {
  job_config cfg;
  auto st = written_by(cfg);
  auto other = cfg;
  other.optimizer.type = "adam";
  other.train_limit = 1000;
  auto text = refusal(st, other);
  CHECK(has(text, "written with another optimizer (sgd learning_rate 0.01 in "
                  "the checkpoint; adam learning_rate 0.01"));
  CHECK(has(text, ") and other data (train limit 0 in the checkpoint; train "
                  "limit 1000 in this job); use --restore-variables-only"));
  CHECK(text.find('\n') == std::string::npos);
  // Other layers: the model differs; its variables and their partitioning
  // follow from it and are not named, and only the same model can restore.
  cfg.layers = {784, 256, 128, 10};
  st = written_by(cfg);
  auto smaller = cfg;
  smaller.layers = {784, 64, 10};
  text = refusal(st, smaller);
  CHECK(has(text, "written with another model: mlp 784-256-128-10 in the "
                  "checkpoint; mlp 784-64-10 in this job"));
  CHECK_FALSE(has(text, "variables"));
  CHECK_FALSE(has(text, "partitioning"));
  // Another number of ps: named once, with the way out.
  auto three = cfg;
  three.ps = 3;
  CHECK(refusal(st, three)
        == "ck/ckpt-0000000200/manifest.json: the checkpoint was written with "
           "another cluster: 2 ps in the checkpoint; 3 ps in this job; its "
           "variables are placed on 2 ps: restore it with --ps 2");
  auto workers = cfg;
  workers.workers = 3;
  CHECK(has(refusal(st, workers),
            "another cluster: 2 workers in the checkpoint; 3 workers in this "
            "job; use --restore-variables-only"));
  auto mode = cfg;
  mode.mode = "sync";
  CHECK(has(refusal(st, mode), "another consistency mode: async in the "
                               "checkpoint; sync in this job"));
}

TEST_CASE("a variables-only restore takes other data, optimizer, mode and "
          "workers, but not another model, partitioning or number of ps",
          "[checkpoint_fit]") {
  job_config cfg;
  auto st = written_by(cfg);
  auto other = cfg;
  other.train_limit = 1000;
  other.batch_size = 32;
  other.optimizer.type = "adagrad";
  other.mode = "sync";
  other.workers = 3;
  CHECK(variables_refusal(st, other).empty());
  auto seed = cfg;
  seed.init_seed = 7;
  CHECK(variables_refusal(st, seed)
        == "ck/ckpt-0000000200/manifest.json: the checkpoint was written with "
           "another model: init seed 42 in the checkpoint; init seed 7 in "
           "this job; --restore-variables-only needs the same model, "
           "variables and partitioning");
  auto shards = cfg;
  shards.partitioner.num_shards = 3;
  CHECK(has(variables_refusal(st, shards),
            "written with another partitioning: "));
  auto three = cfg;
  three.ps = 3;
  CHECK(variables_refusal(st, three)
        == "ck/ckpt-0000000200/manifest.json: the checkpoint's variables are "
           "placed on 2 ps and this job has 3; --restore-variables-only "
           "restores each shard on its own ps: use --ps 2");
}

TEST_CASE("a checkpoint of another number of ps is re-cut for the job when "
          "nothing else differs, and left for the check to refuse otherwise",
          "[checkpoint_fit]") {
  job_config cfg; // 2 ps
  cfg.optimizer.type = "adam";
  auto three = cfg;
  three.ps = 3;
  auto layout = layout_of(three, images());
  SECTION("only the number of ps differs: re-cut, then accepted") {
    auto st = written_by(cfg);
    REQUIRE(reshard_to_fit(st, three, layout, "ck/ckpt-0000000200", false));
    CHECK(st.ps_clocks.size() == 3);
    CHECK(st.shards.size() == layout.shards.size());
    CHECK(refusal(st, three).empty());
    // Already of the job's placement: nothing to do.
    CHECK_FALSE(reshard_to_fit(st, three, layout, "ck/ckpt-0000000200",
                               false));
  }
  SECTION("and another optimizer: left as it is, refused naming both") {
    auto other = three;
    other.optimizer.type = "sgd";
    auto st = written_by(cfg);
    CHECK_FALSE(reshard_to_fit(st, other, layout_of(other, images()),
                               "ck/ckpt-0000000200", false));
    CHECK(st.ps_clocks.size() == 2);
    auto text = refusal(st, other);
    CHECK(has(text, "another cluster (2 ps in the checkpoint; 3 ps in this "
                    "job) and another optimizer"));
    CHECK_FALSE(has(text, "restore it with --ps"));
    // A variables-only restore takes another optimizer: re-cut.
    CHECK(reshard_to_fit(st, other, layout_of(other, images()),
                         "ck/ckpt-0000000200", true));
    CHECK(variables_refusal(st, other).empty());
  }
  SECTION("and another number of workers: left as it is") {
    auto other = three;
    other.workers = 3;
    auto st = written_by(cfg);
    CHECK_FALSE(reshard_to_fit(st, other, layout_of(other, images()),
                               "ck/ckpt-0000000200", false));
  }
  SECTION("another model: left as it is") {
    auto other = three;
    other.init_seed = 7;
    auto st = written_by(cfg);
    CHECK_FALSE(reshard_to_fit(st, other, layout_of(other, images()),
                               "ck/ckpt-0000000200", true));
  }
  SECTION("shards that cannot be re-cut: refused naming the manifest") {
    auto st = written_by(cfg);
    st.shards.pop_back();
    CHECK_THROWS_WITH(reshard_to_fit(st, three, layout, "ck/ckpt-0000000200",
                                     false),
                      Catch::Matchers::StartsWith(
                        "ck/ckpt-0000000200/manifest.json: re-sharding: "));
  }
}
