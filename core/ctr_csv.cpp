#include "core/ctr_csv.hpp"

#include <charconv>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/bad_record.hpp"
#include "core/csv_reader.hpp"
#include "core/error.hpp"

namespace actorps {

namespace {

template <class T>
bool parse_ctr_number(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
}

/// The header's column names.
std::vector<std::string> ctr_columns(const data_schema& schema) {
  std::vector<std::string> result{"label"};
  for (uint64_t j = 0; j < schema.dense_dim; ++j)
    result.push_back(fmt::format("I{}", j + 1));
  for (auto& f : schema.fields)
    result.push_back(f.name);
  return result;
}

/// "" if `header` is `columns`, else what differs (first difference).
std::string check_ctr_header(const std::vector<std::string>& columns,
                         const std::vector<std::string>& header) {
  for (size_t c = 0; c < columns.size() && c < header.size(); ++c)
    if (header[c] != columns[c])
      return fmt::format("has {} as column {}, expected \"{}\" (the "
                         "columns are label, the dense I1, I2, ..., then "
                         "the fields)",
                         actorps::quoted(header[c]), c + 1, columns[c]);
  if (header.size() != columns.size())
    return fmt::format("has {} columns, expected {}", header.size(),
                       columns.size());
  return {};
}

/// Appends one row of `fields` (a record with the header's column count) to
/// `ex`. Returns "" or what is wrong, with `ex` as it was.
std::string append_ctr_row(const data_schema& schema,
                       const std::vector<std::string>& fields,
                       example_batch& ex) {
  const auto dim = schema.dense_dim;
  int32_t label = 0;
  if (fields[0] == "0")
    label = 0;
  else if (fields[0] == "1")
    label = 1;
  else
    return fmt::format("label {} is neither 0 nor 1", actorps::quoted(fields[0]));
  const auto dense_before = ex.dense.size();
  for (uint64_t j = 0; j < dim; ++j) {
    float x = 0;
    std::string_view s = fields[1 + j];
    if (!parse_ctr_number(s, x) || !std::isfinite(x)) {
      ex.dense.resize(dense_before);
      return fmt::format("I{} {} is not a finite number", j + 1, actorps::quoted(s));
    }
    ex.dense.push_back(x);
  }
  // Keys first into each field, offsets only once the whole row is good.
  size_t f = 0;
  auto undo = [&](size_t upto) {
    for (size_t g = 0; g < upto; ++g) {
      auto& fld = ex.fields[g];
      fld.keys.resize(fld.offsets.back());
    }
    ex.dense.resize(dense_before);
  };
  for (; f < schema.fields.size(); ++f) {
    std::string_view s = fields[1 + dim + f];
    auto& fld = ex.fields[f];
    const auto vocabulary = schema.fields[f].vocabulary;
    while (!s.empty()) {
      auto bar = s.find('|');
      auto tok = s.substr(0, bar);
      uint64_t key = 0;
      if (!parse_ctr_number(tok, key) || (vocabulary != 0 && key >= vocabulary)) {
        undo(f + 1);
        return fmt::format("{} key {} is not a whole number{}",
                           schema.fields[f].name, actorps::quoted(tok),
                           vocabulary != 0
                             ? fmt::format(" below {}", vocabulary)
                             : std::string{});
      }
      fld.keys.push_back(key);
      s = bar == std::string_view::npos ? std::string_view{}
                                        : s.substr(bar + 1);
    }
  }
  for (auto& fld : ex.fields)
    fld.offsets.push_back(fld.keys.size());
  ex.labels.push_back(label);
  ++ex.rows;
  return {};
}

} // namespace

data_schema ctr_csv_schema(uint64_t dense_features, uint64_t fields) {
  data_schema s;
  s.dense_dim = dense_features;
  for (uint64_t f = 0; f < fields; ++f)
    s.fields.push_back(field_schema{fmt::format("C{}", f + 1), 0, false});
  s.labels = label_kind::binary;
  s.classes = 2;
  return s;
}

std::string ctr_csv_header(const data_schema& schema) {
  return fmt::format("{}", fmt::join(ctr_columns(schema), ","));
}

void append_ctr_csv_rows(const example_batch& ex, std::string& out) {
  auto it = std::back_inserter(out);
  for (uint64_t r = 0; r < ex.rows; ++r) {
    fmt::format_to(it, "{}", ex.labels[r]);
    for (uint64_t j = 0; j < ex.dense_dim; ++j)
      fmt::format_to(it, ",{}", ex.dense[r * ex.dense_dim + j]);
    for (auto& fld : ex.fields) {
      out += ',';
      for (auto i = fld.offsets[r]; i < fld.offsets[r + 1]; ++i)
        fmt::format_to(it, i == fld.offsets[r] ? "{}" : "|{}", fld.keys[i]);
    }
    out += '\n';
  }
}

dataset read_ctr_csv(const std::string& path, const data_schema& schema,
                     bad_record_sink& bad) {
  for (auto& f : schema.fields)
    if (f.weighted)
      throw std::invalid_argument(fmt::format("read_ctr_csv: field {} is "
                                              "weighted",
                                              f.name));
  auto text = read_text_file(path, "part (missing or not readable)");
  dataset result;
  result.schema = schema;
  auto& ex = result.examples;
  ex.reset(schema.dense_dim, schema.fields.size());
  const auto columns = ctr_columns(schema);
  bool header_done = false;
  read_csv(
    text,
    [&](uint64_t line, const std::vector<std::string>& fields) {
      if (!header_done) {
        if (auto what = check_ctr_header(columns, fields); !what.empty())
          throw input_error(fmt::format("{}:{}: the header {}", path, line,
                                        what));
        header_done = true;
        return std::string{};
      }
      if (fields.size() != columns.size())
        return fmt::format("expected {} columns as in the header, got {}",
                           columns.size(), fields.size());
      return append_ctr_row(schema, fields, ex);
    },
    [&](uint64_t line, const std::string& what) {
      bad.report(path, line, what);
      return true;
    });
  return result;
}

} // namespace actorps
