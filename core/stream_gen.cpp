#include "core/stream_gen.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>
#include <utility>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "core/ctr_csv.hpp"
#include "core/error.hpp"
#include "core/stream_dir.hpp"

namespace actorps {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t max_parts = 100'000'000; // 8 digits in a part's name
constexpr double max_drift = 1073741824.0;  // 2^30 ids per part

/// Writes `text` to `path`, or input_error.
void write_part_file(const std::string& path, const std::string& text) {
  std::ofstream f{path, std::ios::binary | std::ios::trunc};
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  if (!f)
    throw input_error(fmt::format("{}: cannot write the file", path));
}

/// Sleeps for `d`, looking at `stop` every 50 ms; returns whether to stop.
bool pause_unless_stopped(std::chrono::milliseconds d, const std::function<bool()>& stop) {
  const auto until = std::chrono::steady_clock::now() + d;
  for (;;) {
    if (stop && stop())
      return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= until)
      return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
      until - now, std::chrono::milliseconds{50}));
  }
}

} // namespace

void validate(const stream_gen_config& cfg) {
  if (cfg.out.empty())
    throw input_error("--out: the folder to write the parts to is required");
  if (cfg.parts < 1 || cfg.parts > max_parts)
    throw input_error(fmt::format("--parts: {} is out of range [1, {}]",
                                  cfg.parts, max_parts));
  if (cfg.rows_per_part < 1 || cfg.rows_per_part > (uint64_t{1} << 32))
    throw input_error(fmt::format("--rows-per-part: {} is out of range "
                                  "[1, 2^32]",
                                  cfg.rows_per_part));
  if (!(cfg.new_id_rate >= 0.0 && cfg.new_id_rate <= 1.0))
    throw input_error(fmt::format("--new-id-rate: {} is out of range "
                                  "[0, 1]",
                                  cfg.new_id_rate));
  if (!(cfg.drift >= 0.0 && cfg.drift <= max_drift))
    throw input_error(fmt::format("--drift: {} is out of range [0, 2^30] "
                                  "(ids per part)",
                                  cfg.drift));
  if (cfg.interval.count() < 0)
    throw input_error("--interval-ms: must not be negative");
  if (cfg.ctr.cardinalities.empty())
    throw input_error("stream_gen: needs at least one field");
  // Zipf keys + shift stay below synthetic_ctr::new_key_base: cardinalities
  // up to 2^40 plus 2^30 x 10^8 < 2^57.
  for (auto c : cfg.ctr.cardinalities)
    if (c < 1 || c > (uint64_t{1} << 40))
      throw input_error(fmt::format("stream_gen: a field's cardinality {} "
                                    "is out of range [1, 2^40]",
                                    c));
}

std::string stream_part_name(uint64_t p) {
  return fmt::format("part-{:08}.csv", p);
}

std::string to_string(const stream_gen_summary& s, const std::string& dir) {
  auto share = [](uint64_t x, uint64_t of) {
    return of == 0 ? 0.0
                   : 100.0 * static_cast<double>(x) / static_cast<double>(of);
  };
  return fmt::format("{} parts, {} rows in {}; {} distinct ids so far, "
                     "{:.1f}% of them seen once; {:.1f}% of lookups new ids",
                     s.parts, s.rows, dir, s.distinct_ids,
                     100.0 * s.share_seen_once(),
                     share(s.new_id_lookups, s.lookups));
}

stream_gen_summary
generate_stream(const stream_gen_config& cfg,
                const std::function<void(const stream_gen_summary&)>& on_part,
                const std::function<bool()>& stop) {
  validate(cfg);
  std::error_code ec;
  fs::create_directories(cfg.out, ec);
  if (ec || !fs::is_directory(cfg.out))
    throw input_error(fmt::format("{}: cannot write the parts there ({})",
                                  cfg.out,
                                  ec ? ec.message() : "not a folder"));
  const synthetic_ctr gen{cfg.ctr};
  const auto schema = ctr_csv_schema(cfg.ctr.dense_features,
                                     cfg.ctr.cardinalities.size());
  const auto header = ctr_csv_header(schema) + "\n";
  stream_gen_summary sum;
  // (field, key) -> lookups so far: 1, or 2 for more than one.
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, uint8_t> seen;
  example_batch ex;
  std::string text;
  for (uint64_t p = 0; p < cfg.parts; ++p) {
    if (p > 0 && pause_unless_stopped(cfg.interval, stop))
      break;
    if (stop && stop())
      break;
    const auto name = stream_part_name(p);
    const auto path = cfg.out + "/" + name;
    const auto marker = path + std::string{stream_dir::done_suffix};
    if (fs::exists(path, ec) || fs::exists(marker, ec))
      throw input_error(fmt::format("{}: exists already (give stream-gen a "
                                    "new or empty folder)",
                                    path));
    key_drift drift{static_cast<uint64_t>(std::floor(cfg.drift
                                                     * static_cast<double>(p))),
                    cfg.new_id_rate};
    ex.reset(schema.dense_dim, schema.fields.size());
    for (uint64_t r = 0; r < cfg.rows_per_part; ++r)
      gen.append_stream(ex, p, r, drift);
    for (size_t f = 0; f < ex.fields.size(); ++f)
      for (auto key : ex.fields[f].keys) {
        ++sum.lookups;
        if (key >= synthetic_ctr::new_key_base)
          ++sum.new_id_lookups;
        auto& n = seen[{f, key}];
        if (n == 0)
          ++sum.ids_seen_once;
        else if (n == 1)
          --sum.ids_seen_once;
        n = static_cast<uint8_t>(std::min(n + 1, 2));
      }
    sum.distinct_ids = seen.size();
    text = header;
    append_ctr_csv_rows(ex, text);
    const auto temp = cfg.out + "/." + name + ".tmp";
    write_part_file(temp, text);
    fs::rename(temp, path, ec);
    if (ec)
      throw input_error(fmt::format("{}: cannot rename {} to it ({})", path,
                                    temp, ec.message()));
    write_part_file(marker, "");
    ++sum.parts;
    sum.rows += ex.rows;
    if (on_part)
      on_part(sum);
  }
  return sum;
}

} // namespace actorps
