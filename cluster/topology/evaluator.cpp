#include "cluster/topology/evaluator.hpp"

#include <cstring>
#include <fstream>
#include <thread>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "actors/telemetry.hpp"
#include "cluster/services/checkpoint_fit.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/net/tls.hpp"
#include "cluster/services/metrics_endpoint.hpp"
#include "cluster/job/stop_request.hpp"
#include "core/data_registry.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/table_store.hpp"
#include "core/seconds.hpp"
#include "models/evaluate.hpp"
#include "models/registry.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

/// The step in a checkpoint directory's name ("ROOT/ckpt-0000000200").
uint64_t step_of(const std::string& dir) {
  auto at = dir.rfind("ckpt-");
  return at == std::string::npos ? 0
                                 : std::strtoull(dir.c_str() + at + 5, nullptr,
                                                 10);
}

/// The evaluator's numbers on the metrics endpoint.
struct evaluator_metrics {
  prometheus::Family<prometheus::Gauge>& metric
    = prometheus::BuildGauge()
        .Name("actorps_evaluator_metric")
        .Help("Test metrics of the last checkpoint the evaluator evaluated")
        .Register(telemetry::registry());
  prometheus::Gauge& step
    = prometheus::BuildGauge()
        .Name("actorps_evaluator_checkpoint_step")
        .Help("Global step of the last checkpoint evaluated")
        .Register(telemetry::registry())
        .Add({});
  prometheus::Family<prometheus::Counter>& checkpoints
    = prometheus::BuildCounter()
        .Name("actorps_evaluator_checkpoints_total")
        .Help("Checkpoints the evaluator evaluated or skipped (outcome)")
        .Register(telemetry::registry());
};

/// Appends one JSON object per line, flushed at once ("" = nowhere).
class json_lines {
public:
  explicit json_lines(const std::string& path) {
    if (path.empty())
      return;
    out_.open(path, std::ios::trunc);
    if (!out_)
      throw input_error(fmt::format("--metrics-out: cannot write {}", path));
  }

  void write(const nlohmann::json& obj) {
    if (out_.is_open())
      out_ << obj.dump() << '\n' << std::flush;
  }

private:
  std::ofstream out_;
};

} // namespace

namespace {

/// The flat dense buffer and the rows `data` needs, from checkpoint `st`
/// (see evaluate_checkpoint).
void checkpoint_inputs(const checkpoint_state& st, const placement& layout,
                       const model& net, const job_config& cfg,
                       const dataset& data, std::vector<float>& dense,
                       std::vector<table_lookup>& tables) {
  auto var_of = [&](const std::string& name) {
    for (uint32_t v = 0; v < layout.variables.size(); ++v)
      if (layout.variables[v].name == name)
        return v;
    throw input_error(fmt::format("checkpoint: unknown variable \"{}\"", name));
  };
  dense.assign(layout.model_size, 0.0f);
  // Per table variable: where each key's row is in the checkpoint.
  absl::flat_hash_map<uint32_t,
                      absl::flat_hash_map<uint64_t, const float*>> rows;
  for (auto& sh : st.shards) {
    auto v = var_of(sh.variable);
    if (sh.table) {
      auto& index = rows[v];
      for (size_t i = 0; i < sh.keys.size(); ++i)
        index.emplace(sh.keys[i], sh.values.data() + i * sh.cols);
      continue;
    }
    auto offset = layout.variable_offsets[v] + sh.row_begin * sh.cols;
    if (offset + sh.values.size() > dense.size())
      throw input_error(fmt::format("checkpoint: shard {} of {} does not fit "
                                    "the model",
                                    sh.index, sh.variable));
    std::copy(sh.values.begin(), sh.values.end(), dense.begin() + offset);
  }
  tables = keys_of(net, layout, data);
  for (auto& t : tables) {
    auto& var = layout.variables[t.variable];
    table_shard_def def{var.name, var.cols, var.rows, var.init_scale,
                        cfg.init_seed};
    auto& index = rows[t.variable];
    for (size_t u = 0; u < t.keys.size(); ++u) {
      auto* out = t.rows.data() + u * t.dim;
      auto i = index.find(t.keys[u]);
      if (i != index.end())
        std::memcpy(out, i->second, t.dim * sizeof(float));
      else
        initial_row(def, t.keys[u], out);
    }
  }
}

} // namespace

metric_list evaluate_checkpoint(const checkpoint_state& st,
                                const placement& layout, const model& net,
                                const job_config& cfg, const dataset& data,
                                unsigned threads) {
  std::vector<float> dense;
  std::vector<table_lookup> tables;
  checkpoint_inputs(st, layout, net, cfg, data, dense, tables);
  return evaluate_model(net, dense.data(), tables, data, threads);
}

std::vector<float> predict_checkpoint(const checkpoint_state& st,
                                      const placement& layout,
                                      const model& net, const job_config& cfg,
                                      const dataset& data, unsigned threads) {
  std::vector<float> dense;
  std::vector<table_lookup> tables;
  checkpoint_inputs(st, layout, net, cfg, data, dense, tables);
  return predict_model(net, dense.data(), tables, data, threads);
}

int run_evaluator(const job_config& cfg, const evaluator_options& opts) {
  if (cfg.checkpoint_dir.empty())
    throw input_error("evaluator: the job has no checkpoint_dir to watch "
                      "(--checkpoint-dir, training.checkpoint_dir)");
  auto start = steady_clock::now();
  json_lines jsonl{opts.metrics_out};
  auto endpoint = open_metrics_endpoint(
    opts.metrics_port,
    metrics_settings{opts.metrics_address, opts.metrics_auth,
                     opts.metrics_token, opts.metrics_tls},
    "127.0.0.1", "evaluator", 0, cfg.tls, node_identity{"evaluator", 0});
  auto data = open_dataset(cfg);
  auto net = make_model(cfg, data->schema());
  auto layout = job_placement(cfg, *net);
  auto test = data->test_set();
  evaluator_metrics prom;
  log::info("evaluator", 0, "watching {} for checkpoints of {} ({} test "
            "examples)",
            cfg.checkpoint_dir, data->describe(), test->rows());
  // The newest checkpoint looked at (evaluated or skipped), by step.
  uint64_t last = 0;
  bool any = false;
  for (;;) {
    if (stop_requested()) {
      log::info("evaluator", 0, "stop requested");
      return exit_stopped;
    }
    auto dir = latest_checkpoint(cfg.checkpoint_dir);
    if (dir.empty() || (any && step_of(dir) <= last)) {
      std::this_thread::sleep_for(opts.poll);
      continue;
    }
    any = true;
    last = step_of(dir);
    auto t0 = steady_clock::now();
    checkpoint_state st;
    metric_list m;
    try {
      st = read_checkpoint(dir);
      // A checkpoint of another number of ps is re-cut for this layout
      // (core/checkpoint_reshard.hpp), as a restore does.
      reshard_to_fit(st, cfg, layout, dir, true);
      check_checkpoint_variables(st, cfg, layout, dir);
      m = evaluate_checkpoint(st, layout, *net, cfg, *test, opts.threads);
    } catch (const input_error& e) {
      // Corrupt, truncated, pruned while being read, or another job's.
      log::warn("evaluator", 0, "skipping {}: {}", dir, e.what());
      jsonl.write({{"type", "skipped"}, {"checkpoint", dir},
                   {"reason", e.what()}});
      prom.checkpoints.Add({{"outcome", "skipped"}}).Increment();
      continue;
    }
    auto eval_s = seconds(steady_clock::now() - t0);
    std::string text;
    for (auto& [name, value] : m)
      text += fmt::format("  {} {:.4f}", name, value);
    if (opts.out != nullptr) {
      fmt::print(opts.out, "evaluator: {} (epoch {}, step {}):{}  ({:.2f} s)\n",
                 dir, st.epoch, st.global_step, text, eval_s);
      std::fflush(opts.out);
    }
    nlohmann::json obj{{"type", "evaluation"},
                       {"checkpoint", dir},
                       {"global_step", st.global_step},
                       {"epoch", st.epoch},
                       {"step_in_epoch", st.step_in_epoch}};
    for (auto& [name, value] : m)
      obj[name] = value;
    obj["eval_s"] = eval_s;
    obj["elapsed_s"] = seconds(steady_clock::now() - start);
    jsonl.write(obj);
    for (auto& [name, value] : m)
      prom.metric.Add({{"metric", name}}).Set(value);
    prom.step.Set(static_cast<double>(st.global_step));
    prom.checkpoints.Add({{"outcome", "evaluated"}}).Increment();
    if (st.epoch >= cfg.epochs && st.step_in_epoch == 0) {
      log::info("evaluator", 0, "evaluated the last checkpoint of the job "
                "(epoch {}); done",
                st.epoch);
      return 0;
    }
  }
}

} // namespace actorps
