#pragma once

#include <string_view>

#include <fmt/format.h>

namespace actorps::log {

/// Severity of a diagnostic line.
enum class level { debug = 0, info = 1, warning = 2, error = 3 };

/// Sets the lowest level that is printed (default: info).
void set_level(level lvl);

/// Whether lines start with `[role index] ` (default: yes). Off in the
/// nodes `actorps launch` starts: it prefixes every line of a node itself.
void set_show_origin(bool on);

/// Returns whether lines of `lvl` are printed.
bool enabled(level lvl);

/// Writes one whole line to stderr: `[role index] message`. Thread-safe; a line
/// is never interleaved with another.
void write(level lvl, std::string_view role, int index, std::string_view msg);

/// Formats and writes one diagnostic line for `role` number `index` (-1: none).
template <class... Ts>
void info(std::string_view role, int index, fmt::format_string<Ts...> f,
          Ts&&... xs) {
  if (enabled(level::info))
    write(level::info, role, index, fmt::format(f, std::forward<Ts>(xs)...));
}

template <class... Ts>
void warn(std::string_view role, int index, fmt::format_string<Ts...> f,
          Ts&&... xs) {
  if (enabled(level::warning))
    write(level::warning, role, index,
          fmt::format(f, std::forward<Ts>(xs)...));
}

template <class... Ts>
void error(std::string_view role, int index, fmt::format_string<Ts...> f,
           Ts&&... xs) {
  if (enabled(level::error))
    write(level::error, role, index, fmt::format(f, std::forward<Ts>(xs)...));
}

template <class... Ts>
void debug(std::string_view role, int index, fmt::format_string<Ts...> f,
           Ts&&... xs) {
  if (enabled(level::debug))
    write(level::debug, role, index, fmt::format(f, std::forward<Ts>(xs)...));
}

} // namespace actorps::log
