#pragma once

#include <string>
#include <vector>

namespace actorps {

/// `actorps simulate [flags]` (cluster/sim/simulator.hpp): parses the job flags
/// of `train` and the simulation's own, runs the simulation, prints its
/// report and writes it as JSON lines with --out. Returns the exit status.
/// @throws input_error for a bad flag or config; runtime_failure as
///         simulate().
int run_simulate(const std::vector<std::string>& args);

} // namespace actorps
