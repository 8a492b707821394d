#pragma once

#include <string>
#include <vector>

namespace actorps {

/// `actorps scale [--socket PATH] (--workers N | --ps M | --leave-ps N |
/// --status)`: asks a running `actorps launch` of this user, through its
/// scale socket (apps/scale_desk.hpp), to change the job's workers or
/// parameter servers, prints what it answers and waits until the change
/// is done. Without --socket it looks in $TMPDIR (or /tmp) for the one
/// launch of this user that runs.
/// @returns 0 when done, exit_bad_input (2) when refused or the flags are
///          wrong, exit_failed (1) when it failed or no answer came.
int run_scale(const std::vector<std::string>& args);

} // namespace actorps
