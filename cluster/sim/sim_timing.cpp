#include "cluster/sim/sim_timing.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "cluster/topology/local_cluster.hpp"
#include "core/dataset.hpp"
#include "core/error.hpp"
#include "core/wire_format.hpp"
#include "core/wire_plan.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

/// The name of the stand-in's dense variable.
constexpr const char* standin_name = "timing_only";

class standin final : public model {
public:
  standin(std::shared_ptr<const model> real, uint32_t servers)
    : real_(std::move(real)) {
    vars_.push_back(variable_def::dense(standin_name, servers, 1));
    for (auto& v : real_->variables())
      if (v.kind == variable_kind::table)
        vars_.push_back(v);
  }

  std::vector<variable_def> variables() const override {
    return vars_;
  }

  void check_schema(const data_schema& schema) const override {
    real_->check_schema(schema);
  }

  void initialize(float* dense, uint64_t) const override {
    std::fill(dense, dense + vars_.front().size(), 0.0f);
  }

  std::unique_ptr<model_workspace> make_workspace(uint64_t) const override {
    return std::make_unique<model_workspace>();
  }

  void collect_keys(const example_batch& batch,
                    std::vector<table_lookup>& tables) const override {
    real_->collect_keys(batch, tables);
  }

  double loss_and_gradient(const model_inputs&, const example_batch&,
                           float* dense_grad,
                           model_workspace&) const override {
    std::fill(dense_grad, dense_grad + vars_.front().size(), 0.0f);
    return 0.0;
  }

  void evaluate(const model_inputs&, const example_batch&, eval_accumulator&,
                model_workspace&) const override {
    // nop: no metrics without the arithmetic
  }

  metric_list metrics(const eval_accumulator&) const override {
    return {};
  }

private:
  std::shared_ptr<const model> real_;
  std::vector<variable_def> vars_;
};

class featureless final : public batch_source {
public:
  explicit featureless(std::shared_ptr<batch_source> real)
    : real_(std::move(real)) {
    // nop
  }

  void next(example_batch& out) override {
    static example_batch scratch; // one simulation thread
    real_->next(scratch);
    out.rows = scratch.rows;
    out.dense_dim = 0;
    out.dense.clear();
    out.fields = scratch.fields;
    out.labels = scratch.labels;
  }

  void seek(data_position pos) override {
    real_->seek(pos);
  }

  data_position position() const override {
    return real_->position();
  }

  uint64_t batch_size() const override {
    return real_->batch_size();
  }

  uint64_t shard_rows() const override {
    return real_->shard_rows();
  }

  const data_schema& schema() const override {
    return real_->schema();
  }

private:
  std::shared_ptr<batch_source> real_;
};

} // namespace

uint64_t dense_wire_bytes(const std::string& format, uint64_t floats) {
  if (floats == 0)
    return 0;
  if (format.empty() || format == "fp32")
    return floats * sizeof(float);
  return make_wire_format(format)->encoded_bytes(floats);
}

timing_job make_timing_job(const job_config& cfg,
                           std::shared_ptr<const model> real,
                           const placement& real_layout) {
  timing_job job;
  job.cfg = cfg;
  job.cfg.partitioner = partitioner_config{};
  job.cfg.partitioner.type = partitioner_config::kind::fixed_shards;
  job.cfg.partitioner.num_shards = cfg.ps;
  // The stand-in has none of the real variables: their formats are charged
  // through push_bytes below.
  job.cfg.variable_formats.clear();
  job.net = std::make_shared<const standin>(real, cfg.ps);
  job.layout = std::make_shared<const placement>(
    job_placement(job.cfg, *job.net));
  auto wire = wire_options_of(cfg, real_layout);
  auto plan = make_push_plan(real_layout, wire.push_format,
                             wire.variable_formats);
  for (uint32_t p = 0; p < cfg.ps; ++p) {
    auto floats = p < real_layout.ps_sizes.size() ? real_layout.ps_sizes[p]
                                                   : 0;
    job.pull_bytes.push_back(dense_wire_bytes(cfg.pull_format, floats));
    job.push_bytes.push_back(p < plan.size() ? encoded_bytes(plan, p) : 0);
  }
  return job;
}

std::shared_ptr<batch_source>
timing_source(std::shared_ptr<batch_source> real) {
  return std::make_shared<featureless>(std::move(real));
}

} // namespace actorps
