#include "models/export/exporter.hpp"

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <numeric>

#include <sys/stat.h>
#include <unistd.h>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "core/checkpoint_files.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/table_file.hpp"
#include "core/table_init.hpp"
#include "models/export/export_manifest.hpp"
#include "models/export/model_graphs.hpp"
#include "models/registry.hpp"

#ifndef ACTORPS_VERSION
#define ACTORPS_VERSION "unknown"
#endif

namespace actorps {

namespace {

using export_detail::export_table;

/// "YYYY-MM-DDTHH:MM:SSZ".
std::string utc_text(time_t t) {
  struct tm parts;
  gmtime_r(&t, &parts);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return buf;
}

/// The rows of one table gathered from its checkpoint shards, sorted by
/// key.
struct gathered_table {
  std::vector<uint64_t> keys;
  std::vector<float> values;
  uint32_t shards = 0;
};

/// The model's flat dense buffer from the checkpoint's dense shards, and
/// each table's rows; checks that the checkpoint holds exactly the model's
/// variables.
void gather(const checkpoint_state& st, const std::vector<variable_def>& vars,
            const std::string& what, std::vector<float>& dense,
            std::vector<gathered_table>& tables) {
  absl::flat_hash_map<std::string, uint32_t> index;
  std::vector<uint64_t> offsets(vars.size(), 0);
  uint64_t size = 0;
  for (uint32_t v = 0; v < vars.size(); ++v) {
    index.emplace(vars[v].name, v);
    offsets[v] = size;
    size += vars[v].size();
  }
  dense.assign(size, 0.0f);
  std::vector<uint64_t> covered(vars.size(), 0);
  tables.assign(vars.size(), {});
  for (auto& sh : st.shards) {
    auto i = index.find(sh.variable);
    if (i == index.end())
      throw input_error(fmt::format("{}: variable \"{}\" is not one of the "
                                    "model's (is the config the job's?)",
                                    what, sh.variable));
    auto& var = vars[i->second];
    if (sh.table != (var.kind == variable_kind::table) || sh.cols != var.cols)
      throw input_error(fmt::format("{}: variable \"{}\" is a {} of {} "
                                    "columns, the model's a {} of {}",
                                    what, sh.variable,
                                    sh.table ? "table" : "dense variable",
                                    sh.cols, to_string(var.kind), var.cols));
    if (sh.table) {
      auto& t = tables[i->second];
      t.keys.insert(t.keys.end(), sh.keys.begin(), sh.keys.end());
      t.values.insert(t.values.end(), sh.values.begin(), sh.values.end());
      ++t.shards;
      continue;
    }
    if (sh.row_end > var.rows || sh.values.size() != (sh.row_end - sh.row_begin) * sh.cols)
      throw input_error(fmt::format("{}: shard {} of \"{}\" (rows [{}, {})) "
                                    "does not fit its {} rows",
                                    what, sh.index, sh.variable, sh.row_begin,
                                    sh.row_end, var.rows));
    std::copy(sh.values.begin(), sh.values.end(),
              dense.begin() + offsets[i->second] + sh.row_begin * sh.cols);
    covered[i->second] += sh.values.size();
  }
  for (uint32_t v = 0; v < vars.size(); ++v)
    if (vars[v].kind == variable_kind::dense && covered[v] != vars[v].size())
      throw input_error(fmt::format("{}: holds {} of the {} floats of "
                                    "variable \"{}\"",
                                    what, covered[v], vars[v].size(),
                                    vars[v].name));
  // Each table's rows sorted by key (a key in two shards: refused).
  for (uint32_t v = 0; v < vars.size(); ++v) {
    auto& t = tables[v];
    auto dim = vars[v].cols;
    std::vector<uint64_t> order(t.keys.size());
    std::iota(order.begin(), order.end(), uint64_t{0});
    std::sort(order.begin(), order.end(),
              [&](uint64_t a, uint64_t b) { return t.keys[a] < t.keys[b]; });
    std::vector<uint64_t> keys(order.size());
    std::vector<float> values(order.size() * dim);
    for (uint64_t i = 0; i < order.size(); ++i) {
      keys[i] = t.keys[order[i]];
      if (i > 0 && keys[i] == keys[i - 1])
        throw input_error(fmt::format("{}: table \"{}\" holds key {} twice",
                                      what, vars[v].name, keys[i]));
      std::copy_n(t.values.begin() + order[i] * dim, dim,
                  values.begin() + i * dim);
    }
    t.keys = std::move(keys);
    t.values = std::move(values);
  }
}

/// A temporary directory that removes itself unless released.
struct tmp_dir_guard {
  std::string path;
  bool keep = false;
  ~tmp_dir_guard() {
    if (!keep && !path.empty())
      detail::remove_tree_quietly(path);
  }
};

/// A table's file name stem: "table-T-NAME" with NAME the variable's name,
/// every character outside [A-Za-z0-9_-] replaced by '_'.
std::string table_stem(uint32_t t, const std::string& variable) {
  std::string name = variable;
  for (auto& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
      c = '_';
  return fmt::format("table-{}-{}", t, name.substr(0, 100));
}

} // namespace

export_result export_state(const checkpoint_state& st,
                           const std::string& checkpoint_name,
                           const std::string& checkpoint_time,
                           const job_config& cfg, const data_schema& schema,
                           const std::string& model_dir,
                           const export_options& opts) {
  auto what = fmt::format("checkpoint {}", checkpoint_name);
  check_exportable(cfg, schema);
  auto net = make_model(cfg, schema);
  auto width = net->prediction_width();
  auto& graph = export_detail::graph_of(cfg.model);
  auto vars = net->variables();
  std::vector<float> dense;
  std::vector<gathered_table> gathered;
  gather(st, vars, what, dense, gathered);

  export_manifest m;
  m.name = opts.name;
  if (m.name.empty()) {
    auto base = detail::base_name(cfg.source);
    m.name = cfg.source.empty() || cfg.source[0] == '<'
               ? cfg.model
               : base.substr(0, base.rfind('.'));
  }
  m.model_type = cfg.model;
  m.layers = cfg.layers;
  m.init_seed = cfg.init_seed;
  m.model_options = cfg.model_options;
  m.schema = schema;
  m.outputs_per_example = width;
  m.global_step = st.global_step;
  m.checkpoint_dir = checkpoint_name;
  m.checkpoint_id = fmt::format("{:016x}", st.id);
  m.checkpoint_time = checkpoint_time;
  m.actorps_version = ACTORPS_VERSION;
  m.created = utc_text(std::time(nullptr));
  m.onnx_opset = export_detail::onnx_opset;

  // Which tables go into the ONNX file: fixed vocabularies, smallest
  // first, while they fit the limit together. Their rows are all the
  // vocabulary's: a key the checkpoint lacks gets its initial row, as the
  // evaluator gives it (cluster/topology/evaluator.cpp).
  auto tables = graph.tables(*net, schema);
  std::vector<std::vector<float>> full_rows(tables.size());
  uint64_t budget = opts.table_limit_bytes;
  // Smallest first: as many tables as fit go where any ONNX runtime can
  // look their keys up.
  std::vector<size_t> by_size(tables.size());
  std::iota(by_size.begin(), by_size.end(), size_t{0});
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    return tables[a].vocabulary * tables[a].dim
           < tables[b].vocabulary * tables[b].dim;
  });
  for (auto i : by_size) {
    auto& t = tables[i];
    auto& g = gathered[t.variable];
    if (!g.keys.empty() && t.vocabulary > 0 && g.keys.back() >= t.vocabulary)
      throw input_error(fmt::format("{}: table \"{}\" holds key {}, outside "
                                    "its vocabulary of {}",
                                    what, t.name, g.keys.back(),
                                    t.vocabulary));
    uint64_t bytes = t.vocabulary * t.dim * sizeof(float);
    if (t.vocabulary == 0 || bytes > budget)
      continue;
    budget -= bytes;
    t.in_onnx = true;
    auto& rows = full_rows[i];
    rows.resize(t.vocabulary * t.dim);
    table_shard_def def{t.name, t.dim, t.vocabulary, t.init_scale,
                        cfg.init_seed};
    uint64_t next = 0;
    for (uint64_t key = 0; key < t.vocabulary; ++key) {
      if (next < g.keys.size() && g.keys[next] == key) {
        std::copy_n(g.values.begin() + next * t.dim, t.dim,
                    rows.begin() + key * t.dim);
        ++next;
      } else {
        initial_row(def, key, rows.data() + key * t.dim);
      }
    }
    t.rows = rows.data();
  }

  // The ONNX model.
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION);
  proto.set_producer_name("actorps");
  proto.set_producer_version(ACTORPS_VERSION);
  proto.set_model_version(static_cast<int64_t>(st.global_step));
  proto.set_doc_string(fmt::format("{} \"{}\" exported from {} (global step "
                                   "{}); inputs and outputs: "
                                   "docs/reference/export-format.md",
                                   cfg.model, m.name, checkpoint_name,
                                   st.global_step));
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(export_detail::onnx_opset);
  auto* g = proto.mutable_graph();
  g->set_name(m.name);
  export_detail::onnx_builder builder{*g};
  graph.write(*net, schema, dense.data(), tables, builder);
  for (auto& in : g->input())
    m.onnx_inputs.push_back(in.name());
  for (auto& out : g->output())
    m.onnx_outputs.push_back(out.name());
  std::string onnx_bytes;
  if (!proto.SerializeToString(&onnx_bytes))
    throw input_error(fmt::format("{}: the ONNX model is too large for "
                                  "protobuf (2 GiB); lower "
                                  "--table-limit-bytes",
                                  what));
  // Large values of memory are no longer needed.
  proto.Clear();
  full_rows.clear();

  // The files, into a temporary directory.
  detail::make_root(model_dir);
  auto version = st.global_step;
  tmp_dir_guard tmp{detail::join_path(
    model_dir, fmt::format(".tmp-{}-{}", version, ::getpid()))};
  detail::remove_tree_quietly(tmp.path);
  if (::mkdir(tmp.path.c_str(), 0755) != 0)
    detail::io_fail(tmp.path, "create the export's temporary directory",
                    errno);
  export_result result;
  result.version = version;
  {
    detail::file_writer out{detail::join_path(tmp.path, m.onnx_file)};
    out.put(onnx_bytes.data(), onnx_bytes.size());
    out.finish();
    m.files.push_back({m.onnx_file, out.bytes(), out.crc()});
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    auto& t = tables[i];
    auto& gt = gathered[t.variable];
    export_table_entry e;
    e.variable = t.name;
    e.field = schema.fields.at(t.field).name;
    e.combiner = t.combiner;
    e.dim = t.dim;
    e.vocabulary = t.vocabulary;
    e.init_scale = t.init_scale;
    e.init_seed = cfg.init_seed;
    if (t.in_onnx) {
      e.stored = "onnx";
      e.rows = t.vocabulary;
      ++result.tables_in_onnx;
    } else {
      e.stored = "files";
      e.rows = gt.keys.size();
      ++result.tables_in_files;
      // As many files as the checkpoint had shards, each a contiguous run
      // of the sorted keys.
      uint64_t files = std::max<uint64_t>(1, gt.shards);
      files = std::min<uint64_t>(files, std::max<uint64_t>(1, e.rows));
      for (uint64_t f = 0; f < files; ++f) {
        auto first = e.rows * f / files;
        auto last = e.rows * (f + 1) / files;
        std::vector<uint64_t> keys(gt.keys.begin() + first,
                                   gt.keys.begin() + last);
        std::vector<float> values(gt.values.begin() + first * t.dim,
                                  gt.values.begin() + last * t.dim);
        auto name = fmt::format("{}-{:04}.apstable", table_stem(i, t.name), f);
        auto info = write_table_file(detail::join_path(tmp.path, name), t.dim,
                                     keys, values);
        m.files.push_back({name, info.bytes, info.crc32});
        e.files.push_back({name, keys.size(),
                           keys.empty() ? 0 : keys.front(),
                           keys.empty() ? 0 : keys.back()});
        ++result.table_files;
      }
    }
    m.tables.push_back(std::move(e));
  }
  {
    auto text = to_json_text(m);
    detail::file_writer out{detail::join_path(tmp.path, "manifest.json")};
    out.put(text.data(), text.size());
    out.finish();
    result.bytes += out.bytes();
  }
  for (auto& f : m.files)
    result.bytes += f.bytes;
  detail::sync_dir(tmp.path);
  result.dir = detail::join_path(model_dir, std::to_string(version));
  detail::install(model_dir, tmp.path, result.dir, version);
  detail::sync_dir(model_dir);
  // After a swap, tmp.path holds the previous export of this version: the
  // guard removes it.
  return result;
}

void check_exportable(const job_config& cfg, const data_schema& schema) {
  auto net = make_model(cfg, schema);
  if (net->prediction_width() == 0)
    throw input_error(fmt::format("model.type: \"{}\" gives no predictions "
                                  "and cannot be exported",
                                  cfg.model));
  (void) export_detail::graph_of(cfg.model);
}

std::string checkpoint_time_of(const std::string& dir) {
  struct stat info;
  auto manifest = detail::join_path(dir, "manifest.json");
  return utc_text(::stat(manifest.c_str(), &info) == 0 ? info.st_mtime
                                                       : std::time(nullptr));
}

export_result export_checkpoint(const std::string& checkpoint_dir,
                                const job_config& cfg,
                                const data_schema& schema,
                                const std::string& model_dir,
                                const export_options& opts) {
  auto st = read_checkpoint(checkpoint_dir);
  return export_state(st, detail::base_name(checkpoint_dir),
                      checkpoint_time_of(checkpoint_dir), cfg, schema,
                      model_dir, opts);
}

} // namespace actorps
