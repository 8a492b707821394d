#pragma once

#include <chrono>
#include <cstdint>

namespace actorps {

/// The delay before retry number `attempt` (0 for the first): `base` doubled
/// `attempt` times, at most `cap`. Never overflows, whatever `attempt` is
/// (a restart budget may be 1000).
inline std::chrono::milliseconds
capped_backoff(std::chrono::milliseconds base, uint32_t attempt,
               std::chrono::milliseconds cap) {
  auto d = base;
  for (uint32_t i = 0; i < attempt && d < cap; ++i)
    d *= 2;
  return d < cap ? d : cap;
}

} // namespace actorps
