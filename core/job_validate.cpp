#include "core/job_config.hpp"

// validate(): whether a parsed job's settings fit together (the checks
// that no single field's bounds can make), apart from reading them
// (core/job_config.cpp).

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "core/cpu_affinity.hpp"
#include "core/cpu_policy.hpp"
#include "core/data_registry.hpp"
#include "core/error.hpp"
#include "core/fault_spec.hpp"
#include "core/job_options.hpp"
#include "core/stream_config.hpp"
#include "core/table_overrides.hpp"
#include "core/update_rule.hpp"
#include "core/wire_format.hpp"

namespace actorps {

void validate(const job_config& cfg) {
  auto fail = [&](const std::string& field, const std::string& what) {
    throw input_error(fmt::format("{}: {}: {}", cfg.source, field, what));
  };
  if (!cfg.layers.empty() && cfg.layers.size() < 2)
    fail("model.layers", "needs at least an input and an output width");
  {
    auto names = dataset_names();
    if (std::find(names.begin(), names.end(), cfg.dataset) == names.end()) {
      std::string known;
      for (auto& n : names)
        known += (known.empty() ? "" : ", ") + n;
      fail("data.dataset",
           "unknown dataset \"" + cfg.dataset + "\" (known: " + known + ")");
    }
  }
  if (!cfg.stream_dir.empty()) {
    try {
      validate(stream_config_of(cfg));
    } catch (const input_error& e) {
      throw input_error(fmt::format("{}: {}", cfg.source, e.what()));
    }
  }
  try {
    make_update_rule(cfg.optimizer, "optimizer");
    make_update_rule(cfg.table_optimizer, "table_optimizer");
  } catch (const input_error& e) {
    throw input_error(fmt::format("{}: {}", cfg.source, e.what()));
  }
  for (auto [section, rule] :
       {std::pair{"optimizer", &cfg.optimizer},
        std::pair{"table_optimizer", &cfg.table_optimizer}})
    if (rule->staleness_aware && !accepts_scaled_step(*rule))
      fail(std::string{section} + ".staleness_aware",
           rule->type + " recomputes its weights from its slots, so a "
           "scaled step has no lasting effect: use sgd, adagrad or adam");
  if (cfg.divergence_factor != 0 && !(cfg.divergence_factor > 1))
    fail("training.divergence_factor",
         fmt::format("{}: must be 0 (off) or above 1", cfg.divergence_factor));
  if (cfg.workers == 0)
    fail("cluster.workers", "must be at least 1");
  if (cfg.ps == 0)
    fail("cluster.ps", "must be at least 1");
  if (cfg.groups != 0 && cfg.groups < cfg.ps)
    fail("cluster.groups",
         fmt::format("{} groups for {} parameter servers: every server "
                     "starts with a group, so it must be 0 (one per server) "
                     "or at least cluster.ps",
                     cfg.groups, cfg.ps));
  if (cfg.groups > uint64_t{cfg.ps} * max_groups_per_ps)
    fail("cluster.groups",
         fmt::format("{} groups for {} parameter servers: at most {} per "
                     "server",
                     cfg.groups, cfg.ps, max_groups_per_ps));
  if (cfg.replicas > 1)
    fail("cluster.replicas", "must be 0 or 1");
  if (cfg.max_ps != 0 && cfg.max_ps < cfg.ps)
    fail("cluster.max_ps", fmt::format("{} is fewer than cluster.ps ({}); "
                                       "0 means cluster.ps",
                                       cfg.max_ps, cfg.ps));
  if (cfg.replicas > 0 && cfg.ps < 2)
    fail("cluster.replicas",
         "a backup lives on another parameter server: needs cluster.ps >= 2");
  // The option table's words, for fields set in code.
  for (auto [key, value] : {std::pair{"cluster.replication", &cfg.replication},
                            std::pair{"training.mode", &cfg.mode}})
    if (auto why = word_problem(*find_job_key(key), *value); !why.empty())
      fail(key, why);
  parse_cpu_policy(cfg.cpu_policy, cfg.source + ": cluster.cpu_policy");
  parse_cpu_affinity(cfg.cpu_affinity, cfg.source + ": cluster.cpu_affinity");
  if (cfg.replication_lag == 0 || cfg.replication_lag > 1000000)
    fail("cluster.replication_lag", "must be in 1 .. 1000000");
  // Settings that only asynchronous training allows, and why.
  auto needs_async = [&](bool set, const char* field, const char* why) {
    if (set && cfg.mode != "async")
      fail(field, fmt::format("needs training.mode \"async\" (this job: "
                              "\"{}\"): {}",
                              cfg.mode, why));
  };
  const char* pulled_ahead = "under sync and ssp a server may hold a pull, "
                             "and values pulled ahead would count against "
                             "the staleness bound";
  needs_async(cfg.overlap, "cluster.overlap", pulled_ahead);
  needs_async(cfg.prefetch, "cluster.prefetch", pulled_ahead);
  if (cfg.prefetch && cfg.overlap)
    fail("cluster.prefetch",
         "and cluster.overlap both pull the next step's values ahead, "
         "before the push (overlap) or right behind it (prefetch): choose "
         "one");
  needs_async(cfg.layer_pushes, "cluster.layer_pushes",
              "a push in pieces is applied piece by piece, which a sync "
              "round's mean or ssp's clocks do not allow");
  auto no_residual_with_layers = [&](const std::string& field,
                                     const wire_format& f) {
    if (cfg.layer_pushes && f.uses_residual())
      fail(field, fmt::format("\"{}\" with cluster.layer_pushes: a format "
                              "with error feedback (top-k, int8) encodes a "
                              "whole run with its residual, which layer "
                              "pushes cut into pieces; use fp32, bf16, fp16 "
                              "or auto",
                              f.name()));
  };
  auto format_of = [&](const std::string& field, const std::string& spec) {
    std::shared_ptr<const wire_format> f;
    try {
      f = make_wire_format(spec);
    } catch (const input_error& e) {
      fail(field, e.what());
    }
    no_residual_with_layers(field, *f);
  };
  if (cfg.push_format != "auto")
    format_of("cluster.push_format", cfg.push_format);
  for (auto& [name, spec] : cfg.variable_formats)
    format_of("cluster.variable_formats." + name, spec);
  std::shared_ptr<const wire_format> pull_format;
  try {
    pull_format = make_wire_format(cfg.pull_format == "auto" ? "fp32"
                                                             : cfg.pull_format);
  } catch (const input_error& e) {
    fail("cluster.pull_format", e.what());
  }
  if (pull_format->is_sparse())
    fail("cluster.pull_format",
         fmt::format("\"{}\": values are pulled whole (fp32, bf16, fp16 or "
                     "int8), not sparsified",
                     cfg.pull_format));
  if (cfg.batch_size == 0)
    fail("data.batch_size", "must be at least 1");
  // Workers that join take the next indices: a later leave may name them.
  auto joins = static_cast<uint32_t>(
    std::count_if(cfg.faults.begin(), cfg.faults.end(), [](const auto& f) {
      return f.action == fault_spec::kind::join && f.role == "worker";
    }));
  for (size_t i = 0; i < cfg.faults.size(); ++i) {
    auto& f = cfg.faults[i];
    auto field = fmt::format("faults[{}] ({})", i, to_string(f));
    if (f.role != "worker" && f.role != "ps")
      fail(field, "role must be worker or ps");
    // Workers that join or leave (membership); a parameter server's join,
    // leave and move are checked in step order below (check_server_plan).
    bool membership = f.role == "worker"
                      && (f.action == fault_spec::kind::join
                          || f.action == fault_spec::kind::leave);
    if (f.action == fault_spec::kind::move && f.role != "ps")
      fail(field, "a move acts on parameter servers: role ps");
    if (membership && cfg.sharding != "dynamic" && cfg.stream_dir.empty())
      fail(field, "workers join and leave a job whose examples the "
                  "coordinator hands out: data.sharding dynamic (with "
                  "static slices a new worker has no slice, and a leaving "
                  "one's would not be trained)");
    if (membership && cfg.mode != "async")
      fail(field, "workers join and leave an async job (sync and ssp count "
                  "a fixed set of workers per round)");
    if (f.role == "worker" && f.action != fault_spec::kind::join) {
      auto n = cfg.workers
               + (f.action == fault_spec::kind::leave
                      || f.action == fault_spec::kind::kill
                    ? joins
                    : 0);
      if (f.index >= n)
        fail(field, fmt::format("index {} is out of range: the job has {} "
                                "workers",
                                f.index, n));
    }
    bool messages = f.action == fault_spec::kind::drop
                    || f.action == fault_spec::kind::delay;
    if (messages && f.role != "ps")
      fail(field, "drop and delay act on messages to the ps only");
    if (f.action == fault_spec::kind::error && f.role != "worker")
      fail(field, "an error fault makes a worker's step throw: role worker");
    if (messages && !(f.share > 0))
      fail(field, "drop and delay need a share in (0, 1]");
    if ((f.action == fault_spec::kind::stop
         || f.action == fault_spec::kind::delay)
        && !(f.seconds > 0))
      fail(field, "a stop or delay needs seconds > 0");
  }
  size_t at = 0;
  auto plan = check_server_plan(cfg.faults, cfg.ps, &at);
  if (!plan.empty())
    fail(fmt::format("faults[{}] ({})", at, to_string(cfg.faults[at])), plan);
  if (cfg.heartbeat_interval_ms > 0
      && cfg.heartbeat_timeout_ms <= cfg.heartbeat_interval_ms)
    fail("cluster.heartbeat_timeout_ms",
         "must be larger than cluster.heartbeat_interval_ms");
  if (cfg.epochs == 0)
    fail("training.epochs", "must be at least 1");
  try {
    check_table_overrides(cfg);
  } catch (const input_error& e) {
    throw input_error(fmt::format("{}: {}", cfg.source, e.what()));
  }
}

} // namespace actorps
