// model::predict, the export of a checkpoint (models/export/) and the
// servable it loads as (models/servable.hpp).

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <catch2/catch.hpp>

#include "cluster/job/job_setup.hpp"
#include "cluster/topology/evaluator.hpp"
#include "core/checkpoint.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/metrics.hpp"
#include "core/table_init.hpp"
#include "models/export/exporter.hpp"
#include "models/registry.hpp"
#include "models/servable.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

namespace {

/// 40 examples of `schema`: random dense features, 1 to 3 keys per field
/// (below the vocabulary, or anywhere below 1000 for unbounded fields),
/// values in weighted fields, labels in range.
dataset export_data(const data_schema& schema, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<float> unit{-1.0f, 1.0f};
  dataset d;
  d.schema = schema;
  auto& b = d.examples;
  b.reset(schema.dense_dim, schema.fields.size());
  b.rows = 40;
  for (uint64_t r = 0; r < b.rows; ++r) {
    for (uint64_t j = 0; j < schema.dense_dim; ++j)
      b.dense.push_back(unit(rng));
    for (size_t f = 0; f < schema.fields.size(); ++f) {
      auto& field = b.fields[f];
      auto vocab = schema.fields[f].vocabulary;
      auto n = 1 + rng() % 3;
      for (uint64_t k = 0; k < n; ++k) {
        field.keys.push_back(rng() % (vocab == 0 ? 1000 : vocab));
        if (schema.fields[f].weighted)
          field.values.push_back(unit(rng) + 1.5f);
      }
      field.offsets.push_back(field.keys.size());
    }
    b.labels.push_back(static_cast<int32_t>(rng() % schema.classes));
  }
  b.check("random data");
  return d;
}

/// A checkpoint of `net` in `layout` with random dense values and, per
/// table, rows for the keys below 500 that are even (the others are
/// unknown to it: they read as their initial rows).
checkpoint_state export_checkpoint_state(const model& net, const placement& layout,
                                   uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<float> unit{-0.5f, 0.5f};
  checkpoint_state st;
  st.global_step = 1234;
  st.ps_clocks = {0};
  st.optimizer_steps = {0};
  for (auto& s : layout.shards) {
    auto& var = layout.variables[s.variable];
    checkpoint_shard sh;
    sh.variable = var.name;
    sh.index = s.index;
    sh.cols = var.cols;
    sh.ps = 0;
    if (s.kind == variable_kind::dense) {
      sh.row_begin = s.row_begin;
      sh.row_end = s.row_end;
      for (uint64_t i = 0; i < s.size; ++i)
        sh.values.push_back(unit(rng));
    } else {
      sh.table = true;
      auto limit = var.rows == 0 ? 500 : std::min<uint64_t>(500, var.rows);
      for (uint64_t key = 0; key < limit; key += 2) {
        if (layout.shard_of_key(s.variable, key) != s.index)
          continue;
        sh.keys.push_back(key);
        sh.steps.push_back(1);
        for (uint64_t j = 0; j < var.cols; ++j)
          sh.values.push_back(unit(rng));
      }
    }
    st.shards.push_back(std::move(sh));
  }
  return st;
}

/// The model's own predictions of `data` with the checkpoint's variables
/// (keys it lacks: initial rows), through model::predict.
std::vector<float> reference_predictions(const model& net,
                                         const placement& layout,
                                         const checkpoint_state& st,
                                         const job_config& cfg,
                                         const dataset& data) {
  std::vector<float> dense(layout.model_size);
  std::vector<std::map<uint64_t, const float*>> rows(layout.variables.size());
  for (auto& sh : st.shards) {
    uint32_t v = 0;
    while (layout.variables[v].name != sh.variable)
      ++v;
    if (sh.table) {
      for (size_t i = 0; i < sh.keys.size(); ++i)
        rows[v][sh.keys[i]] = sh.values.data() + i * sh.cols;
    } else {
      std::copy(sh.values.begin(), sh.values.end(),
                dense.begin() + layout.variable_offsets[v]
                  + sh.row_begin * sh.cols);
    }
  }
  std::vector<table_lookup> tables;
  for (auto v : layout.tables) {
    table_lookup t;
    t.variable = v;
    t.dim = layout.variables[v].cols;
    tables.push_back(t);
  }
  net.collect_keys(data.examples, tables);
  for (auto& t : tables) {
    t.deduplicate();
    auto& var = layout.variables[t.variable];
    table_shard_def def{var.name, var.cols, var.rows, var.init_scale,
                        cfg.init_seed};
    for (size_t u = 0; u < t.keys.size(); ++u) {
      auto at = rows[t.variable].find(t.keys[u]);
      if (at != rows[t.variable].end())
        std::copy_n(at->second, t.dim, t.rows.data() + u * t.dim);
      else
        initial_row(def, t.keys[u], t.rows.data() + u * t.dim);
    }
  }
  auto ws = net.make_workspace(data.rows());
  std::vector<float> out(data.rows() * net.prediction_width());
  net.predict(model_inputs{dense.data(), &tables}, data.examples, out.data(),
              *ws);
  return out;
}

struct export_case {
  std::string model;
  data_schema schema;
  std::vector<uint64_t> layers;
  option_map options;
};

data_schema export_multiclass_schema() {
  data_schema s;
  s.dense_dim = 6;
  s.labels = label_kind::multiclass;
  s.classes = 4;
  return s;
}

data_schema export_ctr_schema() {
  data_schema s;
  s.dense_dim = 3;
  s.fields = {{"user", 50, false}, {"tags", 0, true}};
  s.labels = label_kind::binary;
  s.classes = 2;
  return s;
}

std::vector<export_case> export_cases() {
  return {
    {"mlp", export_multiclass_schema(), {6, 8, 4}, {}},
    {"sparse_logistic_regression", export_ctr_schema(), {}, {}},
    {"embedding_mlp", export_ctr_schema(), {}, {{"embedding_dim", "4"}}},
    {"embedding_mlp",
     export_ctr_schema(),
     {},
     {{"embedding_dim", "3"}, {"combiner", "\"sum\""}}},
  };
}

job_config config_of(const export_case& c) {
  job_config cfg;
  cfg.model = c.model;
  cfg.layers = c.layers;
  cfg.model_options = c.options;
  cfg.ps = 2;
  cfg.init_seed = 7;
  return cfg;
}

} // namespace

TEST_CASE("predict gives the probabilities behind evaluate's metrics") {
  for (auto& c : export_cases()) {
    INFO(c.model);
    auto cfg = config_of(c);
    auto net = make_model(cfg, c.schema);
    auto layout = job_placement(cfg, *net);
    auto st = export_checkpoint_state(*net, layout, 3);
    auto data = export_data(c.schema, 4);
    auto probs = reference_predictions(*net, layout, st, cfg, data);
    auto metrics = evaluate_checkpoint(st, layout, *net, cfg, data);
    auto width = net->prediction_width();
    double loss = 0;
    uint64_t correct = 0;
    for (uint64_t r = 0; r < data.rows(); ++r) {
      auto y = data.examples.labels[r];
      const float* p = probs.data() + r * width;
      if (width == 1) {
        loss -= std::log(y == 1 ? double{p[0]} : 1.0 - p[0]);
        correct += (p[0] > 0.5f) == (y == 1);
      } else {
        double sum = 0;
        uint32_t arg = 0;
        for (uint32_t k = 0; k < width; ++k) {
          sum += p[k];
          if (p[k] > p[arg])
            arg = k;
        }
        CHECK(sum == Approx(1.0).epsilon(1e-6));
        loss -= std::log(double{p[y]});
        correct += arg == static_cast<uint32_t>(y);
      }
    }
    auto n = static_cast<double>(data.rows());
    CHECK(metrics.front().second == Approx(loss / n).epsilon(1e-5));
    CHECK(metrics.back().second == Approx(correct / n));
  }
}

TEST_CASE("an exported checkpoint serves the predictions of the model on "
          "the checkpoint") {
  for (auto& c : export_cases()) {
    for (uint64_t limit : {uint64_t{64} << 20, uint64_t{0}}) {
      INFO(c.model << " with table limit " << limit);
      test::temp_dir dir{"export"};
      auto cfg = config_of(c);
      auto net = make_model(cfg, c.schema);
      auto layout = job_placement(cfg, *net);
      auto st = export_checkpoint_state(*net, layout, 5);
      auto ckpt = write_checkpoint(dir.file("ckpt"), st, 1);
      export_options opts;
      opts.table_limit_bytes = limit;
      auto r = export_checkpoint(ckpt, cfg, c.schema, dir.file("m"), opts);
      CHECK(r.dir == dir.file("m") + "/1234");
      CHECK(r.version == 1234);
      auto fixed = c.schema.fields.empty() ? 0u : 1u; // "user"
      CHECK(r.tables_in_onnx == (limit > 0 ? fixed : 0u));
      CHECK(latest_export_version(dir.file("m")) == uint64_t{1234});
      auto served = servable::load(r.dir);
      CHECK(served->version() == 1234);
      CHECK(served->outputs_per_example() == net->prediction_width());
      auto data = export_data(c.schema, 6);
      auto expected = reference_predictions(*net, layout, st, cfg, data);
      servable_counters counters;
      auto got = served->predict(data.examples, &counters);
      REQUIRE(got.size() == expected.size());
      for (size_t i = 0; i < got.size(); ++i)
        CHECK(got[i] == expected[i]);
      CHECK(counters.examples == data.rows());
      // Odd keys and keys from 500 up are not in the checkpoint.
      if (!c.schema.fields.empty() && limit == 0)
        CHECK(counters.unknown_keys > 0);
      if (c.schema.fields.empty())
        CHECK(counters.unknown_keys == 0);
    }
  }
}

TEST_CASE("a servable refuses examples that do not fit its schema") {
  auto c = export_cases()[1];
  test::temp_dir dir{"export_bad"};
  auto cfg = config_of(c);
  auto net = make_model(cfg, c.schema);
  auto layout = job_placement(cfg, *net);
  auto ckpt = write_checkpoint(dir.file("ckpt"),
                               export_checkpoint_state(*net, layout, 1), 1);
  auto r = export_checkpoint(ckpt, cfg, c.schema, dir.file("m"));
  auto served = servable::load(r.dir);
  auto data = export_data(c.schema, 2);
  auto bad = data.examples;
  bad.fields[0].keys[0] = 50; // vocabulary 50
  CHECK_THROWS_WITH(served->predict(bad),
                    Catch::Contains("key 50 is outside its vocabulary"));
  bad = data.examples;
  bad.dense_dim = 2;
  CHECK_THROWS_AS(served->predict(bad), input_error);
}

TEST_CASE("a damaged export is refused at load, naming the file") {
  auto c = export_cases()[2];
  test::temp_dir dir{"export_damaged"};
  auto cfg = config_of(c);
  auto net = make_model(cfg, c.schema);
  auto layout = job_placement(cfg, *net);
  auto ckpt = write_checkpoint(dir.file("ckpt"),
                               export_checkpoint_state(*net, layout, 1), 1);
  export_options opts;
  opts.table_limit_bytes = 0;
  auto r = export_checkpoint(ckpt, cfg, c.schema, dir.file("m"), opts);
  namespace fs = std::filesystem;
  auto flip = [](const std::string& path, uint64_t at) {
    std::fstream f{path, std::ios::in | std::ios::out | std::ios::binary};
    f.seekg(static_cast<std::streamoff>(at));
    char ch = 0;
    f.get(ch);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(ch ^ 0x10));
  };
  SECTION("a flipped byte in the ONNX file") {
    flip(r.dir + "/model.onnx", 100);
    CHECK_THROWS_WITH(servable::load(r.dir),
                      Catch::Contains("model.onnx")
                        && Catch::Contains("checksum mismatch"));
  }
  SECTION("a missing table file") {
    std::string table;
    for (auto& e : fs::directory_iterator(r.dir))
      if (e.path().extension() == ".apstable")
        table = e.path().string();
    REQUIRE(!table.empty());
    fs::remove(table);
    CHECK_THROWS_WITH(servable::load(r.dir),
                      Catch::Contains(fs::path(table).filename().string()));
  }
  SECTION("a manifest of another format version") {
    std::ifstream in{r.dir + "/manifest.json"};
    std::string text{std::istreambuf_iterator<char>{in}, {}};
    auto at = text.find("\"version\": 1");
    REQUIRE(at != std::string::npos);
    text.replace(at, 12, "\"version\": 9");
    std::ofstream{r.dir + "/manifest.json"} << text;
    CHECK_THROWS_WITH(servable::load(r.dir),
                      Catch::Contains("manifest.json")
                        && Catch::Contains("version 9"));
  }
}

TEST_CASE("a corrupt checkpoint is not exported and leaves the model "
          "directory as it was") {
  auto c = export_cases()[0];
  test::temp_dir dir{"export_corrupt"};
  auto cfg = config_of(c);
  auto net = make_model(cfg, c.schema);
  auto layout = job_placement(cfg, *net);
  auto ckpt = write_checkpoint(dir.file("ckpt"),
                               export_checkpoint_state(*net, layout, 1), 1);
  auto first = export_checkpoint(ckpt, cfg, c.schema, dir.file("m"));
  // Another model's config: its variables are not the checkpoint's.
  auto other = cfg;
  other.layers = {6, 5, 4};
  CHECK_THROWS_WITH(export_checkpoint(ckpt, other, c.schema, dir.file("m")),
                    Catch::Contains("dense_0/kernel"));
  {
    std::fstream f{ckpt + "/shard-0000.bin",
                   std::ios::in | std::ios::out | std::ios::binary};
    f.seekp(40);
    f.put('\x7f');
  }
  CHECK_THROWS_AS(export_checkpoint(ckpt, cfg, c.schema, dir.file("m")),
                  input_error);
  std::vector<std::string> names;
  for (auto& e : std::filesystem::directory_iterator(dir.file("m")))
    names.push_back(e.path().filename().string());
  CHECK(names == std::vector<std::string>{"1234"});
  CHECK_NOTHROW(servable::load(first.dir));
}

TEST_CASE("the latest export version is the highest complete numbered "
          "directory") {
  test::temp_dir dir{"export_versions"};
  namespace fs = std::filesystem;
  CHECK(!latest_export_version(dir.file("missing")));
  for (auto* name : {"7", "12", "0100", ".tmp-900-1", "abc", "30"})
    fs::create_directories(dir.file(name));
  CHECK(!latest_export_version(dir.path().string()));
  for (auto* name : {"7", "12", "0100", ".tmp-900-1", "abc"})
    std::ofstream{dir.file(name) + "/manifest.json"} << "{}";
  // 30 has no manifest, 0100 a leading zero.
  CHECK(latest_export_version(dir.path().string()) == uint64_t{12});
}

TEST_CASE("a servable answers from several threads at once as from one") {
  auto c = export_cases()[2]; // embedding_mlp: tables in files and inside
  test::temp_dir dir{"export_threads"};
  auto cfg = config_of(c);
  auto net = make_model(cfg, c.schema);
  auto layout = job_placement(cfg, *net);
  auto ckpt = write_checkpoint(dir.file("ckpt"),
                               export_checkpoint_state(*net, layout, 9), 1);
  auto r = export_checkpoint(ckpt, cfg, c.schema, dir.file("m"));
  auto served = servable::load(r.dir);
  auto data = export_data(c.schema, 10);
  auto expected = served->predict(data.examples);
  servable_counters counters;
  std::vector<std::vector<float>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i)
        got[t] = served->predict(data.examples, &counters);
    });
  for (auto& th : threads)
    th.join();
  for (auto& g : got)
    CHECK(g == expected);
  CHECK(counters.examples == 4 * 50 * data.rows());
}
