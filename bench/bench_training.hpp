#pragma once

// Training throughput: `actorps train` (one process) and `actorps launch`
// (one process per role) on a job config, run as child processes of
// actorps-bench, read back from their metrics files.

#include <string>

#include <nlohmann/json.hpp>

namespace actorps::bench {

/// Trains the job of `config` for `epochs` epochs with 2 ps and 1, 2 and 4
/// workers (`quick`: 1 worker on 4000 training and 500 test examples), in
/// one process and as processes. Returns one entry per run: where, workers,
/// ps, epochs and, unless the run failed, samples_per_sec, test_accuracy,
/// time_share, mean_staleness and max_staleness from its final metrics
/// record. The `actorps` binary is taken from this binary's folder.
nlohmann::json run_training_suite(const std::string& config, int epochs,
                                  bool quick);

} // namespace actorps::bench
