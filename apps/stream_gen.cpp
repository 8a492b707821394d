#include "apps/stream_gen.hpp"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/job_options.hpp"
#include "core/stream_gen.hpp"

namespace actorps {

namespace {

constexpr const char* stream_gen_usage = R"(usage: actorps stream-gen --out DIR --parts N --rows-per-part R [flags]

Writes a stream of click-log parts for a job that reads a stream: DIR/part-
00000000.csv, part-00000001.csv, ... (CSV: label, I1..I13, C1..C26; the
synthetic_ctr generator's examples), each written under a temporary name,
renamed, then marked complete by an empty NAME.done. Ids drift: part p's hot
ids are shifted by floor(S * p), and a share X of all lookups are new ids;
labels come from one hidden model, so a key means the same in every part.
Prints a line per part and a summary: distinct ids so far and the share seen
once. See docs/guide/streams.md.

  --out DIR              the folder (created; must not hold these parts yet)
  --parts N              parts to write (1 .. 100000000)
  --rows-per-part R      examples per part (1 .. 2^32)
  --new-id-rate X        share of lookups that are new ids, 0 .. 1 (default 0)
  --drift S              ids the hot head moves per part (default 0)
  --seed K               the generator's seed (default 1)
  --interval-ms T        pause between parts, in ms (default 0)
  -h, --help             this text
)";

volatile std::sig_atomic_t stop_signal = 0;

extern "C" void on_stop_signal(int) {
  stop_signal = 1;
}

double to_real(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(x))
    throw input_error(fmt::format("{}: expected a number, got {}", flag,
                                  actorps::quoted(value)));
  return x;
}

} // namespace

int run_stream_gen(const std::vector<std::string>& args) {
  stream_gen_config cfg;
  bool has_parts = false;
  bool has_rows = false;
  for (size_t i = 0; i < args.size(); ++i) {
    auto& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(stream_gen_usage, stdout);
      return 0;
    }
    if (a.rfind("--", 0) != 0)
      throw input_error(fmt::format("unknown argument \"{}\" (see actorps "
                                    "stream-gen --help)",
                                    a));
    if (i + 1 >= args.size())
      throw input_error(fmt::format("{}: missing value", a));
    auto& v = args[++i];
    if (a == "--out") {
      cfg.out = v;
    } else if (a == "--parts") {
      cfg.parts = to_count(a, v, 1, 100'000'000);
      has_parts = true;
    } else if (a == "--rows-per-part") {
      cfg.rows_per_part = to_count(a, v, 1, uint64_t{1} << 32);
      has_rows = true;
    } else if (a == "--new-id-rate") {
      cfg.new_id_rate = to_real(a, v);
    } else if (a == "--drift") {
      cfg.drift = to_real(a, v);
    } else if (a == "--seed") {
      cfg.ctr.seed = to_count(a, v, 0, UINT64_MAX);
    } else if (a == "--interval-ms") {
      cfg.interval = std::chrono::milliseconds{
        to_count(a, v, 0, 86'400'000)};
    } else {
      throw input_error(fmt::format("unknown argument \"{}\" (see actorps "
                                    "stream-gen --help)",
                                    a));
    }
  }
  if (cfg.out.empty())
    throw input_error("--out DIR: the folder to write the parts to");
  if (!has_parts || !has_rows)
    throw input_error(fmt::format("{}: required (see actorps stream-gen "
                                  "--help)",
                                  has_parts ? "--rows-per-part" : "--parts"));
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  auto summary = generate_stream(
    cfg,
    [&](const stream_gen_summary& s) {
      fmt::print("part {} of {}: {} rows, {} distinct ids so far\n",
                 s.parts - 1, cfg.parts, cfg.rows_per_part, s.distinct_ids);
      std::fflush(stdout);
    },
    [] { return stop_signal != 0; });
  fmt::print("stream-gen: {}{}\n", to_string(summary, cfg.out),
             summary.parts < cfg.parts ? " (stopped early)" : "");
  return 0;
}

} // namespace actorps
