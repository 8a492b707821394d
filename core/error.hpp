#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace actorps {

/// Raised when input from outside the program is unusable: a config file, a
/// command-line flag, a data file. The message names the field or file and what
/// is wrong with it, in one line, so that apps can print it as-is and exit 2.
/// Nothing is written before such an error is raised on load paths.
class input_error : public std::runtime_error {
public:
  explicit input_error(const std::string& what) : std::runtime_error(what) {
    // nop
  }
};

/// Raised when training itself fails at run time (a closure error, a lost
/// actor). Apps exit 1 (exit_failed) on it, exit_retryable on a
/// transient_failure.
class runtime_failure : public std::runtime_error {
public:
  explicit runtime_failure(const std::string& what)
    : std::runtime_error(what) {
    // nop
  }
};

/// A run-time failure that another attempt of the job may not meet: a node
/// lost and not recovered (errc::ps_lost, errc::no_workers), nodes not
/// reached in time. Apps exit with exit_retryable (core/exit_codes.hpp), which
/// cluster managers that retry only codes >= 128 retry.
class transient_failure : public runtime_failure {
public:
  using runtime_failure::runtime_failure;
};

/// Returns the whole content of the file at `path`.
/// @throws input_error "PATH: cannot open WHAT" or "PATH: cannot read WHAT".
std::string read_text_file(const std::string& path, const std::string& what);

/// A token of outside input for an error message: in double quotes,
/// shortened to its first 40 characters and "..." if longer.
std::string quoted(std::string_view token);

} // namespace actorps
