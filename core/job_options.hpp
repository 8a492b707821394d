#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/job_config.hpp"

namespace actorps {

// -- reaching a field ---------------------------------------------------------

/// Returns a reference to one field of a job_config.
template <class T>
using field_access = T& (*)(job_config&);

/// The field at the end of a chain of member pointers, as a field_access:
/// `field<&job_config::replicas>` or
/// `field<&job_config::optimizer, &optimizer_config::learning_rate>`.
template <auto... Members>
auto& field(job_config& cfg) {
  return (cfg .* ... .* Members);
}

/// A field of an enum type, read and written as one of the row's words.
struct word_access {
  std::string (*get)(const job_config&);
  /// Called only with one of the row's words.
  void (*set)(job_config&, const std::string&);
};

/// How a row reaches its field; std::monostate: the field is read by hand
/// (parse_job_config) and its flag, if any, set by `job_option::set_flag`.
using option_field
  = std::variant<std::monostate, field_access<bool>, field_access<uint32_t>,
                 field_access<uint64_t>, field_access<float>,
                 field_access<std::string>, word_access>;

// -- the table ----------------------------------------------------------------

/// One job option: a field of job_config with its config key, its flag of
/// `actorps train` / `launch` / `node` / `simulate`, its bounds and one line
/// of help. The table (job_options()) drives the config parser
/// (parse_job_config), the job flags (apps/cli.cpp), their --help and
/// docs/reference/config.md (config_reference()); a default is the one of
/// job_config's member initialisers, written there only.
///
/// Options that do not fit a row of plain values are rows "read by hand"
/// (std::monostate field): model.layers, optimizer.staleness_aware,
/// table_optimizer.staleness_aware, cluster.variable_formats, cluster.tls,
/// tables.per_table and faults; parse_job_config reads them and their flags
/// have a `set_flag`.
/// Flags that set no config key (--config, --restore, --metrics-port, ...)
/// live in apps/cli.cpp; a model's, a dataset's and an update rule's own
/// fields are checked by them (option_reader, core/rules/).
struct job_option {
  /// "cluster.replication_lag": the section (which may have a dot itself:
  /// "cluster.tls"), a dot, the field.
  std::string key;
  /// "--replication-lag", or "" when only the config sets it.
  std::string flag;
  option_field field;
  /// Whole numbers: the bounds, inclusive.
  uint64_t min = 0;
  uint64_t max = 0;
  /// Floats: the bounds, inclusive.
  double min_real = 0;
  double max_real = 0;
  /// Strings and enums: the only values accepted (empty: any string, which
  /// validate() or a registry checks).
  std::vector<std::string> words;
  /// The flag's value in --help ("N", "DIR"); "" for a switch (a bool flag
  /// without a value, which sets true).
  std::string value_name;
  /// One line: what it does, and what 0 or "" means where that is special.
  std::string help;
  /// Rows read by hand: the value's shape, in words.
  std::string shape;
  /// Rows read by hand: the default, as a config writes it. Also a row
  /// whose config default differs from job_config's initialiser:
  /// partitioner.num_shards, 0 (one shard per ps) in a config, where a
  /// job_config built in code keeps partitioner_config's 1.
  std::string default_text;
  /// How the flag sets the field where it does more than assign its value
  /// (a repeatable flag, one that sets two fields); nullptr: as the row says.
  void (*set_flag)(job_config&, const std::string& value) = nullptr;

  /// "cluster" of "cluster.replication_lag", "cluster.tls" of
  /// "cluster.tls.ca".
  std::string section() const;

  /// "replication_lag" of "cluster.replication_lag".
  std::string name() const;

  /// Whether parse_job_config reads it by hand.
  bool by_hand() const {
    return std::holds_alternative<std::monostate>(field);
  }
};

/// Every job option, by config section (model, data, cluster, optimizer,
/// table_optimizer, partitioner, training, faults). Built once; safe to
/// read from any thread.
const std::vector<job_option>& job_options();

/// The row whose flag is `flag`, or nullptr.
const job_option* find_job_flag(const std::string& flag);

/// The row whose config key is `key`, or nullptr.
const job_option* find_job_key(const std::string& key);

// -- values -------------------------------------------------------------------

/// Sets the row's field from the value of its flag (for a switch: "").
/// @throws input_error naming the flag and quoting the value: not a whole
///         number or a number, out of the row's bounds, not one of its
///         words, not on or off; or as the row's set_flag.
void set_from_flag(job_config& cfg, const job_option& row,
                   const std::string& value);

/// Sets the row's field from `value`, written as its flag's value, without
/// the row's set_flag (for a row read by hand: std::logic_error). Errors
/// name `label` ("--admit-after", "tables.per_table.user.admit_after").
/// @throws input_error "LABEL: ..." as set_from_flag.
void set_from_text(job_config& cfg, const job_option& row,
                   const std::string& value, const std::string& label);

/// Why `value` is not one of the row's words ("\"cores\": must be \"auto\"
/// or \"none\""), or "" if it is one (or the row takes any string).
std::string word_problem(const job_option& row, const std::string& value);

/// Reads `value`, the value of `flag`, as a whole number in [lo, hi].
/// @throws input_error naming the flag and quoting the value.
uint64_t to_count(const std::string& flag, const std::string& value,
                  uint64_t lo, uint64_t hi);

// -- text ---------------------------------------------------------------------

/// The row's value type in words: "bool", "integer", "number", "string",
/// "word", or its shape for rows read by hand.
std::string type_text(const job_option& row);

/// The row's bounds in words: "1 .. 1000000", "`chain`, `async`", or "".
std::string bounds_text(const job_option& row);

/// The row's default as the config writes it (2, true, "chain"), taken from
/// job_config{}; its default_text where it has one.
std::string default_text(const job_option& row);

/// docs/reference/config.md: a header, then one line per row (key, flag,
/// type, bounds, default, help). `actorps config-reference` prints it.
std::string config_reference();

} // namespace actorps
