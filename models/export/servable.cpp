// servable::load, export_versions and latest_export_version (models/servable.hpp): an export
// read back, checked file by file against its manifest, and answered with
// the model's own forward pass (model::predict).

#include "models/servable.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include <sys/stat.h>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "core/checkpoint_files.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/table_file.hpp"
#include "core/table_init.hpp"
#include "models/export/export_manifest.hpp"
#include "models/model.hpp"
#include "models/registry.hpp"

namespace actorps {

namespace {

/// Examples per forward pass (the workspaces' size).
constexpr uint64_t servable_rows = 256;

/// Reads a whole file of the export, checking its size and CRC-32 against
/// the manifest's entry.
std::string read_checked(const std::string& dir, const export_file& f) {
  auto path = detail::join_path(dir, f.path);
  detail::file_reader in{path, f.bytes};
  std::string bytes;
  bytes.reserve(f.bytes);
  while (in.remaining() > 0) {
    auto n = static_cast<size_t>(
      std::min<uint64_t>(in.remaining(), detail::file_reader::chunk_size));
    auto* p = in.take(n);
    bytes.append(reinterpret_cast<const char*>(p), n);
  }
  if (in.crc() != f.crc32)
    in.fail(fmt::format("checksum mismatch (expected {:08x}, got {:08x})",
                        f.crc32, in.crc()));
  return bytes;
}

/// The floats of initializer `name` of `graph`, which must hold `count`.
std::vector<float> initializer_floats(const onnx::GraphProto& graph,
                                      const std::string& name,
                                      uint64_t count,
                                      const std::string& path) {
  for (auto& t : graph.initializer()) {
    if (t.name() != name)
      continue;
    if (t.data_type() != onnx::TensorProto::FLOAT)
      throw input_error(fmt::format("{}: initializer \"{}\" is not float",
                                    path, name));
    std::vector<float> out;
    if (!t.raw_data().empty()) {
      if (t.raw_data().size() != count * sizeof(float))
        throw input_error(fmt::format("{}: initializer \"{}\" has {} bytes, "
                                      "the model's variable {} floats",
                                      path, name, t.raw_data().size(),
                                      count));
      out.resize(count);
      std::memcpy(out.data(), t.raw_data().data(), count * sizeof(float));
    } else {
      if (static_cast<uint64_t>(t.float_data_size()) != count)
        throw input_error(fmt::format("{}: initializer \"{}\" has {} floats, "
                                      "the model's variable {}",
                                      path, name, t.float_data_size(), count));
      out.assign(t.float_data().begin(), t.float_data().end());
    }
    return out;
  }
  throw input_error(fmt::format("{}: no initializer \"{}\" (the model's "
                                "variable)",
                                path, name));
}

/// One table of a loaded export: its rows from the ONNX initializer or its
/// table shard files, and the initial rows of keys it lacks.
struct served_table {
  export_table_entry entry;
  table_shard_def def;
  /// stored "onnx": vocabulary x dim floats.
  std::vector<float> rows;
  /// stored "files": the files, in key order, and each one's first key.
  std::vector<table_file> files;
  std::vector<uint64_t> first_keys;

  /// Writes the row of `key` into `out`; returns false (initial row
  /// written) for a key the export does not hold.
  bool lookup(uint64_t key, float* out) const {
    auto dim = entry.dim;
    if (entry.stored == "onnx") {
      std::memcpy(out, rows.data() + key * dim, dim * sizeof(float));
      return true;
    }
    auto at = std::upper_bound(first_keys.begin(), first_keys.end(), key);
    if (at != first_keys.begin()) {
      auto& f = files[static_cast<size_t>(at - first_keys.begin() - 1)];
      if (const float* row = f.find(key)) {
        std::memcpy(out, row, dim * sizeof(float));
        return true;
      }
    }
    initial_row(def, key, out);
    return false;
  }
};

class loaded_servable final : public servable {
public:
  static std::shared_ptr<const servable> load_dir(const std::string& dir);

  const std::string& name() const override {
    return manifest_.name;
  }

  uint64_t version() const override {
    return manifest_.global_step;
  }

  const data_schema& schema() const override {
    return manifest_.schema;
  }

  uint32_t outputs_per_example() const override {
    return manifest_.outputs_per_example;
  }

  std::vector<float> predict(const example_batch& batch,
                             servable_counters* counters) const override;

private:
  void check(const example_batch& batch) const;

  std::unique_ptr<model_workspace> take_workspace() const {
    std::lock_guard<std::mutex> guard{mtx_};
    if (pool_.empty())
      return net_->make_workspace(servable_rows);
    auto ws = std::move(pool_.back());
    pool_.pop_back();
    return ws;
  }

  void give_workspace(std::unique_ptr<model_workspace> ws) const {
    std::lock_guard<std::mutex> guard{mtx_};
    pool_.push_back(std::move(ws));
  }

  export_manifest manifest_;
  std::shared_ptr<const model> net_;
  std::vector<float> dense_;
  /// One per table variable, in variable order (model_inputs::tables).
  std::vector<served_table> tables_;
  std::vector<uint32_t> table_vars_;
  mutable std::mutex mtx_;
  mutable std::vector<std::unique_ptr<model_workspace>> pool_;
};

std::shared_ptr<const servable>
loaded_servable::load_dir(const std::string& dir) {
  auto result = std::make_shared<loaded_servable>();
  auto& m = result->manifest_;
  auto manifest_path = detail::join_path(dir, "manifest.json");
  {
    struct stat st;
    if (::stat(manifest_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      throw input_error(fmt::format("{}: missing (not an export's version "
                                    "directory)",
                                    manifest_path));
    detail::file_reader in{manifest_path, static_cast<uint64_t>(st.st_size)};
    std::string text;
    while (in.remaining() > 0) {
      auto n = static_cast<size_t>(
        std::min<uint64_t>(in.remaining(), detail::file_reader::chunk_size));
      text.append(reinterpret_cast<const char*>(in.take(n)), n);
    }
    m = parse_export_manifest(text, manifest_path);
  }
  // The model, as training built it.
  job_config cfg;
  cfg.model = m.model_type;
  cfg.layers = m.layers;
  cfg.init_seed = m.init_seed;
  cfg.model_options = m.model_options;
  cfg.source = manifest_path;
  result->net_ = make_model(cfg, m.schema);
  auto& net = *result->net_;
  if (net.prediction_width() != m.outputs_per_example)
    throw input_error(fmt::format("{}: outputs_per_example is {}, the model "
                                  "gives {}",
                                  manifest_path, m.outputs_per_example,
                                  net.prediction_width()));
  // Every file, checked against the manifest; the ONNX file kept.
  std::string onnx_bytes;
  bool onnx_listed = false;
  for (auto& f : m.files) {
    if (f.path == m.onnx_file) {
      onnx_bytes = read_checked(dir, f);
      onnx_listed = true;
    } else {
      (void) read_checked(dir, f);
    }
  }
  auto onnx_path = detail::join_path(dir, m.onnx_file);
  if (!onnx_listed)
    throw input_error(fmt::format("{}: files: the ONNX file {} is not listed",
                                  manifest_path, m.onnx_file));
  onnx::ModelProto proto;
  if (!proto.ParseFromString(onnx_bytes))
    throw input_error(fmt::format("{}: not a valid ONNX model", onnx_path));
  onnx_bytes.clear();
  auto& graph = proto.graph();
  // Dense weights from the ONNX initializers: the file an independent
  // runtime runs is the one served.
  auto vars = net.variables();
  for (uint32_t v = 0; v < vars.size(); ++v) {
    auto& var = vars[v];
    if (var.kind == variable_kind::dense) {
      auto w = initializer_floats(graph, var.name, var.size(), onnx_path);
      result->dense_.insert(result->dense_.end(), w.begin(), w.end());
      continue;
    }
    auto at = std::find_if(m.tables.begin(), m.tables.end(),
                           [&](auto& t) { return t.variable == var.name; });
    if (at == m.tables.end())
      throw input_error(fmt::format("{}: tables: no entry for the model's "
                                    "table \"{}\"",
                                    manifest_path, var.name));
    if (at->dim != var.cols || at->vocabulary != var.rows)
      throw input_error(fmt::format("{}: tables: \"{}\" has dim {} and "
                                    "vocabulary {}, the model's {} and {}",
                                    manifest_path, var.name, at->dim,
                                    at->vocabulary, var.cols, var.rows));
    served_table t;
    t.entry = *at;
    t.def = table_shard_def{var.name, var.cols, var.rows, at->init_scale,
                            at->init_seed};
    if (at->stored == "onnx") {
      if (var.rows == 0)
        throw input_error(fmt::format("{}: tables: \"{}\" has unbounded keys "
                                      "and cannot be stored in the ONNX file",
                                      manifest_path, var.name));
      t.rows = initializer_floats(graph, var.name, var.rows * var.cols,
                                  onnx_path);
    } else {
      uint64_t last = 0;
      for (auto& f : at->files) {
        auto path = detail::join_path(dir, f.path);
        auto listed = std::any_of(m.files.begin(), m.files.end(),
                                  [&](auto& x) { return x.path == f.path; });
        if (!listed)
          throw input_error(fmt::format("{}: table file {} has no checksum "
                                        "in files",
                                        manifest_path, f.path));
        auto file = table_file::open(path);
        if (file.dim() != var.cols || file.rows() != f.rows
            || (f.rows > 0
                && (file.key(0) != f.first_key
                    || file.key(f.rows - 1) != f.last_key)))
          throw input_error(fmt::format("{}: dim {} and {} rows, the "
                                        "manifest says {} and {} (keys {} "
                                        "to {})",
                                        path, file.dim(), file.rows(),
                                        var.cols, f.rows, f.first_key,
                                        f.last_key));
        if (f.rows == 0)
          continue;
        if (!t.files.empty() && f.first_key <= last)
          throw input_error(fmt::format("{}: its keys overlap the table's "
                                        "previous file",
                                        path));
        last = f.last_key;
        t.first_keys.push_back(f.first_key);
        t.files.push_back(std::move(file));
      }
    }
    result->tables_.push_back(std::move(t));
    result->table_vars_.push_back(v);
  }
  return result;
}

void loaded_servable::check(const example_batch& batch) const {
  auto& s = manifest_.schema;
  if (batch.dense_dim != s.dense_dim)
    throw input_error(fmt::format("the examples have {} dense features, the "
                                  "model takes {}",
                                  batch.dense_dim, s.dense_dim));
  if (batch.fields.size() != s.fields.size())
    throw input_error(fmt::format("the examples have {} sparse fields, the "
                                  "model takes {}",
                                  batch.fields.size(), s.fields.size()));
  if (!batch.dense_bytes.empty())
    throw input_error("the examples' dense features must be floats");
  batch.check("examples");
  for (size_t f = 0; f < s.fields.size(); ++f) {
    auto& field = batch.fields[f];
    auto vocabulary = s.fields[f].vocabulary;
    if (vocabulary == 0)
      continue;
    for (uint64_t i = 0; i < field.offsets[batch.rows]; ++i)
      if (field.keys[i] >= vocabulary)
        throw input_error(fmt::format("field {}: key {} is outside its "
                                      "vocabulary of {}",
                                      s.fields[f].name, field.keys[i],
                                      vocabulary));
  }
}

std::vector<float>
loaded_servable::predict(const example_batch& batch,
                         servable_counters* counters) const {
  check(batch);
  auto width = manifest_.outputs_per_example;
  std::vector<float> out(batch.rows * width);
  auto ws = take_workspace();
  example_batch chunk;
  std::vector<table_lookup> lookups(tables_.size());
  uint64_t unknown = 0;
  for (uint64_t first = 0; first < batch.rows; first += servable_rows) {
    auto last = std::min(batch.rows, first + servable_rows);
    chunk.reset(batch.dense_dim, batch.fields.size());
    for (auto r = first; r < last; ++r)
      chunk.append_row(batch, r);
    for (size_t i = 0; i < tables_.size(); ++i) {
      lookups[i].variable = table_vars_[i];
      lookups[i].dim = tables_[i].entry.dim;
      lookups[i].occurrences.clear();
    }
    net_->collect_keys(chunk, lookups);
    for (size_t i = 0; i < tables_.size(); ++i) {
      auto& t = lookups[i];
      t.deduplicate();
      for (size_t u = 0; u < t.keys.size(); ++u)
        if (!tables_[i].lookup(t.keys[u], t.rows.data() + u * t.dim))
          ++unknown;
    }
    model_inputs in{dense_.data(), &lookups};
    net_->predict(in, chunk, out.data() + first * width, *ws);
  }
  give_workspace(std::move(ws));
  if (counters != nullptr) {
    counters->examples.fetch_add(batch.rows, std::memory_order_relaxed);
    counters->unknown_keys.fetch_add(unknown, std::memory_order_relaxed);
  }
  return out;
}

} // namespace

std::shared_ptr<const servable> servable::load(const std::string& dir) {
  return loaded_servable::load_dir(dir);
}

std::vector<uint64_t> export_versions(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::vector<uint64_t> out;
  std::error_code ec;
  fs::directory_iterator it{model_dir, ec};
  if (ec)
    throw input_error(fmt::format("{}: cannot list the export's versions: {}",
                                  model_dir, ec.message()));
  for (; it != fs::directory_iterator{}; it.increment(ec)) {
    if (ec)
      throw input_error(fmt::format("{}: cannot list the export's versions: "
                                    "{}",
                                    model_dir, ec.message()));
    auto name = it->path().filename().string();
    if (name.empty() || name.size() > 19 || (name[0] == '0' && name.size() > 1)
        || name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::error_code dir_ec;
    if (!it->is_directory(dir_ec)
        || !fs::exists(it->path() / "manifest.json", dir_ec))
      continue;
    out.push_back(std::stoull(name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<uint64_t> latest_export_version(const std::string& model_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(model_dir, ec))
    return std::nullopt;
  auto versions = export_versions(model_dir);
  if (versions.empty())
    return std::nullopt;
  return versions.back();
}

} // namespace actorps
