#include "core/stream_source.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/registry.hpp"
#include "core/stream_dir.hpp"

namespace actorps {

stream_source::~stream_source() {
  // nop
}

const char* to_string(stream_end why) noexcept {
  switch (why) {
    case stream_end::none:
      return "running";
    case stream_end::stopped:
      return "stopped";
    case stream_end::end_after:
      return "end_after";
    case stream_end::idle:
      return "idle";
  }
  return "?";
}

namespace {

/// The built-in sources: one line each; each opener lives beside its
/// source.
const struct {
  const char* name;
  std::unique_ptr<stream_source> (*open)(const stream_config&, stream_env);
} built_in_sources[] = {
  {"dir", open_stream_dir},
};

registry<stream_opener>& sources() {
  static registry<stream_opener> r{
    "register_stream_source", "stream source", built_in_sources,
    [](auto& line) { return stream_opener{line.open}; }};
  return r;
}

} // namespace

std::unique_ptr<stream_source> open_stream(const stream_config& cfg,
                                           stream_env env) {
  validate(cfg);
  auto open = sources().find(cfg.source);
  // validate() found it; it can only be gone if another thread removed it.
  if (!open)
    throw std::invalid_argument(
      fmt::format("open_stream: source \"{}\" was removed", cfg.source));
  return (*open)(cfg, std::move(env));
}

bool has_stream_source(const std::string& name) {
  return sources().find(name).has_value();
}

std::vector<std::string> stream_source_names() {
  return sources().names();
}

void register_stream_source(const std::string& name, stream_opener open) {
  if (!open)
    throw std::invalid_argument(
      fmt::format("register_stream_source(\"{}\"): empty opener", name));
  sources().add(name, std::move(open));
}

bool unregister_stream_source(const std::string& name) {
  return sources().remove(name).has_value();
}

} // namespace actorps
