// The settings derived from a job's config (core/job_config.hpp): the
// defaults that depend on the job (staleness-aware steps, prefetch), the
// tables' policy, the steps of an epoch. Parsing and validation are in
// job_config.cpp.

#include "core/job_config.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "core/table_policy.hpp"
#include "core/update_rule.hpp"

namespace actorps {

void resolve_staleness_aware(job_config& cfg) {
  bool many = cfg.mode == "async" && cfg.workers >= staleness_aware_workers;
  for (auto* rule : {&cfg.optimizer, &cfg.table_optimizer}) {
    if (rule->staleness_aware_chosen || rule->staleness_aware)
      continue; // chosen, or turned on by code
    rule->staleness_aware = many && accepts_scaled_step(*rule);
    rule->staleness_aware_chosen = true;
  }
}

std::string resolve_prefetch(job_config& cfg, bool between_processes) {
  if (cfg.prefetch_chosen)
    return {};
  cfg.prefetch_chosen = true;
  if (!between_processes)
    return {};
  if (cfg.mode != "async" || cfg.overlap || cfg.layer_pushes)
    return fmt::format("prefetch off (cluster.prefetch auto: {})",
                       cfg.mode != "async" ? "not with mode " + cfg.mode
                       : cfg.overlap       ? std::string{"overlap is on"}
                                           : std::string{"layer pushes are on"});
  cfg.prefetch = true;
  return "prefetch on (cluster.prefetch auto: between processes each "
         "worker's next pull goes right behind its push, saving a round "
         "trip per closure; --no-prefetch turns it off)";
}

table_policy table_policy_of(const job_config& cfg) {
  table_policy p;
  p.admit_after = static_cast<int64_t>(cfg.table_admit_after);
  p.filter = parse_admission_kind(cfg.table_filter);
  p.filter_counters = static_cast<int64_t>(cfg.table_filter_counters);
  if (cfg.table_steps_to_live > 0)
    p.steps_to_live = static_cast<int64_t>(cfg.table_steps_to_live);
  if (cfg.table_l2_threshold > 0)
    p.l2_threshold = cfg.table_l2_threshold;
  if (cfg.table_max_rows > 0)
    p.max_rows = static_cast<int64_t>(cfg.table_max_rows);
  if (cfg.table_max_bytes > 0)
    p.max_bytes = static_cast<int64_t>(cfg.table_max_bytes);
  p.evict = parse_eviction_order(cfg.table_evict);
  return p;
}

uint64_t effective_steps_per_epoch(const job_config& cfg, uint64_t train_rows) {
  if (cfg.steps_per_epoch > 0)
    return cfg.steps_per_epoch;
  return std::max<uint64_t>(1, train_rows / (cfg.batch_size * cfg.workers));
}

} // namespace actorps
