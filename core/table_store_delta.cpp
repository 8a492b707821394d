#include "core/table_store.hpp"

#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/table_changes.hpp"
#include "core/table_store_impl.hpp"

namespace actorps {

// -- checkpoints --------------------------------------------------------------

table_store::contents table_store::export_rows() const {
  return detail::export_all_rows(impl_->rows);
}

void table_store::import_rows(contents c) {
  auto& d = *impl_;
  auto index = detail::check_table_contents(def_, d.rows.slots.size(), c);
  // The new rows, built beside the old ones: nothing changes on bad_alloc.
  detail::table_rows fresh;
  fresh.dim = d.rows.dim;
  fresh.slot_inits = d.rows.slot_inits;
  fresh.stride = d.rows.stride;
  fresh.updated_word = d.rows.updated_word;
  fresh.accessed_word = d.rows.accessed_word;
  fresh.frequency_word = d.rows.frequency_word;
  fresh.keep_changed = d.rows.keep_changed;
  fresh.capacity_limit = d.rows.capacity_limit;
  fresh.index = std::move(index);
  fresh.keys = std::move(c.keys);
  fresh.values = std::move(c.values);
  fresh.slots = std::move(c.slots);
  fresh.assign_records(c.steps, d.stamps(), true);
  if (d.changes.tracking())
    for (auto key : d.rows.keys)
      if (!fresh.index.contains(key))
        d.changes.removed(key);
  // Nothing below throws: commit.
  d.rows = std::move(fresh);
  d.cursor = 0;
}

void table_store::mark_clean() {
  auto& d = *impl_;
  d.changes.mark(d.rows);
}

table_store::contents table_store::export_changed() const {
  auto& d = *impl_;
  return d.changes.changed_rows(d.rows);
}

std::vector<uint64_t> table_store::removed_since_mark() const {
  auto& d = *impl_;
  return d.changes.removed_keys(d.rows);
}

void table_store::apply_delta(contents changed,
                              const std::vector<uint64_t>& removed) {
  auto& d = *impl_;
  auto& rows = d.rows;
  auto dim = def_.dim;
  detail::check_table_contents(def_, rows.slots.size(), changed);
  auto bad = first_invalid_key(removed.data(), removed.size());
  if (bad != removed.size())
    throw std::invalid_argument(
      fmt::format("table {}: removed key {} is outside the vocabulary of {}",
                  def_.variable, removed[bad], def_.vocabulary));
  for (auto key : removed)
    if (auto it = rows.index.find(key); it != rows.index.end())
      d.remove_row(it->second, detail::eviction_cause::none);
  auto st = d.stamps();
  for (size_t i = 0; i < changed.keys.size(); ++i) {
    uint32_t r;
    if (auto it = rows.index.find(changed.keys[i]); it != rows.index.end())
      r = it->second;
    else
      r = rows.append(changed.keys[i], st);
    std::memcpy(rows.values.data() + r * dim, changed.values.data() + i * dim,
                dim * sizeof(float));
    for (size_t s = 0; s < rows.slots.size(); ++s)
      std::memcpy(rows.slots[s].data() + r * dim,
                  changed.slots[s].data() + i * dim, dim * sizeof(float));
    rows.set_record(r, changed.steps[i], st);
    rows.mark_changed(r);
  }
}

} // namespace actorps
