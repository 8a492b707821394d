#include "core/job_config.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/job_options.hpp"
#include "core/table_overrides.hpp"
#include "core/error.hpp"

namespace actorps {

namespace {

using json = nlohmann::json;

/// Reads the fields of one JSON object and remembers which it saw, so that
/// unknown fields are reported instead of silently ignored.
class section {
public:
  section(const json& obj, std::string path, const std::string& source)
    : obj_(obj), path_(std::move(path)), source_(source) {
    if (!obj_.is_object())
      fail(path_, "must be an object");
  }

  ~section() noexcept(false) {
    if (std::uncaught_exceptions() > 0)
      return;
    for (auto& kv : obj_.items())
      if (seen_.count(kv.key()) == 0)
        fail(name(kv.key()), "unknown field");
  }

  [[noreturn]] void fail(const std::string& field, const std::string& what) {
    if (field.empty())
      throw input_error(fmt::format("{}: {}", source_, what));
    throw input_error(fmt::format("{}: {}: {}", source_, field, what));
  }

  /// "cluster", "cluster.tls"; "" for the root.
  const std::string& path() const {
    return path_;
  }

  std::string name(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

  const json* find(const std::string& key) {
    seen_.insert(key);
    auto i = obj_.find(key);
    return i == obj_.end() || i->is_null() ? nullptr : &*i;
  }

  void get(const std::string& key, std::string& out) {
    if (auto v = find(key)) {
      if (!v->is_string())
        fail(name(key), "must be a string");
      out = v->get<std::string>();
    }
  }

  void get(const std::string& key, bool& out) {
    if (auto v = find(key)) {
      if (!v->is_boolean())
        fail(name(key), "must be true or false");
      out = v->get<bool>();
    }
  }

  void get(const std::string& key, float& out, double lo, double hi) {
    if (auto v = find(key)) {
      if (!v->is_number())
        fail(name(key), "must be a number");
      auto x = v->get<double>();
      if (!(x >= lo && x <= hi))
        fail(name(key), fmt::format("{} is out of range [{}, {}]", x, lo, hi));
      out = static_cast<float>(x);
    }
  }

  template <class T>
  void get(const std::string& key, T& out, uint64_t lo,
           uint64_t hi = std::numeric_limits<T>::max()) {
    if (auto v = find(key))
      out = static_cast<T>(to_count(*v, name(key), lo, hi));
  }

  uint64_t to_count(const json& v, const std::string& field, uint64_t lo,
                    uint64_t hi) {
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)
      fail(field, fmt::format("must not be negative, got {}", v.get<int64_t>()));
    if (!v.is_number_unsigned() && !v.is_number_integer())
      fail(field, "must be a whole number");
    auto x = v.get<uint64_t>();
    if (x < lo || x > hi)
      fail(field, fmt::format("{} is out of range [{}, {}]", x, lo, hi));
    return x;
  }

  /// The fields no get() read yet, as JSON text; marks them read.
  option_map rest() {
    option_map out;
    for (auto& kv : obj_.items())
      if (seen_.count(kv.key()) == 0) {
        out[kv.key()] = kv.value().dump();
        seen_.insert(kv.key());
      }
    return out;
  }

  /// The fields no get() read yet, which must be numbers or booleans (an
  /// update rule's settings); marks them read.
  std::map<std::string, double> numeric_rest() {
    std::map<std::string, double> out;
    for (auto& kv : obj_.items()) {
      if (seen_.count(kv.key()) > 0)
        continue;
      seen_.insert(kv.key());
      if (kv.value().is_boolean())
        out[kv.key()] = kv.value().get<bool>() ? 1.0 : 0.0;
      else if (kv.value().is_number())
        out[kv.key()] = kv.value().get<double>();
      else
        fail(name(kv.key()), "must be a number or true/false");
    }
    return out;
  }

  /// The names of the fields, marked read (fields of free names).
  std::vector<std::string> keys() {
    std::vector<std::string> out;
    for (auto& kv : obj_.items()) {
      seen_.insert(kv.key());
      out.push_back(kv.key());
    }
    return out;
  }

  /// Every field, each a string (fields of free names, such as variables).
  std::map<std::string, std::string> rest_strings() {
    std::map<std::string, std::string> out;
    for (auto& kv : obj_.items()) {
      seen_.insert(kv.key());
      if (!kv.value().is_string())
        fail(name(kv.key()), "must be a string");
      out[kv.key()] = kv.value().get<std::string>();
    }
    return out;
  }

  section sub(const std::string& key) {
    static const json empty = json::object();
    auto v = find(key);
    return section{v ? *v : empty, name(key), source_};
  }

private:
  const json& obj_;
  std::string path_;
  const std::string& source_;
  std::set<std::string> seen_;
};

/// Reads the table's rows of section `s` (core/job_options.hpp) into `cfg`,
/// except those read by hand.
void read_rows(section& s, job_config& cfg) {
  auto check_word = [&](const job_option& row, const std::string& value) {
    if (auto why = word_problem(row, value); !why.empty())
      s.fail(row.key, why);
  };
  for (auto& row : job_options()) {
    if (row.by_hand() || row.section() != s.path())
      continue;
    auto key = row.name();
    std::visit(
      [&](auto access) {
        using access_type = decltype(access);
        if constexpr (std::is_same_v<access_type, word_access>) {
          auto value = access.get(cfg);
          s.get(key, value);
          check_word(row, value);
          access.set(cfg, value);
        } else if constexpr (!std::is_same_v<access_type, std::monostate>) {
          auto& out = access(cfg);
          using value_type = std::remove_reference_t<decltype(out)>;
          if constexpr (std::is_same_v<value_type, bool>) {
            s.get(key, out);
          } else if constexpr (std::is_same_v<value_type, std::string>) {
            s.get(key, out);
            check_word(row, out);
          } else if constexpr (std::is_same_v<value_type, float>) {
            s.get(key, out, row.min_real, row.max_real);
          } else {
            s.get(key, out, row.min, row.max);
          }
        }
      },
      row.field);
  }
}

/// Reads the faults array (`faults`).
void read_faults(section& root, job_config& cfg, const std::string& source) {
  auto v = root.find("faults");
  if (v == nullptr)
    return;
  if (!v->is_array())
    root.fail("faults", "must be an array");
  for (size_t i = 0; i < v->size(); ++i) {
    auto field = fmt::format("faults[{}]", i);
    section f{(*v)[i], field, source};
    fault_spec x;
    std::string action = "kill";
    f.get("action", action);
    if (action == "stop")
      x.action = fault_spec::kind::stop;
    else if (action == "drop")
      x.action = fault_spec::kind::drop;
    else if (action == "delay")
      x.action = fault_spec::kind::delay;
    else if (action == "error")
      x.action = fault_spec::kind::error;
    else if (action == "move")
      x.action = fault_spec::kind::move;
    else if (action == "join")
      x.action = fault_spec::kind::join;
    else if (action == "leave")
      x.action = fault_spec::kind::leave;
    else if (action != "kill")
      f.fail(field + ".action", "expected kill, stop, drop, delay, error, "
                                "move, join or leave, got \""
                                  + action + "\"");
    f.get("role", x.role);
    f.get("index", x.index, 0, 1u << 20);
    f.get("to", x.to, 0, 1u << 20);
    f.get("step", x.step, 0);
    float seconds = 0;
    f.get("seconds", seconds, 0.0, 3600.0);
    x.seconds = seconds;
    float share = 0;
    f.get("share", share, 0.0, 1.0);
    x.share = share;
    cfg.faults.push_back(x);
  }
}

} // namespace

job_config parse_job_config(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3,
    // ..." or, for a number too large for a double ("1e400"),
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    std::string msg = e.what();
    auto pos = msg.find("] ");
    throw input_error(fmt::format("{}: malformed JSON: {}", source,
                                  pos == std::string::npos ? msg
                                                           : msg.substr(pos + 2)));
  }
  job_config cfg;
  cfg.source = source;
  // The rows of the option table, section by section; then, in each, the
  // fields read by hand (job_options.hpp names them) and those a model, a
  // dataset or an update rule checks itself.
  {
  section root{doc, "", source};
  {
    auto s = root.sub("model");
    read_rows(s, cfg);
    if (auto v = s.find("layers")) {
      if (!v->is_array())
        s.fail(s.name("layers"), "must be an array of positive integers");
      cfg.layers.clear();
      for (size_t i = 0; i < v->size(); ++i)
        cfg.layers.push_back(s.to_count((*v)[i],
                                        fmt::format("model.layers[{}]", i), 1,
                                        1u << 20));
    }
    // The model checks the rest itself (models/registry.cpp).
    cfg.model_options = s.rest();
  }
  {
    auto s = root.sub("data");
    read_rows(s, cfg);
    // The dataset checks the rest itself (core/data_registry.cpp).
    cfg.data_options = s.rest();
  }
  {
    auto s = root.sub("cluster");
    read_rows(s, cfg);
    {
      auto v = s.sub("variable_formats");
      for (auto& [name, spec] : v.rest_strings())
        cfg.variable_formats[name] = spec;
    }
    if (auto v = s.find("prefetch")) {
      if (v->is_string() && v->get<std::string>() == "auto") {
        cfg.prefetch_chosen = false;
      } else if (v->is_boolean()) {
        cfg.prefetch = v->get<bool>();
        cfg.prefetch_chosen = true;
      } else {
        s.fail(s.name("prefetch"), "must be true, false or \"auto\"");
      }
    }
    if (auto v = s.find("tls")) {
      if (v->is_string()) {
        if (v->get<std::string>() != "off")
          s.fail(s.name("tls"), "must be \"off\" or an object {\"dir\": ...} "
                                "or {\"ca\": ..., \"cert\": ..., \"key\": ...}");
        cfg.tls.off = true;
      } else {
        auto t = s.sub("tls");
        read_rows(t, cfg);
      }
    }
  }
  for (auto [key, rule] : {std::pair{"optimizer", &cfg.optimizer},
                            std::pair{"table_optimizer", &cfg.table_optimizer}}) {
    auto s = root.sub(key);
    read_rows(s, cfg);
    if (auto v = s.find("staleness_aware")) {
      if (v->is_string() && v->get<std::string>() == "auto") {
        rule->staleness_aware_chosen = false;
      } else if (v->is_boolean()) {
        rule->staleness_aware = v->get<bool>();
        rule->staleness_aware_chosen = true;
      } else {
        s.fail(s.name("staleness_aware"), "must be true, false or \"auto\"");
      }
    }
    // The rule checks its own settings (core/rules/).
    rule->params = s.numeric_rest();
  }
  {
    auto s = root.sub("partitioner");
    // A config's default: one shard per ps (a job_config built in code keeps
    // partitioner_config's 1; the option table's row says 0).
    cfg.partitioner.num_shards = 0;
    read_rows(s, cfg);
    if (cfg.partitioner.type == partitioner_config::kind::max_size
        && cfg.partitioner.max_shard_bytes == 0)
      s.fail("partitioner.max_shard_bytes", "required (> 0) for max_size");
  }
  {
    auto s = root.sub("training");
    read_rows(s, cfg);
  }
  {
    auto s = root.sub("tables");
    read_rows(s, cfg);
    // Tables with a policy of their own: {"TABLE": {"FIELD": value}}, each
    // field read as its row tables.FIELD (core/table_overrides.hpp).
    auto per = s.sub("per_table");
    for (auto& table : per.keys()) {
      if (per.find(table) == nullptr)
        continue;
      auto t = per.sub(table);
      cfg.table_overrides[table]; // named, even without a field of its own
      for (auto& field : t.keys()) {
        auto v = t.find(field);
        if (v == nullptr)
          continue;
        auto* row = find_job_key("tables." + field);
        if (row != nullptr && !row->words.empty() && !v->is_string())
          t.fail(t.name(field), "must be a string");
        if (row != nullptr && row->words.empty() && !v->is_number())
          t.fail(t.name(field), "must be a number");
        try {
          set_table_override(cfg, table, field,
                             v->is_string() ? v->get<std::string>()
                                            : v->dump(),
                             t.name(field));
        } catch (const input_error& e) {
          throw input_error(fmt::format("{}: {}", source, e.what()));
        }
      }
    }
  }
  read_faults(root, cfg, source);
  } // root checks for unknown top-level fields here
  validate(cfg);
  return cfg;
}

job_config load_job_config(const std::string& path) {
  return parse_job_config(read_text_file(path, "config file"), path);
}

} // namespace actorps
