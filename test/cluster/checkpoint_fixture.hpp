#pragma once

// Checkpoints as a job would write them, without an actor system: for the
// tests of cluster/checkpoint_fit and cluster/checkpointer.

#include <string>
#include <vector>

#include "cluster/services/checkpoint_fit.hpp"
#include "cluster/net/handshake.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "core/checkpoint.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "core/update_rule.hpp"
#include "models/model.hpp"
#include "models/registry.hpp"

namespace actorps::test {

/// Fashion-MNIST's shape, without reading its files.
inline data_schema images() {
  data_schema s;
  s.dense_dim = 784;
  s.labels = label_kind::multiclass;
  s.classes = 10;
  return s;
}

/// A9a's shape: one weighted field of 123 features, binary labels.
inline data_schema sparse() {
  data_schema s;
  s.fields.push_back(field_schema{"features", 123, true});
  s.labels = label_kind::binary;
  return s;
}

inline placement layout_of(const job_config& cfg, const data_schema& schema) {
  return job_placement(cfg, *make_model(cfg, schema));
}

/// What job `cfg` would write as a checkpoint at step 200: every shard of its
/// placement, value i of a dense shard = its first row + i / 1000, slots of
/// the rule at 7, table shards with keys 3 and 5.
inline checkpoint_state written_by(const job_config& cfg,
                                   const data_schema& schema = images()) {
  auto layout = layout_of(cfg, schema);
  checkpoint_state st;
  st.global_step = 200;
  st.epoch = 1;
  st.workers.assign(cfg.workers, data_position{1, 0});
  st.ps_clocks.assign(cfg.ps, 200);
  st.optimizer_steps.assign(cfg.ps, 200);
  st.job = checkpoint_job_fields(make_fingerprint(cfg, layout));
  auto slots = make_update_rule(cfg.optimizer)->slot_count();
  auto table_slots = make_update_rule(cfg.table_optimizer)->slot_count();
  for (auto& s : layout.shards) {
    auto& var = layout.variables[s.variable];
    checkpoint_shard c;
    c.variable = var.name;
    c.index = s.index;
    c.cols = var.cols;
    c.ps = s.ps;
    if (s.kind == variable_kind::table) {
      c.table = true;
      c.keys = {3, 5};
      c.steps = {4, 9};
      c.values.assign(2 * var.cols, 0.5f);
      c.slots.assign(table_slots, std::vector<float>(2 * var.cols, 7.0f));
    } else {
      c.row_begin = s.row_begin;
      c.row_end = s.row_end;
      for (uint64_t i = 0; i < s.size; ++i)
        c.values.push_back(float(s.row_begin) + float(i) / 1000.0f);
      c.slots.assign(slots, std::vector<float>(s.size, 7.0f));
    }
    st.shards.push_back(std::move(c));
  }
  return st;
}

} // namespace actorps::test
