// export_feeds: what the independent-runtime check (test/export_runtime_test.sh)
// feeds ONNX Runtime and what it expects back.
//
//   export_feeds CONFIG CHECKPOINT_DIR EXPORT_VERSION_DIR OUT_DIR
//
// Reads the test split of CONFIG's dataset (data.test_limit as the config
// says), then writes into OUT_DIR:
// - one file per input of the export's ONNX graph (the manifest's onnx
//   inputs), its tensor for the whole test split as raw little-endian
//   values: "dense" (N x dense_dim floats); per field F of K keys at most
//   per example: "F.keys" (N x K int64, padded with 0), "F.weights" (N x K
//   floats: the key's value, 1 without values, 0 for padding) and, for a
//   table in table files, "F.rows" (N x K x dim floats looked up there, a
//   key they lack: its initial row);
// - expected.bin: the evaluator's predictions on the checkpoint
//   (predict_checkpoint: the checkpoint's variables as the evaluator reads
//   them, model::predict), N x W floats;
// - feeds.json: {"inputs": [{"name", "type" ("float32" | "int64"), "dims",
//   "file"}], "expected": {"file", "dims"}, "output": "probabilities"}.
// It also checks that the servable loaded from EXPORT_VERSION_DIR predicts
// the same (within 1e-6) and prints the largest difference.

#include <cmath>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cluster/job/job_setup.hpp"
#include "cluster/topology/evaluator.hpp"
#include "core/checkpoint.hpp"
#include "core/data_registry.hpp"
#include "core/job_config.hpp"
#include "core/table_file.hpp"
#include "core/table_init.hpp"
#include "models/export/export_manifest.hpp"
#include "models/registry.hpp"
#include "models/servable.hpp"

using namespace actorps;

namespace {

template <class T>
void write_raw(const std::string& path, const std::vector<T>& v) {
  std::ofstream out{path, std::ios::binary};
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: export_feeds CONFIG CHECKPOINT_DIR "
                         "EXPORT_VERSION_DIR OUT_DIR\n");
    return 2;
  }
  try {
    std::string out_dir = argv[4];
    auto cfg = load_job_config(argv[1]);
    auto provider = open_dataset(cfg);
    auto test = provider->test_set();
    // The examples with float features (a dataset of bytes converts).
    example_batch all;
    all.reset(test->examples.dense_dim, test->examples.fields.size());
    for (uint64_t r = 0; r < test->rows(); ++r)
      all.append_row(test->examples, r);
    auto n = static_cast<int64_t>(all.rows);

    auto st = read_checkpoint(argv[2]);
    auto net = make_model(cfg, provider->schema());
    auto layout = job_placement(cfg, *net);
    auto expected = predict_checkpoint(st, layout, *net, cfg, *test, 0);
    auto width = static_cast<int64_t>(net->prediction_width());

    auto served = servable::load(argv[3]);
    auto got = served->predict(all);
    double max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i)
      max_diff = std::max(max_diff, std::fabs(double{got[i]} - expected[i]));
    fmt::print("{} examples; servable vs evaluator: largest difference {:g}\n",
               n, max_diff);
    if (got.size() != expected.size() || max_diff > 1e-6) {
      fmt::print(stderr, "FAILED: the servable's predictions differ from the "
                         "evaluator's\n");
      return 1;
    }

    std::ifstream in{std::string{argv[3]} + "/manifest.json"};
    std::string text{std::istreambuf_iterator<char>{in}, {}};
    auto m = parse_export_manifest(text, "manifest.json");
    nlohmann::json inputs = nlohmann::json::array();
    auto add = [&](const std::string& name, const char* type,
                   std::vector<int64_t> dims, const std::string& file) {
      inputs.push_back(
        {{"name", name}, {"type", type}, {"dims", dims}, {"file", file}});
    };
    for (auto& name : m.onnx_inputs) {
      auto file = fmt::format("input-{}.bin", inputs.size());
      auto path = out_dir + "/" + file;
      if (name == "dense") {
        write_raw(path, all.dense);
        add(name, "float32", {n, static_cast<int64_t>(all.dense_dim)}, file);
        continue;
      }
      auto dot = name.rfind('.');
      auto field_name = name.substr(0, dot);
      auto what = name.substr(dot + 1);
      size_t f = 0;
      while (m.schema.fields.at(f).name != field_name)
        ++f;
      auto& field = all.fields[f];
      int64_t k = 1;
      for (int64_t r = 0; r < n; ++r)
        k = std::max<int64_t>(k, field.offsets[r + 1] - field.offsets[r]);
      if (what == "keys" || what == "weights") {
        std::vector<int64_t> keys(n * k, 0);
        std::vector<float> weights(n * k, 0.0f);
        for (int64_t r = 0; r < n; ++r)
          for (auto i = field.offsets[r]; i < field.offsets[r + 1]; ++i) {
            auto at = r * k + static_cast<int64_t>(i - field.offsets[r]);
            keys[at] = static_cast<int64_t>(field.keys[i]);
            weights[at] = field.values.empty() ? 1.0f : field.values[i];
          }
        if (what == "keys") {
          write_raw(path, keys);
          add(name, "int64", {n, k}, file);
        } else {
          write_raw(path, weights);
          add(name, "float32", {n, k}, file);
        }
        continue;
      }
      // F.rows: the table's rows from its table files.
      const export_table_entry* t = nullptr;
      for (auto& e : m.tables)
        if (e.field == field_name)
          t = &e;
      std::vector<table_file> files;
      for (auto& tf : t->files)
        files.push_back(table_file::open(std::string{argv[3]} + "/"
                                         + tf.path));
      table_shard_def def{t->variable, t->dim, t->vocabulary, t->init_scale,
                          t->init_seed};
      auto dim = static_cast<int64_t>(t->dim);
      std::vector<float> rows(n * k * dim, 0.0f);
      for (int64_t r = 0; r < n; ++r)
        for (auto i = field.offsets[r]; i < field.offsets[r + 1]; ++i) {
          auto* dst = rows.data()
                      + (r * k + static_cast<int64_t>(i - field.offsets[r]))
                          * dim;
          const float* row = nullptr;
          for (auto& tf : files)
            if ((row = tf.find(field.keys[i])) != nullptr)
              break;
          if (row != nullptr)
            std::copy_n(row, dim, dst);
          else
            initial_row(def, field.keys[i], dst);
        }
      write_raw(path, rows);
      add(name, "float32", {n, k, dim}, file);
    }
    write_raw(out_dir + "/expected.bin", expected);
    nlohmann::json doc = {
      {"inputs", inputs},
      {"expected", {{"file", "expected.bin"}, {"dims", {n, width}}}},
      {"output", "probabilities"}};
    std::ofstream{out_dir + "/feeds.json"} << doc.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "export_feeds: %s\n", e.what());
    return 2;
  }
}
