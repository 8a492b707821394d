// Priority pulls (worker_options::priority_pulls): a step pulls each
// group's dense values in slices, one per forward stage of the model, and
// runs each stage as soon as every group's values for it are in. What the
// slices are and when a stage may run; the requests go out in
// worker_step.cpp (pull_slices).

#include <algorithm>
#include <stdexcept>

#include "actors/worker_state.hpp"
#include "core/log.hpp"

namespace actorps::detail {

namespace {

/// Merges each slice below `min_floats` into the one before it (the first
/// into the one after it), which then completes its stages too.
void merge_small_slices(std::vector<pull_slice>& xs, uint64_t min_floats) {
  std::vector<pull_slice> out;
  for (auto& x : xs) {
    if (!out.empty()
        && (x.to - x.from < min_floats
            || out.back().to - out.back().from < min_floats)) {
      out.back().to = x.to;
      out.back().stages = x.stages;
    } else {
      out.push_back(x);
    }
  }
  xs = std::move(out);
}

} // namespace

void plan_slices(worker_ptr self) {
  auto& st = self->state;
  auto n = static_cast<uint32_t>(st.slots.size());
  if (!st.opts.priority_pulls)
    return;
  auto& pl = *st.opts.layout;
  auto ends = st.opts.net->forward_stages();
  auto who = static_cast<int>(st.opts.index);
  if (ends.size() < 2) {
    if (st.opts.index == 0)
      log::info("worker", who,
                "priority pulls: the model's forward pass is one stage, so "
                "its values are pulled whole");
    return;
  }
  for (size_t s = 0; s < ends.size(); ++s)
    if (ends[s] > pl.model_size || (s > 0 && ends[s] < ends[s - 1])) {
      log::warn("worker", who,
                   "priority pulls: the model's forward stages are not "
                   "prefixes of its {} values (stage {} ends at {}); values "
                   "are pulled whole",
                   pl.model_size, s, ends[s]);
      return;
    }
  auto stages = static_cast<uint32_t>(ends.size());
  for (uint32_t p = 0; p < n; ++p) {
    auto region = pl.ps_sizes[p];
    auto& slot = st.slots[p];
    auto& out = slot.slices;
    uint64_t prev = 0;
    for (uint32_t s = 0; s < stages; ++s) {
      // The last slice takes the rest of the region.
      auto end = s + 1 == stages ? region : region_prefix(pl, p, ends[s]);
      if (end > prev)
        out.push_back(pull_slice{prev, end, s + 1});
      else if (!out.empty())
        out.back().stages = s + 1;
      else
        slot.stages_at_start = s + 1;
      prev = std::max(prev, end);
    }
    merge_small_slices(out, st.opts.min_slice_floats);
  }
  st.stage_ends = std::move(ends);
  if (st.opts.index == 0) {
    std::string per_group;
    for (uint32_t p = 0; p < n; ++p)
      per_group += fmt::format("{}group {}: {}", p == 0 ? "" : ", ", p,
                               st.slots[p].slices.size());
    log::info("worker", who,
              "priority pulls: {} forward stages; slices per pull of {}",
              stages, per_group);
  }
}

void begin_slices(worker_ptr self) {
  auto& st = self->state;
  st.staged = !st.stage_ends.empty() && st.step->staged;
  st.stages_run = 0;
  if (!st.staged)
    return;
  auto stages = static_cast<uint32_t>(st.stage_ends.size());
  for (uint32_t p = 0; p < st.slots.size(); ++p) {
    auto& slot = st.slots[p];
    slot.dense_stages = slot.slices.empty() ? stages : slot.stages_at_start;
    slot.slice_in.assign(slot.slices.size(), false);
    slot.slice_next = 0;
    slot.rows_in = !st.routes.has_keys(p);
  }
}

bool sliced(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  return st.staged && !st.slots[p].slices.empty();
}

uint32_t pull_parts(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  if (!sliced(self, p))
    return 1;
  auto& in = st.slots[p].slice_in;
  return static_cast<uint32_t>(std::count(in.begin(), in.end(), false));
}

void note_part(worker_ptr self, uint32_t p, bool dense, uint32_t slice,
               bool rows) {
  auto& st = self->state;
  if (!st.staged)
    return;
  auto& slot = st.slots[p];
  if (rows)
    slot.rows_in = true;
  if (!dense)
    return;
  if (slice == whole_region) {
    slot.dense_stages = static_cast<uint32_t>(st.stage_ends.size());
  } else {
    slot.slice_in[slice] = true;
    auto& next = slot.slice_next;
    while (next < slot.slices.size() && slot.slice_in[next])
      slot.dense_stages = slot.slices[next++].stages;
  }
}

bool run_ready_stages(worker_ptr self) {
  auto& st = self->state;
  uint32_t ready = static_cast<uint32_t>(st.stage_ends.size());
  for (auto& slot : st.slots)
    ready = std::min(ready, slot.rows_in ? slot.dense_stages : 0u);
  if (st.stages_run >= ready)
    return true;
  auto t0 = steady_clock::now();
  model_inputs in{st.params.data(), &st.tables, 0};
  try {
    for (; st.stages_run < ready; ++st.stages_run) {
      st.opts.net->forward_stage(in, st.batch, st.stages_run, *st.ws);
      ++st.result.early_stages;
    }
  } catch (const std::exception& e) {
    step_error(self, "the model", e);
    return false;
  }
  st.result.compute_s += seconds_since(t0);
  return true;
}

} // namespace actorps::detail
