#pragma once

#include <string>
#include <vector>

namespace actorps {

/// `actorps launch [job flags] [--launcher NAME] [--host H] [--port-base
/// P]`: every node of a cluster as a process of its own (cluster/launch/),
/// with throw-away certificates or a job secret, restarts, and, with the
/// local launcher, a scale socket for `actorps scale` (apps/scale_desk.hpp).
/// Returns the coordinator's exit status.
/// @throws input_error for bad flags or config, runtime_failure if the
///         nodes cannot be started.
int run_launch(const std::vector<std::string>& args);

} // namespace actorps
