#pragma once

// Tables with an admission and eviction policy of their own: the config's
// tables.per_table and the flag --table-policy, checked and stored in
// job_config::table_overrides, and the policies of a job's tables built from
// them (table_policies_of).

#include <string>
#include <vector>

#include "core/job_config.hpp"
#include "core/table_policy.hpp"

namespace actorps {

/// The fields a table's own policy may set: admit_after, filter,
/// filter_counters, steps_to_live, l2_threshold, max_rows, max_bytes and
/// evict. Each is read as the option table's row `tables.FIELD` says (its
/// type, bounds and words; 0 = none, as there); tables.sweep_rows is per
/// server, not per table.
const std::vector<std::string>& table_override_fields();

/// Sets `field` of table `table`'s own policy in `cfg` to `value`, written as
/// a flag writes it ("3", "0.5", "lfu"); the table's other fields keep the
/// job-wide values.
/// @throws input_error "LABEL: ..." for a field that is not one of
///         table_override_fields() (the error lists them) or a value its row
///         refuses (not a whole number or a number, out of its bounds, not one
///         of its words); `cfg` is unchanged then.
void set_table_override(job_config& cfg, const std::string& table,
                        const std::string& field, const std::string& value,
                        const std::string& label);

/// Reads --table-policy's value "TABLE.FIELD=VALUE"
/// ("embedding/user.admit_after=3") into `cfg`. The table is what comes
/// before the last dot before the first '=' (a table's name may hold dots, a
/// field's does not).
/// @throws input_error "--table-policy VALUE: ..." for another shape (no '=',
///         no dot, an empty table, field or value), or as set_table_override
///         with the label "--table-policy TABLE.FIELD".
void set_table_policy_flag(job_config& cfg, const std::string& value);

/// Checks every entry of cfg.table_overrides as set_table_override does (an
/// entry set in code skips that check until here).
/// @throws input_error "tables.per_table.TABLE.FIELD: ..." (without the
///         config's name; validate() adds it).
void check_table_overrides(const job_config& cfg);

/// The policies of `cfg`'s tables: table_policy_of(cfg) for every table,
/// and for each table of cfg.table_overrides the job-wide fields with its
/// own over them. Whether the tables exist is not checked here (the model is
/// not known): check_table_policy() does that at start.
/// @throws input_error as check_table_overrides and table_policy_of.
table_policies table_policies_of(const job_config& cfg);

} // namespace actorps
