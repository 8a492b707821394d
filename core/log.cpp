#include "core/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace actorps::log {

namespace {

std::atomic<int> min_level{static_cast<int>(level::info)};
std::atomic<bool> show_origin{true};
std::mutex out_mtx;

const char* tag(level lvl) {
  switch (lvl) {
    case level::debug:
      return "debug";
    case level::info:
      return "info";
    case level::warning:
      return "warning";
    default:
      return "error";
  }
}

} // namespace

void set_level(level lvl) {
  min_level = static_cast<int>(lvl);
}

bool enabled(level lvl) {
  return static_cast<int>(lvl) >= min_level.load(std::memory_order_relaxed);
}

void set_show_origin(bool on) {
  show_origin = on;
}

void write(level lvl, std::string_view role, int index, std::string_view msg) {
  std::string line;
  if (!show_origin.load(std::memory_order_relaxed))
    line = fmt::format("{}: {}\n", tag(lvl), msg);
  else if (index >= 0)
    line = fmt::format("[{}{}] {}: {}\n", role, index, tag(lvl), msg);
  else
    line = fmt::format("[{}] {}: {}\n", role, tag(lvl), msg);
  std::lock_guard<std::mutex> guard{out_mtx};
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

} // namespace actorps::log
