#include "core/part_format.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/ctr_csv.hpp"
#include "core/error.hpp"
#include "core/libsvm.hpp"
#include "core/registry.hpp"
#include "core/stream_config.hpp"

namespace actorps {

namespace {

data_schema ctr_csv_part_schema(const stream_config& cfg) {
  return ctr_csv_schema(cfg.dense_features, cfg.fields);
}

dataset read_ctr_csv_stream_part(const std::string& path, const stream_config&,
                          const data_schema& schema, bad_record_sink& bad) {
  return read_ctr_csv(path, schema, bad);
}

data_schema libsvm_part_schema(const stream_config& cfg) {
  if (cfg.num_features == 0)
    throw input_error("data.stream_num_features: required for the format libsvm "
                      "(the number of features, at least 1)");
  return libsvm_schema(cfg.num_features);
}

dataset read_libsvm_stream_part(const std::string& path, const stream_config& cfg,
                         const data_schema& schema, bad_record_sink& bad) {
  return read_libsvm_part(path, schema, cfg.one_based, bad);
}

/// The built-in part formats: one line each.
const struct {
  const char* name;
  data_schema (*schema)(const stream_config&);
  dataset (*read)(const std::string&, const stream_config&,
                  const data_schema&, bad_record_sink&);
} built_in_formats[] = {
  {"ctr_csv", ctr_csv_part_schema, read_ctr_csv_stream_part},
  {"libsvm", libsvm_part_schema, read_libsvm_stream_part},
};

registry<part_format>& part_formats() {
  static registry<part_format> r{
    "register_part_format", "part format", built_in_formats, [](auto& line) {
      return part_format{line.schema, line.read};
    }};
  return r;
}

} // namespace

part_format find_part_format(const std::string& name) {
  if (auto f = part_formats().find(name))
    return *f;
  throw input_error(fmt::format("data.stream_format: unknown format \"{}\" "
                                "(known: {})",
                                name, part_formats().known()));
}

std::vector<std::string> part_format_names() {
  return part_formats().names();
}

void register_part_format(const std::string& name, part_format format) {
  if (!format.schema || !format.read)
    throw std::invalid_argument(
      fmt::format("register_part_format(\"{}\"): empty function", name));
  part_formats().add(name, std::move(format));
}

bool unregister_part_format(const std::string& name) {
  return part_formats().remove(name).has_value();
}

} // namespace actorps
