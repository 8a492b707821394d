#include "core/table_overrides.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/job_options.hpp"

namespace actorps {

namespace {

/// The row of `field` (tables.FIELD), or nullptr if a table's own policy
/// cannot set it.
const job_option* override_row(const std::string& field) {
  auto& fields = table_override_fields();
  if (std::find(fields.begin(), fields.end(), field) == fields.end())
    return nullptr;
  return find_job_key("tables." + field);
}

/// Applies one field to `cfg`'s job-wide fields: `cfg` then holds the
/// table's policy. @throws input_error naming `label`.
void apply_field(job_config& cfg, const std::string& field,
                 const std::string& value, const std::string& label) {
  auto* row = override_row(field);
  if (row == nullptr) {
    std::string known;
    for (auto& f : table_override_fields())
      known += (known.empty() ? "" : ", ") + f;
    throw input_error(fmt::format("{}: unknown field; a table's own policy "
                                  "sets {}",
                                  label, known));
  }
  set_from_text(cfg, *row, value, label);
}

} // namespace

const std::vector<std::string>& table_override_fields() {
  static const std::vector<std::string> fields = {
    "admit_after",  "filter",   "filter_counters", "steps_to_live",
    "l2_threshold", "max_rows", "max_bytes",       "evict"};
  return fields;
}

void set_table_override(job_config& cfg, const std::string& table,
                        const std::string& field, const std::string& value,
                        const std::string& label) {
  job_config scratch; // checked here, applied over the job-wide values later
  apply_field(scratch, field, value, label);
  cfg.table_overrides[table][field] = value;
}

void set_table_policy_flag(job_config& cfg, const std::string& value) {
  auto eq = value.find('=');
  auto dot = eq == std::string::npos ? std::string::npos
                                     : value.rfind('.', eq);
  if (eq == std::string::npos || dot == std::string::npos || dot == 0
      || dot + 1 == eq || eq + 1 == value.size())
    throw input_error(fmt::format("--table-policy {}: expected "
                                  "TABLE.FIELD=VALUE, e.g. "
                                  "embedding/user.admit_after=3",
                                  value));
  auto table = value.substr(0, dot);
  auto field = value.substr(dot + 1, eq - dot - 1);
  set_table_override(cfg, table, field, value.substr(eq + 1),
                     fmt::format("--table-policy {}.{}", table, field));
}

void check_table_overrides(const job_config& cfg) {
  for (auto& [table, fields] : cfg.table_overrides)
    for (auto& [field, value] : fields) {
      job_config scratch;
      apply_field(scratch, field, value,
                  fmt::format("tables.per_table.{}.{}", table, field));
    }
}

table_policies table_policies_of(const job_config& cfg) {
  table_policies out;
  out.defaults = table_policy_of(cfg);
  for (auto& [table, fields] : cfg.table_overrides) {
    auto own = cfg;
    for (auto& [field, value] : fields)
      apply_field(own, field, value,
                  fmt::format("tables.per_table.{}.{}", table, field));
    out.by_table[table] = table_policy_of(own);
  }
  return out;
}

} // namespace actorps
