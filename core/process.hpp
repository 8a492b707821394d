#pragma once

#include <cstdint>

#include <sys/resource.h>

namespace actorps {

/// Peak resident memory of this process so far, in bytes: getrusage's
/// ru_maxrss (Linux counts it in KiB). Each role reports its own process's
/// (a worker with its step results, a ps with its stats), so that a job's
/// summary shows memory per role; in one process every role reports the
/// same number. Thread-safe; one system call (well under a microsecond).
inline uint64_t peak_rss_bytes() {
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return 0;
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

} // namespace actorps
