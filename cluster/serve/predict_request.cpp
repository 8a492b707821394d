#include "cluster/serve/predict_request.hpp"

#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace actorps {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad_request(const std::string& what) {
  throw request_error(400, what);
}

/// Refuses a body nested deeper than `limit` before it is parsed: a body of
/// a million '[' would otherwise become a million nested arrays in memory.
/// Brackets inside strings do not count.
void check_depth(std::string_view body, uint32_t limit) {
  uint32_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit)
        bad_request(fmt::format("the request is nested deeper than {} "
                                "levels (at byte {})",
                                limit, i));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

/// A JSON value in a message: its type, or the value itself when short.
std::string shown(const json& v) {
  if (v.is_structured())
    return v.is_array() ? "a list" : "an object";
  auto text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40)
    text = text.substr(0, 40) + "...";
  return text;
}

/// A float from a JSON number, or nothing (not a number, or beyond float).
std::optional<float> to_float(const json& v) {
  if (!v.is_number())
    return std::nullopt;
  auto x = static_cast<float>(v.get<double>());
  if (!std::isfinite(x))
    return std::nullopt;
  return x;
}

/// Builds the batch one instance at a time.
class batch_builder {
public:
  batch_builder(const data_schema& schema, uint64_t rows) : schema_(schema) {
    batch_.reset(schema.dense_dim, schema.fields.size());
    batch_.dense.reserve(rows * schema.dense_dim);
    batch_.labels.reserve(rows);
  }

  /// Appends instance `i`.
  void add(const json& inst, uint64_t i) {
    row_ = i;
    if (inst.is_array()) {
      if (!schema_.fields.empty())
        fail(fmt::format("is a list; this model has sparse fields, so an "
                         "instance is an object ({})",
                         inputs()));
      add_dense(inst);
    } else if (inst.is_object()) {
      bool has_dense = false;
      for (auto& [name, value] : inst.items()) {
        if (name == "dense") {
          add_dense(value);
          has_dense = true;
          continue;
        }
        auto f = field_index(name);
        if (!f)
          fail(fmt::format("unknown input \"{}\" (this model takes {})",
                           printable(name), inputs()));
        add_keys(*f, value);
      }
      if (!has_dense) {
        if (schema_.dense_dim > 0)
          fail(fmt::format("has no \"dense\" ({} floats)",
                           schema_.dense_dim));
      }
    } else {
      fail(fmt::format("is {}; expected {}", shown(inst),
                       schema_.fields.empty() ? "a list of floats or an object"
                                              : "an object"));
    }
    for (auto& f : batch_.fields)
      f.offsets.push_back(f.keys.size());
    // A weighted field's values stay in step with its keys (a key alone
    // weighs 1); fields without weights carry no values.
    batch_.labels.push_back(0);
    ++batch_.rows;
  }

  example_batch take() {
    return std::move(batch_);
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    bad_request(fmt::format("instance {}: {}", row_, what));
  }

  /// A name from the request, safe to print (no control bytes, shortened).
  static std::string printable(const std::string& s) {
    std::string out;
    for (char c : s.substr(0, 40))
      out += (static_cast<unsigned char>(c) < 0x20 || c == '"') ? '?' : c;
    return s.size() > 40 ? out + "..." : out;
  }

  /// "dense (3 floats), user, movie": the names an instance may use.
  std::string inputs() const {
    std::string out;
    if (schema_.dense_dim > 0)
      out = fmt::format("dense ({} floats)", schema_.dense_dim);
    for (auto& f : schema_.fields)
      out += (out.empty() ? "" : ", ") + f.name;
    return out.empty() ? "nothing" : out;
  }

  std::optional<size_t> field_index(const std::string& name) const {
    for (size_t f = 0; f < schema_.fields.size(); ++f)
      if (schema_.fields[f].name == name)
        return f;
    return std::nullopt;
  }

  void add_dense(const json& v) {
    if (!v.is_array())
      fail(fmt::format("dense features are {}; expected a list of {} "
                       "floats",
                       shown(v), schema_.dense_dim));
    if (v.size() != schema_.dense_dim)
      fail(fmt::format("{} dense features; this model takes {}", v.size(),
                       schema_.dense_dim));
    for (size_t d = 0; d < v.size(); ++d) {
      auto x = to_float(v[d]);
      if (!x)
        fail(fmt::format("dense feature {} is {}; expected a finite float",
                         d, shown(v[d])));
      batch_.dense.push_back(*x);
    }
  }

  uint64_t key_of(size_t f, const json& v) const {
    const auto& fs = schema_.fields[f];
    uint64_t key = 0;
    if (v.is_number_unsigned())
      key = v.get<uint64_t>();
    else
      fail(fmt::format("field \"{}\": key {} is not an integer >= 0", fs.name,
                       shown(v)));
    check_vocabulary(f, key);
    return key;
  }

  uint64_t key_of(size_t f, const std::string& text) const {
    const auto& fs = schema_.fields[f];
    uint64_t key = 0;
    bool ok = !text.empty() && text.size() <= 20;
    for (char c : text) {
      if (c < '0' || c > '9') {
        ok = false;
        break;
      }
      auto digit = static_cast<uint64_t>(c - '0');
      if (key > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        ok = false;
        break;
      }
      key = key * 10 + digit;
    }
    if (!ok)
      fail(fmt::format("field \"{}\": key \"{}\" is not an integer >= 0 in "
                       "decimal",
                       fs.name, printable(text)));
    check_vocabulary(f, key);
    return key;
  }

  void check_vocabulary(size_t f, uint64_t key) const {
    const auto& fs = schema_.fields[f];
    if (fs.vocabulary > 0 && key >= fs.vocabulary)
      fail(fmt::format("field \"{}\": key {} is outside its vocabulary [0, "
                       "{})",
                       fs.name, key, fs.vocabulary));
  }

  float weight_of(size_t f, const json& v) const {
    auto x = to_float(v);
    if (!x)
      fail(fmt::format("field \"{}\": value {} is not a finite float",
                       schema_.fields[f].name, shown(v)));
    return *x;
  }

  void push(size_t f, uint64_t key, float value) {
    auto& out = batch_.fields[f];
    out.keys.push_back(key);
    if (schema_.fields[f].weighted)
      out.values.push_back(value);
  }

  void add_keys(size_t f, const json& v) {
    // (A name given twice in one object is one: the JSON parser keeps the
    // last.)
    const auto& fs = schema_.fields[f];
    if (v.is_number()) {
      push(f, key_of(f, v), 1.0f);
    } else if (v.is_array()) {
      for (auto& k : v) {
        if (k.is_array()) {
          if (!fs.weighted)
            fail(fmt::format("field \"{}\" has no values; give its keys as a "
                             "key or a list of keys",
                             fs.name));
          if (k.size() != 2)
            fail(fmt::format("field \"{}\": a [key, value] pair has {} "
                             "entries",
                             fs.name, k.size()));
          push(f, key_of(f, k[0]), weight_of(f, k[1]));
        } else {
          push(f, key_of(f, k), 1.0f);
        }
      }
    } else if (v.is_object()) {
      if (!fs.weighted)
        fail(fmt::format("field \"{}\" has no values; give its keys as a key "
                         "or a list of keys",
                         fs.name));
      for (auto& [k, x] : v.items())
        push(f, key_of(f, k), weight_of(f, x));
    } else {
      fail(fmt::format("field \"{}\" is {}; expected a key or a list of "
                       "keys{}",
                       fs.name, shown(v),
                       fs.weighted ? ", {\"key\": value, ...} or [[key, "
                                     "value], ...]"
                                   : ""));
    }
  }

  const data_schema& schema_;
  example_batch batch_;
  uint64_t row_ = 0;
};

/// The instances of a columnar request: {"NAME": [v0, v1, ...], ...} ->
/// [{"NAME": v0, ...}, {"NAME": v1, ...}, ...].
json rows_of_columns(const json& inputs, const request_limits& limits) {
  std::optional<size_t> n;
  for (auto& [name, column] : inputs.items()) {
    if (!column.is_array())
      bad_request(fmt::format("inputs: \"{}\" is {}; in the columnar format "
                              "each input is a list with one entry per "
                              "instance",
                              name.substr(0, 40), shown(column)));
    if (n && *n != column.size())
      bad_request(fmt::format("inputs: \"{}\" has {} entries, the inputs "
                              "before it {}; each input has one entry per "
                              "instance",
                              name.substr(0, 40), column.size(), *n));
    n = column.size();
  }
  if (!n)
    bad_request("inputs: no inputs");
  if (*n > limits.max_instances)
    throw request_error(413, fmt::format("{} instances; at most {} per "
                                         "request",
                                         *n, limits.max_instances));
  json rows = json::array();
  for (size_t i = 0; i < *n; ++i) {
    json row = json::object();
    for (auto& [name, column] : inputs.items())
      row[name] = column[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

/// A float in its shortest round-trip form; null for NaN or an infinity
/// (JSON has no such numbers; a diverged model can produce them).
template <class OutputIt>
void write_number(OutputIt it, float x) {
  if (std::isfinite(x))
    fmt::format_to(it, "{}", x);
  else
    fmt::format_to(it, "null");
}

} // namespace

example_batch parse_predict_request(std::string_view body,
                                    const data_schema& schema,
                                    const request_limits& limits) {
  check_depth(body, limits.max_depth);
  json doc;
  try {
    doc = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond a double
    // ("1E16666", found by the fuzz target).
    std::string what = e.what();
    if (auto at = what.find("] "); at != std::string::npos)
      what = what.substr(at + 2);
    bad_request("malformed JSON: " + what);
  }
  if (!doc.is_object())
    bad_request(fmt::format("the request is {}; expected an object with "
                            "\"instances\" or \"inputs\"",
                            shown(doc)));
  const json* rows = nullptr;
  json columns;
  for (auto& [name, value] : doc.items()) {
    if (name == "signature_name") {
      if (!value.is_string() || value.get<std::string>() != "serving_default")
        bad_request(fmt::format("signature_name: {} is not a signature of "
                                "this model (it has \"serving_default\")",
                                shown(value)));
    } else if (name == "instances" || name == "inputs") {
      if (rows)
        bad_request("both \"instances\" and \"inputs\"; give one");
      if (value.is_object()) {
        if (name == "instances")
          bad_request("instances: an object; expected a list of instances");
        columns = rows_of_columns(value, limits);
        rows = &columns;
      } else if (value.is_array()) {
        rows = &value;
      } else {
        bad_request(fmt::format("{}: {}; expected a list of instances", name,
                                shown(value)));
      }
    } else {
      std::string printable;
      for (char c : name.substr(0, 40))
        printable += (static_cast<unsigned char>(c) < 0x20 || c == '"') ? '?'
                                                                         : c;
      bad_request(fmt::format("unknown member \"{}\" (a request has "
                              "\"instances\" or \"inputs\", and may have "
                              "\"signature_name\")",
                              printable));
    }
  }
  if (!rows)
    bad_request("no \"instances\" (or \"inputs\")");
  if (rows->empty())
    bad_request("no instances (an empty list)");
  if (rows->size() > limits.max_instances)
    throw request_error(413, fmt::format("{} instances; at most {} per "
                                         "request",
                                         rows->size(), limits.max_instances));
  batch_builder builder{schema, rows->size()};
  for (size_t i = 0; i < rows->size(); ++i)
    builder.add((*rows)[i], i);
  return builder.take();
}

std::string predictions_json(const float* p, uint64_t rows, uint32_t outputs) {
  fmt::memory_buffer out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "{{\"predictions\": [");
  for (uint64_t r = 0; r < rows; ++r) {
    if (r > 0)
      fmt::format_to(it, ", ");
    const float* row = p + r * outputs;
    if (outputs == 1) {
      write_number(it, row[0]);
      continue;
    }
    fmt::format_to(it, "[");
    for (uint32_t k = 0; k < outputs; ++k) {
      if (k > 0)
        fmt::format_to(it, ", ");
      write_number(it, row[k]);
    }
    fmt::format_to(it, "]");
  }
  fmt::format_to(it, "]}}");
  return fmt::to_string(out);
}

std::string error_json(std::string_view message) {
  json j = {{"error", std::string{message}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace actorps
