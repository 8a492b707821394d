#include "core/checkpoint_manifest.hpp"

#include <limits>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint_files.hpp"
#include "core/error.hpp"

namespace actorps::detail {

namespace {

using json = nlohmann::json;

constexpr const char* format_name = "actorps-checkpoint";

// -- writing ------------------------------------------------------------------

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("write_checkpoint: " + what);
}

/// Throws unless `text` is valid UTF-8 (nlohmann refuses to write it).
void require_utf8(const std::string& text, const std::string& what) {
  try {
    (void) json(text).dump();
  } catch (const json::type_error& e) {
    bad(fmt::format("{} is not valid UTF-8 ({})", what, e.what()));
  }
}

// -- reading ------------------------------------------------------------------

/// Reads the fields of a parsed manifest; every error names the manifest.
class manifest_reader {
public:
  explicit manifest_reader(std::string path) : path_(std::move(path)) {
    // nop
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw input_error(fmt::format("{}: {}", path_, what));
  }

  const json& field(const json& obj, const std::string& where,
                    const char* key) const {
    auto i = obj.find(key);
    if (i == obj.end())
      fail(fmt::format("field \"{}{}\" is missing", where, key));
    return *i;
  }

  uint64_t count(const json& obj, const std::string& where, const char* key,
                 uint64_t max = std::numeric_limits<uint64_t>::max()) const {
    return to_count(field(obj, where, key), where + key, max);
  }

  uint64_t to_count(const json& v, const std::string& name,
                    uint64_t max = std::numeric_limits<uint64_t>::max()) const {
    if (v.is_number_integer() && !v.is_number_unsigned())
      fail(fmt::format("field \"{}\" must not be negative, got {}", name,
                       v.get<int64_t>()));
    if (!v.is_number_unsigned())
      fail(fmt::format("field \"{}\" must be a whole number, got {}", name,
                       v.dump()));
    auto x = v.get<uint64_t>();
    if (x > max)
      fail(fmt::format("field \"{}\" is {}, at most {} allowed", name, x, max));
    return x;
  }

  std::string text(const json& obj, const std::string& where,
                   const char* key) const {
    auto& v = field(obj, where, key);
    if (!v.is_string())
      fail(fmt::format("field \"{}{}\" must be a string", where, key));
    return v.get<std::string>();
  }

  const json& array(const json& obj, const std::string& where,
                    const char* key) const {
    auto& v = field(obj, where, key);
    if (!v.is_array())
      fail(fmt::format("field \"{}{}\" must be an array", where, key));
    return v;
  }

  const json& object(const json& obj, const std::string& where,
                     const char* key) const {
    auto& v = field(obj, where, key);
    if (!v.is_object())
      fail(fmt::format("field \"{}{}\" must be an object", where, key));
    return v;
  }

  std::vector<uint64_t> counts(const json& obj, const char* key) const {
    std::vector<uint64_t> result;
    auto& xs = array(obj, "", key);
    for (size_t i = 0; i < xs.size(); ++i)
      result.push_back(to_count(xs[i], fmt::format("{}[{}]", key, i)));
    return result;
  }

  uint32_t crc(const json& obj, const std::string& where,
               const char* key) const {
    return static_cast<uint32_t>(hex(obj, where, key, 8));
  }

  /// A field of `digits` lowercase hex digits.
  uint64_t hex(const json& obj, const std::string& where, const char* key,
               size_t digits) const {
    auto hex = text(obj, where, key);
    uint64_t x = 0;
    bool ok = hex.size() == digits;
    for (char c : hex) {
      if (!ok)
        break;
      uint32_t d = 0;
      if (c >= '0' && c <= '9')
        d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<uint32_t>(c - 'a' + 10);
      else
        ok = false;
      x = (x << 4) | d;
    }
    if (!ok)
      fail(fmt::format("field \"{}{}\" must be {} lowercase hex digits, got "
                       "\"{}\"",
                       where, key, digits, hex));
    return x;
  }

private:
  std::string path_;
};

/// Reads everything but the shards.
checkpoint_state decode_progress(const manifest_reader& r, const json& doc) {
  checkpoint_state st;
  st.global_step = r.count(doc, "", "global_step");
  st.epoch = static_cast<uint32_t>(
    r.count(doc, "", "epoch", std::numeric_limits<uint32_t>::max()));
  st.step_in_epoch = r.count(doc, "", "step_in_epoch");
  auto& workers = r.array(doc, "", "workers");
  for (size_t i = 0; i < workers.size(); ++i) {
    auto where = fmt::format("workers[{}]", i);
    if (!workers[i].is_object())
      r.fail(fmt::format("field \"{}\" must be an object", where));
    where += ".";
    data_position pos;
    pos.epoch = r.count(workers[i], where, "epoch");
    pos.offset = r.count(workers[i], where, "offset");
    st.workers.push_back(pos);
  }
  st.ps_clocks = r.counts(doc, "ps_clocks");
  st.optimizer_steps = r.counts(doc, "optimizer_steps");
  if (st.ps_clocks.size() != st.optimizer_steps.size())
    r.fail(fmt::format("{} ps_clocks but {} optimizer_steps",
                       st.ps_clocks.size(), st.optimizer_steps.size()));
  for (auto& [key, value] : r.object(doc, "", "job").items()) {
    if (!value.is_string())
      r.fail(fmt::format("field \"job.{}\" must be a string", key));
    st.job.emplace(key, value.get<std::string>());
  }
  return st;
}

} // namespace

// -- writing ------------------------------------------------------------------

void validate_state(const checkpoint_state& st) {
  if (st.ps_clocks.size() != st.optimizer_steps.size())
    bad(fmt::format("{} ps_clocks but {} optimizer_steps", st.ps_clocks.size(),
                    st.optimizer_steps.size()));
  for (auto& [key, value] : st.job) {
    require_utf8(key, "a job field's name");
    require_utf8(value, fmt::format("job field \"{}\"", key));
  }
  if (st.delta && (!safe_file_name(st.base) || st.base_id == 0))
    bad(fmt::format("a delta checkpoint needs a base directory name and id, "
                    "got \"{}\" and {:016x}",
                    st.base, st.base_id));
  if (!st.delta && (!st.base.empty() || st.base_id != 0))
    bad("a full checkpoint has no base");
  std::set<std::pair<std::string, uint32_t>> seen;
  for (auto& s : st.shards) {
    require_utf8(s.variable, fmt::format("the name of variable shard {}",
                                         s.index));
    auto name = fmt::format("{} shard {} of variable \"{}\"",
                            s.table ? "table" : "dense", s.index, s.variable);
    if (!seen.emplace(s.variable, s.index).second)
      bad(name + " appears twice");
    if (s.slots.size() > checkpoint_max_slots)
      bad(fmt::format("{}: {} optimizer slots, at most {}", name,
                      s.slots.size(), checkpoint_max_slots));
    uint64_t rows = 0;
    if (s.table) {
      if (s.row_begin != 0 || s.row_end != 0)
        bad(fmt::format("{}: row_begin and row_end must be 0, got {} and {}",
                        name, s.row_begin, s.row_end));
      if (s.keys.size() != s.steps.size())
        bad(fmt::format("{}: {} keys but {} steps", name, s.keys.size(),
                        s.steps.size()));
      rows = s.keys.size();
    } else {
      if (!s.keys.empty() || !s.steps.empty())
        bad(fmt::format("{}: {} keys and {} steps, but only table shards have "
                        "keys and steps",
                        name, s.keys.size(), s.steps.size()));
      if (s.row_end < s.row_begin)
        bad(fmt::format("{}: row_end {} < row_begin {}", name, s.row_end,
                        s.row_begin));
      rows = s.row_end - s.row_begin;
    }
    if (s.delta && (!s.table || !st.delta))
      bad(fmt::format("{}: only the table shards of a delta checkpoint can be "
                      "deltas",
                      name));
    if (!s.delta && !s.removed.empty())
      bad(fmt::format("{}: {} removed keys, but only a table delta has "
                      "removed keys",
                      name, s.removed.size()));
    auto row_word = s.table ? "keys" : "rows";
    uint64_t bytes = 0;
    if (!shard_file_size(rows, s.cols, s.slots.size(), s.table, bytes,
                         s.delta, s.removed.size()))
      bad(fmt::format("{}: {} {} x {} cols is too large", name, rows, row_word,
                      s.cols));
    if (s.values.size() != rows * s.cols)
      bad(fmt::format("{}: {} values, expected {} {} x {} cols = {}", name,
                      s.values.size(), rows, row_word, s.cols, rows * s.cols));
    for (size_t j = 0; j < s.slots.size(); ++j)
      if (s.slots[j].size() != s.values.size())
        bad(fmt::format("{}: slot {} has {} floats, values have {}", name, j,
                        s.slots[j].size(), s.values.size()));
    uint64_t dup = 0;
    if (s.table && find_duplicate_key(s.keys, dup))
      bad(fmt::format("{}: duplicate key {}", name, dup));
  }
}

std::string shard_file_name(size_t i) {
  return fmt::format("shard-{:04}.bin", i);
}

std::string encode_manifest(const checkpoint_state& st,
                            const std::vector<shard_file_entry>& files,
                            uint64_t id) {
  json doc = json::object();
  doc["format"] = format_name;
  doc["version"] = checkpoint_format_version;
  doc["kind"] = st.delta ? "delta" : "full";
  doc["id"] = fmt::format("{:016x}", id);
  if (st.delta)
    doc["base"] = {{"dir", st.base}, {"id", fmt::format("{:016x}", st.base_id)}};
  doc["global_step"] = st.global_step;
  doc["epoch"] = st.epoch;
  doc["step_in_epoch"] = st.step_in_epoch;
  doc["workers"] = json::array();
  for (auto& w : st.workers)
    doc["workers"].push_back({{"epoch", w.epoch}, {"offset", w.offset}});
  doc["ps_clocks"] = st.ps_clocks;
  doc["optimizer_steps"] = st.optimizer_steps;
  doc["job"] = json::object();
  for (auto& [key, value] : st.job)
    doc["job"][key] = value;
  doc["shards"] = json::array();
  for (size_t i = 0; i < st.shards.size(); ++i) {
    auto& s = st.shards[i];
    auto& f = files[i];
    json entry = {{"variable", s.variable},
                  {"index", s.index},
                  {"kind", s.delta ? "table_delta"
                           : s.table ? "table"
                                     : "dense"},
                  {"row_begin", s.row_begin},
                  {"row_end", s.row_end},
                  {"cols", s.cols},
                  {"ps", s.ps},
                  {"slots", s.slots.size()},
                  {"file", f.file},
                  {"bytes", f.bytes},
                  {"crc32", fmt::format("{:08x}", f.crc)}};
    if (s.table)
      entry["rows"] = s.keys.size();
    if (s.delta)
      entry["removed"] = s.removed.size();
    doc["shards"].push_back(std::move(entry));
  }
  return doc.dump(2) + "\n";
}

// -- reading ------------------------------------------------------------------

decoded_manifest decode_manifest(const std::string& path,
                                 const std::string& text) {
  manifest_reader r{path};
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3,
    // ..." or, for a number too large for a double ("1e400"),
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    std::string msg = e.what();
    auto pos = msg.find("] ");
    r.fail(fmt::format("malformed JSON: {}",
                       pos == std::string::npos ? msg : msg.substr(pos + 2)));
  }
  if (!doc.is_object())
    r.fail("must be a JSON object");
  auto& format = r.field(doc, "", "format");
  if (!format.is_string() || format.get<std::string>() != format_name)
    r.fail(fmt::format("not an actorps checkpoint (\"format\" is {}, expected "
                       "\"{}\")",
                       format.dump(), format_name));
  auto version = r.count(doc, "", "version");
  if (version < checkpoint_oldest_version
      || version > checkpoint_format_version)
    r.fail(fmt::format("unsupported checkpoint version {} (this build reads "
                       "versions {} to {})",
                       version, checkpoint_oldest_version,
                       checkpoint_format_version));
  decoded_manifest result;
  result.version = static_cast<uint32_t>(version);
  result.state = decode_progress(r, doc);
  auto& st = result.state;
  // Version 3 names each checkpoint, and a delta its base.
  if (version >= 3) {
    auto kind = r.text(doc, "", "kind");
    if (kind != "full" && kind != "delta")
      r.fail(fmt::format("field \"kind\" must be \"full\" or \"delta\", got "
                         "\"{}\"",
                         kind));
    st.delta = kind == "delta";
    st.id = r.hex(doc, "", "id", 16);
    if (st.delta) {
      auto& base = r.object(doc, "", "base");
      st.base = r.text(base, "base.", "dir");
      st.base_id = r.hex(base, "base.", "id", 16);
      if (!safe_file_name(st.base))
        r.fail(fmt::format("field \"base.dir\" is not a plain directory "
                           "name: \"{}\"",
                           st.base));
    }
  }
  auto& shards = r.array(doc, "", "shards");
  std::set<std::string> files;
  std::set<std::pair<std::string, uint32_t>> ids;
  constexpr auto u32_max = std::numeric_limits<uint32_t>::max();
  for (size_t i = 0; i < shards.size(); ++i) {
    auto name = fmt::format("shards[{}]", i);
    auto& js = shards[i];
    if (!js.is_object())
      r.fail(fmt::format("field \"{}\" must be an object", name));
    auto where = name + ".";
    checkpoint_shard s;
    shard_file_entry e;
    s.variable = r.text(js, where, "variable");
    s.index = static_cast<uint32_t>(r.count(js, where, "index", u32_max));
    // Version 1 knew dense shards only and had no "kind".
    if (version >= 2) {
      auto kind = r.text(js, where, "kind");
      bool delta_ok = version >= 3 && st.delta;
      if (kind != "dense" && kind != "table"
          && (kind != "table_delta" || !delta_ok))
        r.fail(fmt::format("field \"{}kind\" must be {}, got \"{}\"", where,
                           delta_ok ? "\"dense\", \"table\" or \"table_delta\""
                                    : "\"dense\" or \"table\"",
                           kind));
      s.table = kind != "dense";
      s.delta = kind == "table_delta";
    }
    s.row_begin = r.count(js, where, "row_begin");
    s.row_end = r.count(js, where, "row_end");
    s.cols = r.count(js, where, "cols");
    s.ps = static_cast<uint32_t>(r.count(js, where, "ps", u32_max));
    s.slots.resize(r.count(js, where, "slots", checkpoint_max_slots));
    e.file = r.text(js, where, "file");
    e.bytes = r.count(js, where, "bytes");
    e.crc = r.crc(js, where, "crc32");
    if (!safe_file_name(e.file))
      r.fail(fmt::format("field \"{}file\" is not a plain file name: \"{}\"",
                         where, e.file));
    if (!files.insert(e.file).second)
      r.fail(fmt::format("{} names file \"{}\" a second time", name, e.file));
    if (!ids.emplace(s.variable, s.index).second)
      r.fail(fmt::format("{}: shard {} of variable \"{}\" appears twice", name,
                         s.index, s.variable));
    if (s.table) {
      if (s.row_begin != 0 || s.row_end != 0)
        r.fail(fmt::format("{}: a table shard must have row_begin and row_end "
                           "0, got {} and {}",
                           name, s.row_begin, s.row_end));
      e.rows = r.count(js, where, "rows");
      if (s.delta)
        e.removed = r.count(js, where, "removed");
    } else {
      if (s.row_end < s.row_begin)
        r.fail(fmt::format("{}: row_end {} < row_begin {}", name, s.row_end,
                           s.row_begin));
      e.rows = s.row_end - s.row_begin;
    }
    auto row_word = s.table ? "keys" : "rows";
    uint64_t expected = 0;
    if (!shard_file_size(e.rows, s.cols, s.slots.size(), s.table, expected,
                         s.delta, e.removed))
      r.fail(fmt::format("{}: {} {} x {} cols is too large", name, e.rows,
                         row_word, s.cols));
    if (e.bytes != expected)
      r.fail(fmt::format("{} ({}): \"bytes\" is {}, but {} {} x {} cols "
                         "with {} slots{} make {} bytes",
                         name, e.file, e.bytes, e.rows, row_word, s.cols,
                         s.slots.size(),
                         s.delta ? fmt::format(" and {} removed keys",
                                               e.removed)
                                 : "",
                         expected));
    result.state.shards.push_back(std::move(s));
    result.files.push_back(std::move(e));
  }
  return result;
}

} // namespace actorps::detail
