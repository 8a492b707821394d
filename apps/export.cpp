#include "apps/export.hpp"

#include <chrono>
#include <cstdio>

#include <sys/stat.h>

#include <fmt/format.h>

#include "apps/cli.hpp"
#include "core/checkpoint.hpp"
#include "core/data_registry.hpp"
#include "core/error.hpp"
#include "core/job_options.hpp"
#include "models/export/exporter.hpp"

namespace actorps {

namespace {

constexpr const char* export_usage = R"(usage: actorps export --checkpoint DIR --out MODEL_DIR [flags] [job flags]

Turns a checkpoint into a servable model: MODEL_DIR/STEP/ (STEP the
checkpoint's global step) with manifest.json, model.onnx and table shard
files (docs/reference/export-format.md, docs/guide/serving.md). Written
into MODEL_DIR/.tmp-STEP-PID and renamed when complete.

The model and the data's schema come from the job's config, as for
`actorps train`: give the same --config FILE (and model or data flags) the
checkpoint was trained with.

  --checkpoint DIR           a checkpoint directory (ckpt-NNNNNNNNNN), or a
                             checkpoint root: its newest checkpoint (a
                             delta's whole chain is read)
  --out MODEL_DIR            where the version directory goes (created)
  --table-limit-bytes N      fixed-vocabulary tables go into the ONNX file
                             while their rows fit N bytes together (default
                             67108864 = 64 MiB; 0: every table in table files)
  --name NAME                the model's name in the manifest (default: the
                             config file's name without its extension)
  -h, --help                 this text
)";

} // namespace

int run_export(const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> extras;
  auto cmd = parse_job_args(args, "export",
                            {{"--checkpoint", true},
                             {"--out", true},
                             {"--table-limit-bytes", true},
                             {"--name", true}},
                            extras);
  if (cmd.help) {
    std::fputs(export_usage, stdout);
    return 0;
  }
  std::string checkpoint;
  std::string out;
  export_options opts;
  for (auto& [flag, value] : extras) {
    if (flag == "--checkpoint")
      checkpoint = value;
    else if (flag == "--out")
      out = value;
    else if (flag == "--table-limit-bytes")
      opts.table_limit_bytes = to_count(flag, value, 0, uint64_t{1} << 40);
    else if (flag == "--name")
      opts.name = value;
  }
  if (checkpoint.empty())
    throw input_error("export: --checkpoint DIR is missing (see actorps "
                      "export --help)");
  if (out.empty())
    throw input_error("export: --out MODEL_DIR is missing (see actorps "
                      "export --help)");
  // A root of checkpoints: its newest.
  struct stat st;
  auto manifest = checkpoint + "/manifest.json";
  if (::stat(manifest.c_str(), &st) != 0) {
    if (::stat(checkpoint.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw input_error(fmt::format("--checkpoint: {} is not a directory",
                                    checkpoint));
    auto latest = latest_checkpoint(checkpoint);
    if (latest.empty())
      throw input_error(fmt::format("--checkpoint: {} holds no complete "
                                    "checkpoint",
                                    checkpoint));
    checkpoint = latest;
  }
  auto start = std::chrono::steady_clock::now();
  auto data = open_dataset(cmd.job);
  auto r = export_checkpoint(checkpoint, cmd.job, data->schema(), out, opts);
  auto seconds = std::chrono::duration<double>(
                   std::chrono::steady_clock::now() - start)
                   .count();
  fmt::print("exported {} to {}: {:.1f} MB, {} tables in the ONNX file, {} "
             "in {} table files, {:.2f} s\n",
             checkpoint, r.dir, static_cast<double>(r.bytes) / 1e6,
             r.tables_in_onnx, r.tables_in_files, r.table_files, seconds);
  return 0;
}

} // namespace actorps
