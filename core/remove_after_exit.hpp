#pragma once

// Temporary files that outlive a killed process (launch's cluster spec and
// its throw-away certificates, private keys included, were left in /tmp by
// every `actorps launch` that was SIGKILLed): a destructor cannot run then.
// remove_after_exit hands the paths to a small detached process that waits
// until this process has ended, however it ends, and then removes them.

#include <string>
#include <vector>

namespace actorps {

/// Removes `paths` (files, or folders with everything in them) once this
/// process has ended, however it ends (return, exit, a signal, SIGKILL).
/// How: a detached `/bin/sh` (in a session of its own, not a child of this
/// process) blocks reading a pipe whose only writing end this process
/// holds (close-on-exec, so programs it starts do not keep it open); the
/// end of this process closes it, and the shell runs `rm -rf -- PATHS`.
/// Paths already removed by then (by their owner's destructor) are no
/// matter. Best effort: returns false, changing nothing, if the pipe or the
/// fork fails (the caller's destructor still removes the paths on a normal
/// end). Call it before this process starts threads, or at least where
/// none of them holds a lock malloc needs (the child only calls
/// async-signal-safe functions, after the arguments are built).
bool remove_after_exit(const std::vector<std::string>& paths);

} // namespace actorps
