#include "core/job_options.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "core/error.hpp"

// A row's values: read from a flag, written for --help and
// docs/reference/config.md (the table itself is in job_options.cpp).

namespace actorps {

std::string word_problem(const job_option& row, const std::string& value) {
  if (row.words.empty())
    return "";
  std::string list;
  for (size_t i = 0; i < row.words.size(); ++i) {
    if (row.words[i] == value)
      return "";
    list += fmt::format("{}\"{}\"",
                        i == 0                         ? ""
                        : i + 1 == row.words.size()    ? " or "
                                                       : ", ",
                        row.words[i]);
  }
  return fmt::format("\"{}\": must be {}", value, list);
}

uint64_t to_count(const std::string& flag, const std::string& value,
                  uint64_t lo, uint64_t hi) {
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
    throw input_error(fmt::format("{}: expected a whole number >= {}, got \"{}\"",
                                  flag, lo, value));
  errno = 0;
  auto x = std::strtoull(value.c_str(), nullptr, 10);
  if (errno != 0 || x < lo || x > hi)
    throw input_error(fmt::format("{}: {} is out of range [{}, {}]", flag,
                                  value, lo, hi));
  return x;
}

namespace {

double to_real(const std::string& flag, const std::string& value, double lo,
               double hi) {
  char* end = nullptr;
  errno = 0;
  auto x = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(x))
    throw input_error(fmt::format("{}: expected a number, got \"{}\"", flag,
                                  value));
  if (!(x >= lo && x <= hi))
    throw input_error(fmt::format("{}: {} is out of range [{}, {}]", flag,
                                  value, lo, hi));
  return x;
}

} // namespace

void set_from_flag(job_config& cfg, const job_option& row,
                   const std::string& value) {
  if (row.set_flag != nullptr) {
    row.set_flag(cfg, value);
    return;
  }
  set_from_text(cfg, row, value, row.flag);
}

void set_from_text(job_config& cfg, const job_option& row,
                   const std::string& value, const std::string& label) {
  auto check_word = [&] {
    if (auto why = word_problem(row, value); !why.empty())
      throw input_error(fmt::format("{}: {}", label, why));
  };
  std::visit(
    [&](auto access) {
      using access_type = decltype(access);
      if constexpr (std::is_same_v<access_type, std::monostate>) {
        throw std::logic_error(row.key + ": read by hand, but no set_flag");
      } else if constexpr (std::is_same_v<access_type, word_access>) {
        check_word();
        access.set(cfg, value);
      } else {
        auto& out = access(cfg);
        using value_type = std::remove_reference_t<decltype(out)>;
        if constexpr (std::is_same_v<value_type, bool>) {
          if (row.value_name.empty())
            out = true; // a switch
          else if (value == "on" || value == "off")
            out = value == "on";
          else
            throw input_error(fmt::format("{}: expected on or off, got \"{}\"",
                                          label, value));
        } else if constexpr (std::is_same_v<value_type, std::string>) {
          check_word();
          out = value;
        } else if constexpr (std::is_same_v<value_type, float>) {
          out = static_cast<float>(
            to_real(label, value, row.min_real, row.max_real));
        } else {
          out = static_cast<value_type>(
            to_count(label, value, row.min, row.max));
        }
      }
    },
    row.field);
}

// -- text ---------------------------------------------------------------------

namespace {

/// What to do with a row's field, by its type.
template <class Whole, class Real, class Text, class Bool>
std::string by_type(const job_option& row, Whole whole, Real real, Text text,
                    Bool boolean) {
  return std::visit(
    [&](auto access) -> std::string {
      using access_type = decltype(access);
      if constexpr (std::is_same_v<access_type, std::monostate>) {
        return "";
      } else if constexpr (std::is_same_v<access_type, word_access>) {
        job_config defaults;
        return text(access.get(defaults));
      } else {
        job_config defaults;
        auto& value = access(defaults);
        using value_type = std::remove_reference_t<decltype(value)>;
        if constexpr (std::is_same_v<value_type, bool>)
          return boolean(value);
        else if constexpr (std::is_same_v<value_type, std::string>)
          return text(value);
        else if constexpr (std::is_same_v<value_type, float>)
          return real(static_cast<double>(value));
        else
          return whole(static_cast<uint64_t>(value));
      }
    },
    row.field);
}

} // namespace

std::string type_text(const job_option& row) {
  if (row.by_hand())
    return row.shape;
  return by_type(
    row, [](uint64_t) { return std::string{"integer"}; },
    [](double) { return std::string{"number"}; },
    [](const std::string&) { return std::string{"string"}; },
    [](bool) { return std::string{"bool"}; });
}

std::string bounds_text(const job_option& row) {
  if (!row.words.empty()) {
    std::string out;
    for (auto& w : row.words)
      out += fmt::format("{}`{}`", out.empty() ? "" : ", ", w);
    return out;
  }
  return by_type(
    row,
    [&](uint64_t) {
      if (row.max == std::numeric_limits<uint64_t>::max())
        return fmt::format(">= {}", row.min);
      return fmt::format("{} .. {}", row.min, row.max);
    },
    [&](double) {
      return fmt::format("{:g} .. {:g}", row.min_real, row.max_real);
    },
    [](const std::string&) { return std::string{}; },
    [](bool) { return std::string{}; });
}

std::string default_text(const job_option& row) {
  if (row.by_hand() || !row.default_text.empty())
    return row.default_text;
  return by_type(
    row, [](uint64_t x) { return fmt::format("{}", x); },
    [](double x) { return fmt::format("{:g}", x); },
    [](const std::string& x) { return fmt::format("\"{}\"", x); },
    [](bool x) { return std::string{x ? "true" : "false"}; });
}

namespace {

constexpr const char* reference_header = R"(# Config reference

<!-- Generated: do not edit. The rows come from the option table in
core/job_options.cpp, this header from core/job_option_values.cpp;
regenerate with `build/actorps config-reference > docs/reference/config.md`.
A unit test (test/core/job_options_test.cpp) fails when this file is not
what the table generates. -->

A job config is a JSON object of sections (model, data, cluster,
optimizer, table_optimizer, partitioner, training, tables, faults).
`configs/fashion_mnist.json` shows the fields most jobs set;
`configs/movielens.json`, `a9a.json` and `synthetic_ctr.json` show the
model- and dataset-specific ones. Every field is optional: a missing field,
or `null`, keeps its default. Unknown fields, wrong types and values out of
bounds are errors that name the field (`job.json: cluster.workers: 0 is out
of range [1, 1024]`), never ignored. A flag of `actorps train`, `launch`,
`node` and `simulate` sets its key over the config's value and is checked
the same way, naming the flag. Some checks span fields (`replicas` needs
`ps` >= 2; `overlap`, `prefetch` and `layer_pushes` need `mode` async;
`heartbeat_timeout_ms` must be above `heartbeat_interval_ms`).

Fields that a model, a dataset or an update rule reads itself, beside the
table's (each refuses fields it does not know, naming them):

- `model`, for `embedding_mlp`: `embedding_dim` (16), `combiner` (`mean`,
  TensorFlow's weighted mean, or `sum`), `init_scale` (new rows U(-s, s),
  0.05).
- `data`, for `libsvm`: `train_file`, `test_file`, `num_features`,
  `one_based`; for `synthetic_ctr`: `dense_features` (13), `cardinalities`
  (26 vocabularies, up to 10^7), `zipf` (1.05), `rows_per_epoch` (10^6),
  `test_rows` (20,000), `seed`.
- `optimizer`, `table_optimizer`: the rule's settings (Keras' rules and
  defaults): momentum: `momentum`, `nesterov`; adagrad:
  `initial_accumulator`, `epsilon`; adam: `beta1`, `beta2`, `epsilon`;
  ftrl: `initial_accumulator`, `l1`, `l2`, `beta`.
- `faults`: each entry `{"action": "kill", "stop", "drop", "delay",
  "error", "move", "join" or "leave", "role": "worker" or "ps", "index",
  "step", "seconds", "share", "to"}` (`to`: the server a move goes to).

What the options do at length: [Failures](../guide/failures.md) (replicas,
faults), [Compressed pushes and pulls](../guide/compression.md) (formats,
overlap, prefetch, layer pushes, priority pulls), [The data
channel](../guide/data-channel.md), [A cluster of
processes](../guide/cluster.md) (cpu_policy, cpu_affinity),
[Security](../guide/security.md) (tls), [Consistency
modes](../guide/training.md#consistency-modes) (mode, staleness_aware,
divergence_factor), [Architecture](../design.md) (closures_per_worker).

| key | flag | type | bounds | default | what it does |
|---|---|---|---|---|---|
)";

/// A table cell: `|` escaped, as GitHub's tables need even in code spans.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += '\\';
    out += c;
  }
  return out;
}

std::string code(const std::string& text) {
  return text.empty() ? "" : "`" + text + "`";
}

} // namespace

std::string config_reference() {
  std::string out = reference_header;
  for (auto& row : job_options()) {
    auto flag = row.flag;
    if (!flag.empty() && !row.value_name.empty())
      flag += " " + row.value_name;
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", code(row.key),
                       cell(code(flag)), cell(type_text(row)),
                       cell(bounds_text(row)), cell(code(default_text(row))),
                       cell(row.help));
  }
  return out;
}

} // namespace actorps
