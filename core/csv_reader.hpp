#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace actorps {

/// Called with each record of a CSV text: `line` is the 1-based physical
/// line where the record starts, `fields` its fields, unquoted (the first
/// record is the header, if the text has one). Returns "" when the record
/// is fine, else what is wrong with it (one line, no file or line number).
using csv_record_fn = std::function<std::string(
  uint64_t line, const std::vector<std::string>& fields)>;

/// Called with each unusable record: its line (as above) and what is wrong,
/// either the complaint of the csv_record_fn or a syntax error ("malformed
/// CSV (...)"). Returns whether to go on with the next record (true) or to
/// stop reading (false); it may also throw, which ends the read.
using csv_problem_fn
  = std::function<bool(uint64_t line, const std::string& what)>;

/// Reads CSV text (RFC 4180: fields separated by commas, records by line
/// ends, "\r\n" accepted; a field in double quotes may hold commas, line
/// ends and doubled quotes) record by record with libcsv in its strict mode
/// (a quote inside an unquoted field, or text after a closing quote, is a
/// syntax error). Empty lines are skipped.
///
/// The text is fed to libcsv one physical line at a time, so that every
/// problem names the line where its record starts. After a syntax error the
/// parser starts again at the next physical line, so one broken record
/// costs that record (and, for an unclosed quote, the lines it swallowed)
/// when `on_problem` says to go on. A quote left open at the end of the text
/// is a syntax error of the last record ("malformed CSV at the end of the
/// file (...)").
///
/// Memory: the fields of one record, reused from record to record.
/// @throws std::bad_alloc if libcsv cannot start; whatever the callbacks
///         throw.
void read_csv(std::string_view text, const csv_record_fn& on_record,
              const csv_problem_fn& on_problem);

} // namespace actorps
