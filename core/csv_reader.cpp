#include "core/csv_reader.hpp"

#include <exception>
#include <memory>
#include <new>

#include <csv.h>
#include <fmt/format.h>

namespace actorps {

namespace {

/// What the libcsv callbacks share. They never throw (libcsv is C): an
/// exception of a user callback is kept and rethrown once csv_parse returns.
struct csv_read_state {
  const csv_record_fn* on_csv_record;
  const csv_problem_fn* on_problem;
  uint64_t line = 0;        // physical line being fed to libcsv
  uint64_t record_line = 0; // line where the current record starts
  size_t field = 0;         // fields of the current record so far
  std::vector<std::string> fields;
  bool stop = false;
  std::exception_ptr error;

  /// Hands a problem to on_problem; stops reading unless it says go on.
  void problem(uint64_t at, const std::string& what) {
    try {
      if (!(*on_problem)(at, what))
        stop = true;
    } catch (...) {
      error = std::current_exception();
      stop = true;
    }
  }
};

void on_csv_field(void* data, size_t len, void* user) {
  auto& st = *static_cast<csv_read_state*>(user);
  if (st.stop)
    return;
  if (st.fields.size() <= st.field)
    st.fields.emplace_back();
  st.fields[st.field++].assign(
    data != nullptr ? static_cast<const char*>(data) : "", len);
}

void on_csv_record(int, void* user) {
  auto& st = *static_cast<csv_read_state*>(user);
  auto count = st.field;
  st.field = 0;
  if (st.stop)
    return;
  st.fields.resize(count); // keeps the strings' memory for the next record
  std::string complaint;
  try {
    complaint = (*st.on_csv_record)(st.record_line, st.fields);
  } catch (...) {
    st.error = std::current_exception();
    st.stop = true;
    return;
  }
  if (!complaint.empty())
    st.problem(st.record_line, complaint);
}

/// A libcsv parser in strict mode, freed with this object.
struct csv_parser_guard {
  csv_parser p;

  csv_parser_guard() {
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
      throw std::bad_alloc();
  }

  ~csv_parser_guard() {
    csv_free(&p);
  }

  csv_parser_guard(const csv_parser_guard&) = delete;
  csv_parser_guard& operator=(const csv_parser_guard&) = delete;
};

} // namespace

void read_csv(std::string_view text, const csv_record_fn& on_record_fn,
              const csv_problem_fn& on_problem_fn) {
  csv_read_state st;
  st.on_csv_record = &on_record_fn;
  st.on_problem = &on_problem_fn;
  auto p = std::make_unique<csv_parser_guard>();
  size_t pos = 0;
  while (pos < text.size() && !st.stop) {
    auto nl = text.find('\n', pos);
    auto end = nl == std::string_view::npos ? text.size() : nl + 1;
    ++st.line;
    if (st.field == 0)
      st.record_line = st.line;
    if (csv_parse(&p->p, text.data() + pos, end - pos, on_csv_field, on_csv_record,
                  &st)
          != end - pos
        && !st.stop) {
      auto what = fmt::format("malformed CSV ({})",
                              csv_strerror(csv_error(&p->p)));
      st.field = 0;
      st.problem(st.record_line, what);
      // Start again on the next line with a fresh parser.
      p = std::make_unique<csv_parser_guard>();
    }
    pos = end;
  }
  if (!st.stop && csv_fini(&p->p, on_csv_field, on_csv_record, &st) != 0 && !st.stop)
    st.problem(st.record_line,
               fmt::format("malformed CSV at the end of the file ({})",
                           csv_strerror(csv_error(&p->p))));
  if (st.error)
    std::rethrow_exception(st.error);
}

} // namespace actorps
