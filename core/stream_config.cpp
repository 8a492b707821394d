#include "core/stream_config.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/part_format.hpp"
#include "core/stream_source.hpp"

namespace actorps {

void validate(const stream_config& cfg) {
  if (!has_stream_source(cfg.source))
    throw input_error(fmt::format("data.stream_source: unknown source \"{}\" "
                                  "(known: {})",
                                  cfg.source,
                                  fmt::join(stream_source_names(), ", ")));
  if (cfg.source == "dir" && cfg.dir.empty())
    throw input_error("data.stream_dir: the folder the parts appear in is "
                      "required");
  if (cfg.dense_features > 1024)
    throw input_error(fmt::format("data.stream_dense_features: {} is out of "
                                  "range [0, 1024]",
                                  cfg.dense_features));
  if (cfg.fields < 1 || cfg.fields > 1024)
    throw input_error(fmt::format("data.stream_fields: {} is out of range "
                                  "[1, 1024]",
                                  cfg.fields));
  if (cfg.num_features > (uint64_t{1} << 40))
    throw input_error(fmt::format("data.stream_num_features: {} is out of range "
                                  "[1, 2^40]",
                                  cfg.num_features));
  using std::chrono::milliseconds;
  if (cfg.poll_interval < milliseconds{1}
      || cfg.poll_interval > milliseconds{60'000})
    throw input_error(fmt::format("data.stream_poll_ms: {} is out of "
                                  "range [1, 60000]",
                                  cfg.poll_interval.count()));
  if (cfg.idle_timeout < milliseconds{0}
      || (cfg.idle_timeout > milliseconds{0}
          && cfg.idle_timeout < cfg.poll_interval))
    throw input_error(fmt::format("data.stream_idle_timeout_ms: {} must be 0 "
                                  "(never) or at least the poll interval "
                                  "({} ms)",
                                  cfg.idle_timeout.count(),
                                  cfg.poll_interval.count()));
  find_part_format(cfg.format).schema(cfg);
}

stream_config stream_config_of(const job_config& cfg) {
  stream_config out;
  out.dir = cfg.stream_dir;
  out.format = cfg.stream_format;
  out.dense_features = cfg.stream_dense_features;
  out.fields = cfg.stream_fields;
  out.num_features = cfg.stream_num_features;
  out.poll_interval = std::chrono::milliseconds(cfg.stream_poll_ms);
  out.end_after = cfg.stream_end_after;
  out.idle_timeout = std::chrono::milliseconds(cfg.stream_idle_timeout_ms);
  out.bad_records = parse_on_bad_record(cfg.on_bad_record,
                                        "data.on_bad_record");
  return out;
}

data_schema stream_schema(const stream_config& cfg) {
  validate(cfg);
  return find_part_format(cfg.format).schema(cfg);
}

} // namespace actorps
