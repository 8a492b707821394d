#pragma once

// A duration as the seconds that reports and log lines print.

#include <chrono>

namespace actorps {

/// `d` in seconds (fractional).
inline double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

} // namespace actorps
