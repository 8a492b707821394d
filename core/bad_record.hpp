#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace actorps {

/// What a reader does with a record (a line, a CSV row) it cannot use.
enum class on_bad_record : uint8_t {
  /// The read fails with input_error naming the file and line (the CLI exits
  /// 2): for data that must be clean.
  fail,
  /// The record is dropped, counted and logged (the first few); the read
  /// goes on with the next record: for a stream, where one bad line must not
  /// stop a job that runs for weeks.
  skip,
};

/// "fail" or "skip".
const char* to_string(on_bad_record policy) noexcept;

/// Parses "fail" or "skip".
/// @throws input_error "FIELD: expected fail or skip, got \"x\"".
on_bad_record parse_on_bad_record(std::string_view text,
                                  std::string_view field);

/// Receives one diagnostic line (no newline) for a person to read; a sink
/// that ignores them is fine. Called from the thread that reads.
using diagnostic_fn = std::function<void(const std::string& line)>;

/// Where the readers of one file report the records they cannot use: under
/// on_bad_record::fail the first report throws, under skip each report is
/// counted and the first `log_limit` are logged, one line each
/// ("PATH:LINE: WHAT (record skipped)").
///
/// One sink per file read; not thread-safe.
class bad_record_sink {
public:
  /// @param log  where the skipped records are logged (nowhere if empty).
  explicit bad_record_sink(on_bad_record policy, diagnostic_fn log = {},
                           uint64_t log_limit = 10);

  /// Reports that the record at PATH:LINE (LINE 1-based; 0 when the problem
  /// has no line) is unusable because of WHAT.
  /// @throws input_error "PATH:LINE: WHAT" (or "PATH: WHAT" for line 0)
  ///         under on_bad_record::fail; under skip it returns after counting.
  void report(std::string_view path, uint64_t line, std::string_view what);

  /// Records reported so far.
  uint64_t count() const noexcept {
    return count_;
  }

  on_bad_record policy() const noexcept {
    return policy_;
  }

  /// Reports beyond log_limit, which were counted but not logged.
  uint64_t unlogged() const noexcept {
    return count_ > log_limit_ ? count_ - log_limit_ : 0;
  }

private:
  on_bad_record policy_;
  diagnostic_fn log_;
  uint64_t log_limit_;
  uint64_t count_ = 0;
};

} // namespace actorps
