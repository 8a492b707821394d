#include "core/bad_record.hpp"

#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

const char* to_string(on_bad_record policy) noexcept {
  return policy == on_bad_record::fail ? "fail" : "skip";
}

on_bad_record parse_on_bad_record(std::string_view text,
                                  std::string_view field) {
  if (text == "fail")
    return on_bad_record::fail;
  if (text == "skip")
    return on_bad_record::skip;
  throw input_error(fmt::format("{}: expected fail or skip, got {}", field,
                                quoted(text)));
}

bad_record_sink::bad_record_sink(on_bad_record policy, diagnostic_fn log,
                                 uint64_t log_limit)
  : policy_(policy), log_(std::move(log)), log_limit_(log_limit) {
  // nop
}

void bad_record_sink::report(std::string_view path, uint64_t line,
                             std::string_view what) {
  auto where = line == 0 ? fmt::format("{}", path)
                         : fmt::format("{}:{}", path, line);
  if (policy_ == on_bad_record::fail)
    throw input_error(fmt::format("{}: {}", where, what));
  ++count_;
  if (log_ && count_ <= log_limit_)
    log_(fmt::format("{}: {} (record skipped)", where, what));
}

} // namespace actorps
