#include "core/cpu_policy.hpp"

#include <cerrno>
#include <cstring>

#include <sched.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

cpu_policy parse_cpu_policy(const std::string& value, const std::string& name) {
  if (value == "batch")
    return cpu_policy::batch;
  if (value == "normal")
    return cpu_policy::normal;
  throw input_error(
    fmt::format("{}: \"{}\": must be \"batch\" or \"normal\"", name, value));
}

std::string apply_cpu_policy(cpu_policy p) {
  if (p == cpu_policy::normal)
    return {};
  sched_param param{};
  param.sched_priority = 0; // the only priority SCHED_BATCH takes
  // pid 0: the calling thread (Linux applies policies per thread).
  if (sched_setscheduler(0, SCHED_BATCH, &param) != 0)
    return fmt::format("sched_setscheduler(SCHED_BATCH): {}",
                       std::strerror(errno));
  return {};
}

std::string current_cpu_policy() {
  switch (sched_getscheduler(0)) {
    case SCHED_OTHER:
      return "SCHED_OTHER";
    case SCHED_BATCH:
      return "SCHED_BATCH";
    case SCHED_IDLE:
      return "SCHED_IDLE";
    case SCHED_FIFO:
      return "SCHED_FIFO";
    case SCHED_RR:
      return "SCHED_RR";
    default:
      return "unknown";
  }
}

} // namespace actorps
