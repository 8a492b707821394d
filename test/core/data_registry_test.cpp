#include "core/data_registry.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

namespace {

job_config config_for(const std::string& dataset, option_map opts = {}) {
  job_config cfg;
  cfg.dataset = dataset;
  cfg.data_options = std::move(opts);
  return cfg;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
}

const std::string a9a_dir = ACTORPS_SOURCE_DIR "/data/a9a";

} // namespace

TEST_CASE("the dataset registry lists its entries sorted",
          "[core][data_registry]") {
  CHECK(dataset_names()
        == std::vector<std::string>{"a9a", "fashion_mnist", "libsvm",
                                    "movielens", "synthetic_ctr"});
}

TEST_CASE("an unknown dataset is an input error listing the known ones",
          "[core][data_registry]") {
  auto cfg = config_for("criteo");
  CHECK_THROWS_AS(open_dataset(cfg), input_error);
  CHECK_THROWS_WITH(open_dataset(cfg),
                    "data.dataset: unknown dataset \"criteo\" (known: "
                    "a9a, fashion_mnist, libsvm, movielens, synthetic_ctr)");
}

TEST_CASE("an unknown data option is an input error naming it and the "
          "dataset",
          "[core][data_registry]") {
  for (auto& name : dataset_names()) {
    INFO(name);
    option_map opts{{"colour", "\"blue\""}};
    if (name == "libsvm")
      opts = {{"train_file", "\"a\""},
              {"test_file", "\"b\""},
              {"num_features", "3"},
              {"colour", "\"blue\""}};
    auto cfg = config_for(name, opts);
    CHECK_THROWS_WITH(open_dataset(cfg),
                      "data.colour: unknown field for " + name);
  }
}

TEST_CASE("libsvm needs its files and num_features, and checks their types",
          "[core][data_registry]") {
  CHECK_THROWS_WITH(open_dataset(config_for("libsvm")),
                    "data.train_file: required for libsvm");
  CHECK_THROWS_WITH(open_dataset(config_for("libsvm",
                                            {{"train_file", "\"a\""},
                                             {"test_file", "\"b\""}})),
                    "data.num_features: required for libsvm");
  CHECK_THROWS_WITH(open_dataset(config_for("libsvm",
                                            {{"train_file", "\"a\""},
                                             {"test_file", "\"b\""},
                                             {"num_features", "0"}})),
                    Catch::StartsWith("data.num_features: 0 is out of range"));
  CHECK_THROWS_WITH(open_dataset(config_for("libsvm",
                                            {{"train_file", "3"},
                                             {"test_file", "\"b\""},
                                             {"num_features", "4"}})),
                    Catch::StartsWith("data.train_file: must be a string"));
}

TEST_CASE("libsvm reads its files relative to data_dir, lazily",
          "[core][data_registry]") {
  test::temp_dir dir{"registry"};
  write_file(dir.file("train.txt"), "1 1:1 4:2\n-1 2:1\n+1 3:1\n");
  write_file(dir.file("test.txt"), "0 1:1\n");
  auto cfg = config_for("libsvm", {{"train_file", "\"train.txt\""},
                                   {"test_file",
                                    "\"" + dir.file("test.txt") + "\""},
                                   {"num_features", "4"}});
  cfg.data_dir = dir.path().string();
  auto data = open_dataset(cfg);
  // The schema is known without reading.
  CHECK(data->schema().fields.at(0).vocabulary == 4);
  CHECK(data->schema().fields.at(0).weighted);
  CHECK(data->schema().labels == label_kind::binary);
  CHECK(data->train_rows() == 3);
  CHECK(data->test_set()->rows() == 1);
  CHECK(data->test_set() == data->test_set()); // cached
  auto src = data->train_source(input_context{1, 0}, 2, 1);
  example_batch b;
  src->next(b);
  CHECK(b.rows == 2);
  CHECK_NOTHROW(b.check("batch"));
  // Zero-based and limited.
  cfg.data_options["one_based"] = "false";
  cfg.data_options["num_features"] = "5";
  cfg.train_limit = 2;
  auto zero = open_dataset(cfg);
  CHECK(zero->train_rows() == 2);
  // Files that are missing fail on first use, not at open.
  cfg.data_options["train_file"] = "\"nope.txt\"";
  auto missing = open_dataset(cfg);
  CHECK_THROWS_WITH(missing->train_rows(),
                    Catch::Contains("nope.txt: cannot open"));
}

TEST_CASE("a9a loads from the shipped files: 32,560 training and 16,281 "
          "test rows of 123 features",
          "[core][data_registry]") {
  auto cfg = config_for("a9a");
  cfg.data_dir = a9a_dir;
  auto data = open_dataset(cfg);
  CHECK_THAT(data->describe(), Catch::Contains("a9a.gz"));
  const auto& schema = data->schema();
  CHECK(schema.dense_dim == 0);
  REQUIRE(schema.fields.size() == 1);
  CHECK(schema.fields[0].name == "features");
  CHECK(schema.fields[0].vocabulary == 123);
  CHECK(schema.labels == label_kind::binary);
  CHECK(data->train_rows() == 32560);
  auto test = data->test_set();
  CHECK(test->rows() == 16281);
  CHECK_NOTHROW(test->examples.check("a9a test"));
  int64_t positives = 0;
  for (auto y : test->examples.labels)
    positives += y;
  CHECK(positives == 3846);
  auto src = data->train_source(input_context{2, 1}, 256, 1);
  CHECK(src->shard_rows() == 16280);
  CHECK(src->schema().fields[0].vocabulary == 123);
}

TEST_CASE("a9a and movielens default to their folders under data/",
          "[core][data_registry]") {
  // The job's data_dir default is Fashion-MNIST's folder; it is not theirs.
  auto a9a = open_dataset(config_for("a9a"));
  CHECK(a9a->describe() == "a9a from data/a9a/a9a.gz and data/a9a/a9a.t.gz");
  auto ml = open_dataset(config_for("movielens"));
  CHECK(ml->describe() == "movielens from data/movielens/movielens.csv");
  auto cfg = config_for("movielens");
  cfg.data_dir = "/nowhere";
  CHECK_THROWS_WITH(open_dataset(cfg)->schema(),
                    Catch::StartsWith("/nowhere/movielens.csv not found: "
                                      "export it once with "
                                      "scripts/export_movielens.sh"));
}

TEST_CASE("movielens gives both splits from one read, with limits",
          "[core][data_registry]") {
  test::temp_dir dir{"registry"};
  std::string csv = "movieId,title,year,genres,userId,rating,timestamp\n";
  for (int u = 1; u <= 3; ++u)
    for (int m = 1; m <= 10; ++m)
      csv += std::to_string(m) + ",\"T, t\",2000,\"Drama|Comedy\","
             + std::to_string(u) + "," + (m % 2 ? "4" : "2") + ","
             + std::to_string(1000 + m) + "\n";
  write_file(dir.file("movielens.csv"), csv);
  auto cfg = config_for("movielens");
  cfg.data_dir = dir.path().string();
  auto data = open_dataset(cfg);
  CHECK(data->schema().fields.size() == 4);
  CHECK(data->schema().fields[2].vocabulary == 2);
  CHECK(data->train_rows() == 24); // 8 of 10 per user
  CHECK(data->test_set()->rows() == 6);
  CHECK(data->test_set()->schema.fields[1].vocabulary
        == data->schema().fields[1].vocabulary);
  cfg.train_limit = 5;
  cfg.test_limit = 4;
  auto limited = open_dataset(cfg);
  CHECK(limited->test_set()->rows() == 4);
  CHECK(limited->train_rows() == 5);
  CHECK_NOTHROW(limited->test_set()->examples.check("test"));
}

TEST_CASE("synthetic_ctr reads its options and generates per worker",
          "[core][data_registry]") {
  auto cfg = config_for("synthetic_ctr", {{"dense_features", "2"},
                                          {"cardinalities", "[100, 10]"},
                                          {"rows_per_epoch", "1000"},
                                          {"test_rows", "64"},
                                          {"seed", "3"}});
  auto data = open_dataset(cfg);
  CHECK_THAT(data->describe(), Catch::Contains("seed 3"));
  CHECK(data->schema().dense_dim == 2);
  CHECK(data->schema().fields.size() == 2);
  CHECK(data->train_rows() == 1000);
  CHECK(data->test_set()->rows() == 64);
  auto src = data->train_source(input_context{4, 3}, 50, 9);
  CHECK(src->shard_rows() == 250);
  example_batch b;
  src->next(b);
  CHECK(b.rows == 50);
  cfg.train_limit = 100;
  cfg.test_limit = 10;
  auto limited = open_dataset(cfg);
  CHECK(limited->train_rows() == 100);
  CHECK(limited->test_set()->rows() == 10);
  CHECK_THROWS_WITH(open_dataset(config_for("synthetic_ctr",
                                            {{"zipf", "\"x\""}})),
                    Catch::StartsWith("data.zipf: must be a number"));
}

TEST_CASE("fashion_mnist has 784 dense features and 10 classes",
          "[core][data_registry]") {
  auto cfg = config_for("fashion_mnist");
  cfg.data_dir = "/nowhere";
  auto data = open_dataset(cfg);
  // Known without reading the files.
  const auto& schema = data->schema();
  CHECK(schema.dense_dim == 784);
  CHECK(schema.fields.empty());
  CHECK(schema.labels == label_kind::multiclass);
  CHECK(schema.classes == 10);
  CHECK_THROWS_AS(data->train_rows(), input_error);
  const std::string real = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(real + "/t10k-images-idx3-ubyte.gz")) {
    WARN("skipped: no Fashion-MNIST in " << real);
    return;
  }
  auto fm = config_for("fashion_mnist");
  fm.test_limit = 100;
  auto real_data = open_dataset(fm);
  auto test = real_data->test_set();
  CHECK(test->rows() == 100);
  CHECK(test->schema.dense_dim == 784);
  CHECK(test->schema.classes == 10);
}

TEST_CASE("a fashion_mnist worker's source holds its shard alone and gives "
          "the batches of the whole split",
          "[core][data_registry]") {
  const std::string real = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(real + "/train-images-idx3-ubyte.gz")) {
    WARN("skipped: no Fashion-MNIST in " << real);
    return;
  }
  auto cfg = config_for("fashion_mnist");
  cfg.train_limit = 1001;
  auto whole = std::make_shared<const dataset>(
    load_fashion_mnist(real, "train", cfg.train_limit));
  auto same_batches = [&](batch_source& src, const input_context& ctx) {
    batch_iterator expected{whole, ctx, 16, 77};
    example_batch a;
    example_batch b;
    for (int k = 0; k < 70; ++k) { // past the end of the first epoch
      src.next(a);
      expected.next(b);
      if (a.dense != b.dense || a.labels != b.labels)
        return false;
    }
    return src.position().epoch == expected.position().epoch
           && src.position().offset == expected.position().offset;
  };
  SECTION("a worker process asks for its own source only") {
    auto data = open_dataset(cfg);
    const input_context ctx{3, 2};
    auto src = data->train_source(ctx, 16, 77);
    auto* it = dynamic_cast<batch_iterator*>(src.get());
    REQUIRE(it != nullptr);
    CHECK(it->data().rows() == 333); // rows 2, 5, ..., 998 of 1001
    CHECK(it->shard_rows() == 333);
    CHECK(same_batches(*src, ctx));
    CHECK(data->train_rows() == 1001);
  }
  SECTION("one process asks for every worker's source") {
    auto data = open_dataset(cfg);
    CHECK(data->train_rows() == 1001);
    std::vector<std::shared_ptr<batch_source>> sources;
    for (uint32_t w = 0; w < 3; ++w)
      sources.push_back(data->train_source(input_context{3, w}, 16, 77));
    uint64_t held = 0;
    for (uint32_t w = 0; w < 3; ++w) {
      INFO("worker " << w);
      auto* it = dynamic_cast<batch_iterator*>(sources[w].get());
      REQUIRE(it != nullptr);
      held += it->data().rows();
      // The pixels as bytes, no float copy: a quarter of the memory.
      CHECK(it->data().examples.dense.empty());
      CHECK(it->data().examples.dense_bytes.size()
            == it->data().rows() * 784);
      CHECK(same_batches(*sources[w], input_context{3, w}));
    }
    CHECK(held == 1001); // each row once, as the whole split
    auto test = data->test_set();
    CHECK(test->examples.dense.empty());
    CHECK(test->examples.dense_bytes.size() == test->rows() * 784);
    // Asked again: the shard already loaded, not a copy.
    auto again = data->train_source(input_context{3, 1}, 16, 77);
    CHECK(&dynamic_cast<batch_iterator&>(*again).data()
          == &dynamic_cast<batch_iterator&>(*sources[1]).data());
  }
  SECTION("a batch larger than the shard is an input error naming it") {
    auto data = open_dataset(cfg);
    CHECK_THROWS_WITH(data->train_source(input_context{3, 0}, 400, 77),
                      Catch::Contains("data.batch_size: 400")
                        && Catch::Contains("334 rows of 1001 over 3"));
  }
}
