#include "core/table_changes.hpp"

#include <string>

#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>

namespace actorps::detail {

void change_log::mark(table_rows& rows) {
  rows.clear_changes();
  tracking_ = true;
  tombstones_.clear();
}

namespace {

/// Appends row r of `rows` to `out`.
void append_row(const table_rows& rows, size_t r,
                table_store::contents& out) {
  auto dim = rows.dim;
  out.keys.push_back(rows.keys[r]);
  out.steps.push_back(rows.step(r));
  auto from = rows.values.begin() + r * dim;
  out.values.insert(out.values.end(), from, from + dim);
  for (size_t s = 0; s < rows.slots.size(); ++s) {
    auto slot = rows.slots[s].begin() + r * dim;
    out.slots[s].insert(out.slots[s].end(), slot, slot + dim);
  }
}

} // namespace

table_store::contents change_log::changed_rows(const table_rows& rows) const {
  if (!tracking_)
    return export_all_rows(rows);
  table_store::contents result;
  result.slots.resize(rows.slots.size());
  for (size_t w = 0; w < rows.changed.size(); ++w)
    for (auto bits = rows.changed[w]; bits != 0; bits &= bits - 1)
      append_row(rows, w * 64 + static_cast<size_t>(__builtin_ctzll(bits)),
                 result);
  return result;
}

std::vector<uint64_t> change_log::removed_keys(const table_rows& rows) const {
  std::vector<uint64_t> result;
  absl::flat_hash_set<uint64_t> seen;
  for (auto key : tombstones_)
    if (!rows.index.contains(key) && seen.insert(key).second)
      result.push_back(key);
  return result;
}

table_store::contents export_all_rows(const table_rows& rows) {
  table_store::contents result;
  result.keys = rows.keys;
  result.values = rows.values;
  result.slots = rows.slots;
  result.steps.resize(rows.size());
  for (size_t r = 0; r < rows.size(); ++r)
    result.steps[r] = rows.step(r);
  return result;
}

absl::flat_hash_map<uint64_t, uint32_t>
check_table_contents(const table_shard_def& def, size_t slot_count,
                     const table_store::contents& c) {
  auto n = c.keys.size();
  auto dim = def.dim;
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument(
      fmt::format("table {}: {}", def.variable, what));
  };
  if (n > max_table_rows)
    fail(fmt::format("{} rows; a shard holds at most {}", n, max_table_rows));
  auto check_floats = [&](const std::vector<float>& xs, const char* what) {
    if (xs.size() % dim != 0 || xs.size() / dim != n)
      fail(fmt::format("{} {} floats for {} rows of dimension {} (expected "
                       "{})",
                       xs.size(), what, n, dim, n * dim));
  };
  check_floats(c.values, "value");
  if (c.slots.size() != slot_count)
    fail(fmt::format("{} slots, but its update rule keeps {}", c.slots.size(),
                     slot_count));
  for (auto& slot : c.slots)
    check_floats(slot, "slot");
  if (c.steps.size() != n)
    fail(fmt::format("{} step counts for {} rows", c.steps.size(), n));
  for (auto key : c.keys)
    if (def.vocabulary != 0 && key >= def.vocabulary)
      fail(fmt::format("key {} is outside the vocabulary of {}", key,
                       def.vocabulary));
  absl::flat_hash_map<uint64_t, uint32_t> index;
  index.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (!index.try_emplace(c.keys[i], static_cast<uint32_t>(i)).second)
      fail(fmt::format("key {} appears twice", c.keys[i]));
  return index;
}

} // namespace actorps::detail
