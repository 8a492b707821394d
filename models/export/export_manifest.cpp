#include "models/export/export_manifest.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint_files.hpp"
#include "core/error.hpp"

namespace actorps {

namespace {

using json = nlohmann::json;

/// Reads fields of one JSON object, naming "PATH: FIELD" in every error.
class manifest_reader {
public:
  manifest_reader(const json& obj, std::string path, std::string where)
    : obj_(obj), path_(std::move(path)), where_(std::move(where)) {
    if (!obj_.is_object())
      fail("", "must be an object");
  }

  [[noreturn]] void fail(const std::string& field,
                         const std::string& what) const {
    auto name = where_.empty() ? field
                : field.empty() ? where_
                                : where_ + "." + field;
    throw input_error(fmt::format("{}: {}: {}", path_, name, what));
  }

  const json& at(const std::string& field) const {
    auto i = obj_.find(field);
    if (i == obj_.end())
      fail(field, "missing");
    return *i;
  }

  std::string str(const std::string& field) const {
    auto& v = at(field);
    if (!v.is_string())
      fail(field, "must be a string");
    return v.get<std::string>();
  }

  uint64_t uint(const std::string& field, uint64_t max = UINT64_MAX) const {
    auto& v = at(field);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > max)
      fail(field, fmt::format("must be a whole number in [0, {}]", max));
    return v.get<uint64_t>();
  }

  double real(const std::string& field) const {
    auto& v = at(field);
    if (!v.is_number())
      fail(field, "must be a number");
    return v.get<double>();
  }

  bool boolean(const std::string& field) const {
    auto& v = at(field);
    if (!v.is_boolean())
      fail(field, "must be true or false");
    return v.get<bool>();
  }

  const json& array(const std::string& field) const {
    auto& v = at(field);
    if (!v.is_array())
      fail(field, "must be an array");
    return v;
  }

  /// A file name inside the version directory.
  std::string file(const std::string& field) const {
    auto name = str(field);
    if (!detail::safe_file_name(name))
      fail(field, fmt::format("\"{}\" is not a plain file name", name));
    return name;
  }

  std::string sub(const std::string& field) const {
    return where_.empty() ? field : where_ + "." + field;
  }

  const std::string& path() const noexcept {
    return path_;
  }

private:
  const json& obj_;
  std::string path_;
  std::string where_;
};

uint32_t parse_crc(const manifest_reader& r, const std::string& field) {
  auto text = r.str(field);
  if (text.size() != 8
      || text.find_first_not_of("0123456789abcdef") != std::string::npos)
    r.fail(field, "must be 8 lowercase hex digits");
  return static_cast<uint32_t>(std::stoul(text, nullptr, 16));
}

} // namespace

std::string to_json_text(const export_manifest& m) {
  json fields = json::array();
  for (auto& f : m.schema.fields)
    fields.push_back({{"name", f.name},
                      {"vocabulary", f.vocabulary},
                      {"weighted", f.weighted}});
  json tables = json::array();
  for (auto& t : m.tables) {
    json files = json::array();
    for (auto& f : t.files)
      files.push_back({{"path", f.path},
                       {"rows", f.rows},
                       {"first_key", f.first_key},
                       {"last_key", f.last_key}});
    tables.push_back({{"variable", t.variable},
                      {"field", t.field},
                      {"combiner", t.combiner},
                      {"dim", t.dim},
                      {"vocabulary", t.vocabulary},
                      {"init_scale", t.init_scale},
                      {"init_seed", t.init_seed},
                      {"stored", t.stored},
                      {"rows", t.rows},
                      {"files", files}});
  }
  json files = json::array();
  for (auto& f : m.files)
    files.push_back({{"path", f.path},
                     {"bytes", f.bytes},
                     {"crc32", fmt::format("{:08x}", f.crc32)}});
  json options = json::object();
  // Each option's value is JSON text (option_map): written as the value.
  for (auto& [k, v] : m.model_options)
    options[k] = json::parse(v, nullptr, false);
  json doc = {
    {"format", export_format_name},
    {"version", export_format_version},
    {"name", m.name},
    {"model",
     {{"type", m.model_type},
      {"layers", m.layers},
      {"init_seed", m.init_seed},
      {"options", options}}},
    {"schema",
     {{"dense_dim", m.schema.dense_dim},
      {"fields", fields},
      {"labels", m.schema.labels == label_kind::binary ? "binary"
                                                        : "multiclass"},
      {"classes", m.schema.classes}}},
    {"outputs_per_example", m.outputs_per_example},
    {"checkpoint",
     {{"global_step", m.global_step},
      {"dir", m.checkpoint_dir},
      {"id", m.checkpoint_id},
      {"time", m.checkpoint_time}}},
    {"actorps_version", m.actorps_version},
    {"created", m.created},
    {"onnx",
     {{"file", m.onnx_file},
      {"opset", m.onnx_opset},
      {"inputs", m.onnx_inputs},
      {"outputs", m.onnx_outputs}}},
    {"tables", tables},
    {"files", files},
  };
  return doc.dump(2) + "\n";
}

export_manifest parse_export_manifest(const std::string& text,
                                      const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw input_error(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  manifest_reader top{doc, path, ""};
  if (top.str("format") != export_format_name)
    top.fail("format", fmt::format("is not \"{}\"", export_format_name));
  auto version = top.uint("version");
  if (version != export_format_version)
    top.fail("version", fmt::format("unsupported export format version {} "
                                    "(this build reads {})",
                                    version, export_format_version));
  export_manifest m;
  m.name = top.str("name");
  manifest_reader model{top.at("model"), path, "model"};
  m.model_type = model.str("type");
  for (auto& w : model.array("layers")) {
    if (!w.is_number_unsigned())
      model.fail("layers", "must hold whole numbers");
    m.layers.push_back(w.get<uint64_t>());
  }
  m.init_seed = model.uint("init_seed");
  auto& opts = model.at("options");
  if (!opts.is_object())
    model.fail("options", "must be an object");
  for (auto& [k, v] : opts.items())
    m.model_options[k] = v.dump();
  manifest_reader schema{top.at("schema"), path, "schema"};
  m.schema.dense_dim = schema.uint("dense_dim", uint64_t{1} << 32);
  for (auto& f : schema.array("fields")) {
    manifest_reader field{f, path, "schema.fields[]"};
    m.schema.fields.push_back(field_schema{
      field.str("name"), field.uint("vocabulary"), field.boolean("weighted")});
  }
  auto labels = schema.str("labels");
  if (labels != "binary" && labels != "multiclass")
    schema.fail("labels", "must be \"binary\" or \"multiclass\"");
  m.schema.labels = labels == "binary" ? label_kind::binary
                                       : label_kind::multiclass;
  m.schema.classes = static_cast<uint32_t>(schema.uint("classes", 1u << 24));
  m.outputs_per_example = static_cast<uint32_t>(
    top.uint("outputs_per_example", 1u << 24));
  manifest_reader ckpt{top.at("checkpoint"), path, "checkpoint"};
  m.global_step = ckpt.uint("global_step");
  m.checkpoint_dir = ckpt.str("dir");
  m.checkpoint_id = ckpt.str("id");
  m.checkpoint_time = ckpt.str("time");
  m.actorps_version = top.str("actorps_version");
  m.created = top.str("created");
  manifest_reader onnx{top.at("onnx"), path, "onnx"};
  m.onnx_file = onnx.file("file");
  m.onnx_opset = static_cast<int64_t>(onnx.uint("opset", 1000));
  for (auto* list : {"inputs", "outputs"})
    for (auto& n : onnx.array(list)) {
      if (!n.is_string())
        onnx.fail(list, "must hold names");
      (list[0] == 'i' ? m.onnx_inputs : m.onnx_outputs)
        .push_back(n.get<std::string>());
    }
  for (auto& t : top.array("tables")) {
    manifest_reader r{t, path, "tables[]"};
    export_table_entry e;
    e.variable = r.str("variable");
    e.field = r.str("field");
    e.combiner = r.str("combiner");
    if (e.combiner != "sum" && e.combiner != "mean")
      r.fail("combiner", "must be \"sum\" or \"mean\"");
    e.dim = r.uint("dim", 1u << 20);
    if (e.dim == 0)
      r.fail("dim", "must be at least 1");
    e.vocabulary = r.uint("vocabulary");
    e.init_scale = static_cast<float>(r.real("init_scale"));
    e.init_seed = r.uint("init_seed");
    e.stored = r.str("stored");
    if (e.stored != "onnx" && e.stored != "files")
      r.fail("stored", "must be \"onnx\" or \"files\"");
    e.rows = r.uint("rows");
    for (auto& f : r.array("files")) {
      manifest_reader fr{f, path, "tables[].files[]"};
      e.files.push_back(export_table_file{fr.file("path"), fr.uint("rows"),
                                          fr.uint("first_key"),
                                          fr.uint("last_key")});
    }
    m.tables.push_back(std::move(e));
  }
  for (auto& f : top.array("files")) {
    manifest_reader r{f, path, "files[]"};
    m.files.push_back(export_file{r.file("path"), r.uint("bytes"),
                                  parse_crc(r, "crc32")});
  }
  return m;
}

} // namespace actorps
