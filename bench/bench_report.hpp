#pragma once

// The results of one actorps-bench run: the JSON file (bench/results.json),
// its Markdown rendering (docs/benchmarks.md), and the check of a results
// file (--validate).

#include <string>

#include <nlohmann/json.hpp>

namespace actorps::bench {

/// The results of every point measured (points()) and of `training` (as
/// run_training_suite returns it), with the machine they ran on. Keys:
/// machine, limits and transfers (dense), sparse (table pull/push, each with
/// its hash-map limit and, between processes, raw TCP of the same bytes),
/// sparse_limits, training and targets.
nlohmann::json make_results(const nlohmann::json& training);

/// The Markdown page of `results`.
std::string markdown(const nlohmann::json& results);

/// Writes `text` to `path` through a temporary file and a rename; false on
/// error.
bool write_file(const std::string& path, const std::string& text);

/// Checks the shape of the results file at `path` (the keys make_results
/// writes, p50 > 0 and a limit for every transfer and sparse row, no failed
/// training run); prints each problem to stderr. Returns 0 if none, else 1.
int validate(const std::string& path);

} // namespace actorps::bench
