#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "caf/actor.hpp"
#include "caf/fwd.hpp"

namespace actorps {

/// The roles to watch, by name ("ps0", "worker1"), as they are now (a
/// respawned or recovered actor replaces a lost one). Called from the
/// watcher's thread: must be thread-safe.
using watched_roles = std::function<std::vector<std::pair<std::string, caf::actor>>()>;

/// Watches the roles of an in-process cluster: pings each every `interval`
/// (ps_actor and worker_actor answer ping_atom); one silent for half of
/// `timeout` is reported as suspected, one silent for `timeout` as not
/// answering (a warning naming it and for how long), and when it answers
/// again that is said too. In one process a role that dies is reported by
/// its monitor and recovered; this catches the ones that hang (a step stuck
/// in a model, a `stop` fault). When the watcher itself did not run for
/// longer than `timeout` (all scheduler threads busy or the process paused)
/// nobody is blamed for it. Stops with its actor system or an exit message.
caf::actor spawn_local_watcher(caf::actor_system& sys, watched_roles roles,
                               std::chrono::milliseconds interval,
                               std::chrono::milliseconds timeout);

} // namespace actorps
