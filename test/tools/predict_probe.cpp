// predict_probe: what a served model must answer, computed without the
// export, for test/serve_test.sh.
//
//   predict_probe --config FILE --checkpoint CKPT --first I --count N
//                 [--flag value ...]   (job flags, as for actorps train)
//
// Prints two lines: a predict request body {"instances": [...]} of the test
// examples I .. I+N-1 of the job's dataset, in the instance form of
// docs/reference/serving.md (dense features as floats in their shortest
// exact form, fields as lists of keys or [key, value] pairs); then the
// predictions the evaluator's path computes for them from the checkpoint
// (model::predict on the checkpoint's variables, a key the checkpoint lacks
// reading as its initial row, as evaluate_checkpoint does), as the
// "predictions" list of the answer.

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cluster/job/job_setup.hpp"
#include "core/checkpoint.hpp"
#include "core/data_registry.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/job_options.hpp"
#include "core/table_init.hpp"
#include "models/registry.hpp"

using namespace actorps;

namespace {

std::string body_of(const example_batch& b, const data_schema& s) {
  auto floats = [&](uint64_t r) {
    std::string out = "[";
    for (uint64_t d = 0; d < b.dense_dim; ++d)
      out += (d == 0 ? "" : ", ") + fmt::format("{}", b.dense[r * b.dense_dim + d]);
    return out + "]";
  };
  std::string out = "{\"instances\": [";
  for (uint64_t r = 0; r < b.rows; ++r) {
    out += r == 0 ? "" : ", ";
    if (s.fields.empty()) {
      out += floats(r);
      continue;
    }
    out += "{";
    bool first = true;
    if (s.dense_dim > 0) {
      out += "\"dense\": " + floats(r);
      first = false;
    }
    for (size_t f = 0; f < s.fields.size(); ++f) {
      auto& fld = b.fields[f];
      out += fmt::format("{}\"{}\": [", first ? "" : ", ", s.fields[f].name);
      first = false;
      for (auto i = fld.offsets[r]; i < fld.offsets[r + 1]; ++i) {
        auto sep = i == fld.offsets[r] ? "" : ", ";
        if (s.fields[f].weighted)
          out += fmt::format("{}[{}, {}]", sep, fld.keys[i], fld.values[i]);
        else
          out += fmt::format("{}{}", sep, fld.keys[i]);
      }
      out += "]";
    }
    out += "}";
  }
  return out + "]}";
}

std::vector<float> predictions_of(const job_config& cfg, const model& net,
                                  const checkpoint_state& st,
                                  const example_batch& batch) {
  auto layout = job_placement(cfg, net);
  std::vector<float> dense(layout.model_size);
  std::vector<std::map<uint64_t, const float*>> rows(layout.variables.size());
  for (auto& sh : st.shards) {
    uint32_t v = 0;
    while (v < layout.variables.size() && layout.variables[v].name != sh.variable)
      ++v;
    if (v == layout.variables.size())
      throw input_error("the checkpoint holds variable " + sh.variable
                        + ", which the model has not");
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
  net.collect_keys(batch, tables);
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
  auto ws = net.make_workspace(batch.rows);
  std::vector<float> out(batch.rows * net.prediction_width());
  net.predict(model_inputs{dense.data(), &tables}, batch, out.data(), *ws);
  return out;
}

} // namespace

int main(int argc, char** argv) {
  try {
    std::string config, checkpoint;
    uint64_t first = 0, count = 1;
    std::vector<std::pair<std::string, std::string>> flags;
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string a = argv[i], v = argv[i + 1];
      if (a == "--config")
        config = v;
      else if (a == "--checkpoint")
        checkpoint = v;
      else if (a == "--first")
        first = to_count(a, v, 0, uint64_t{1} << 40);
      else if (a == "--count")
        count = to_count(a, v, 1, 1 << 20);
      else
        flags.emplace_back(a, v);
    }
    if (config.empty() || checkpoint.empty())
      throw input_error("usage: predict_probe --config FILE --checkpoint CKPT "
                        "--first I --count N [job flags]");
    auto cfg = load_job_config(config);
    for (auto& [flag, value] : flags) {
      auto* row = find_job_flag(flag);
      if (!row)
        throw input_error("unknown flag " + flag);
      set_from_flag(cfg, *row, value);
    }
    auto data = open_dataset(cfg);
    auto& schema = data->schema();
    auto test = data->test_set();
    if (first + count > test->rows())
      throw input_error(fmt::format("the test split has {} examples",
                                    test->rows()));
    example_batch batch;
    batch.reset(schema.dense_dim, schema.fields.size());
    for (uint64_t r = first; r < first + count; ++r)
      batch.append_row(test->examples, r);
    auto net = make_model(cfg, schema);
    // A root of checkpoints: its newest (as actorps export takes it).
    if (!std::filesystem::exists(checkpoint + "/manifest.json"))
      checkpoint = latest_checkpoint(checkpoint);
    auto st = read_checkpoint(checkpoint);
    auto p = predictions_of(cfg, *net, st, batch);
    fmt::print("{}\n", body_of(batch, schema));
    auto width = net->prediction_width();
    std::string out = "[";
    for (uint64_t r = 0; r < batch.rows; ++r) {
      out += r == 0 ? "" : ", ";
      if (width == 1) {
        out += fmt::format("{}", p[r]);
        continue;
      }
      out += "[";
      for (uint32_t k = 0; k < width; ++k)
        out += (k == 0 ? "" : ", ") + fmt::format("{}", p[r * width + k]);
      out += "]";
    }
    fmt::print("{}]\n", out);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "predict_probe: {}\n", e.what());
    return 2;
  }
}
