#pragma once

// The actor system of the fuzz targets that need CAF: actorps's own
// system_config (every message type registered under its wire name, the
// error renderer) with CAF's deterministic `testing` scheduler, so that
// nothing runs on another thread and an input's outcome depends on its
// bytes only (caf-0.17-notes.md, section 10).

#include "caf/actor_system.hpp"
#include "caf/scheduler/test_coordinator.hpp"

namespace actorps::fuzz {

/// The process's fuzz actor system, created on first use and never
/// destroyed (a fuzzer exits without unwinding).
caf::actor_system& fuzz_system();

/// Its scheduler: `sched().run()` runs every job queued.
caf::scheduler::test_coordinator& sched();

} // namespace actorps::fuzz
