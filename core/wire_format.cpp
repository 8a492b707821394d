#include "core/wire_format.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/registry.hpp"
#include "core/wire/formats.hpp"

namespace actorps {

// -- wire_format ----------------------------------------------------------------

wire_format::~wire_format() {
  // nop
}

bool wire_format::uses_residual() const {
  return false;
}

bool wire_format::is_sparse() const {
  return false;
}

// -- registry -------------------------------------------------------------------

namespace {

/// The built-in formats (core/wire/registry.cpp), then those added at run
/// time.
registry<wire_format_factory>& formats() {
  static registry<wire_format_factory> r{
    "register_wire_format", "format", detail::registered_wire_formats(),
    [](auto& line) { return wire_format_factory{line.make}; }};
  return r;
}

} // namespace

std::shared_ptr<const wire_format> make_wire_format(const std::string& spec) {
  auto colon = spec.find(':');
  auto name = spec.substr(0, colon);
  std::optional<std::string> arg;
  if (colon != std::string::npos)
    arg = spec.substr(colon + 1);
  auto make = formats().find(name);
  if (!make)
    detail::throw_wire_error(spec, fmt::format("unknown format \"{}\" (known: "
                                               "{})",
                                               name, formats().known()));
  auto result = (*make)(spec, arg);
  if (!result)
    detail::throw_wire_error(spec, "the registered factory built nothing");
  return result;
}

std::vector<std::string> wire_format_names() {
  return formats().names();
}

void register_wire_format(const std::string& name, wire_format_factory make) {
  if (name.find(':') != std::string::npos)
    throw std::invalid_argument(fmt::format(
      "register_wire_format(\"{}\"): a name cannot contain ':'", name));
  if (!make)
    throw std::invalid_argument(
      fmt::format("register_wire_format(\"{}\"): empty factory", name));
  formats().add(name, std::move(make));
}

bool unregister_wire_format(const std::string& name) {
  return formats().remove(name).has_value();
}

// -- helpers for format files ---------------------------------------------------

namespace detail {

void throw_wire_error(const std::string& spec, const std::string& what) {
  throw input_error(fmt::format("wire format \"{}\": {}", spec, what));
}

void require_no_argument(const std::string& spec, const char* name,
                         const std::optional<std::string>& arg) {
  if (arg)
    throw_wire_error(spec, fmt::format("{} takes no argument", name));
}

void check_dense_payload(const wire_format& format, const encoded_tensor& in,
                         size_t n, size_t bytes_per_float) {
  if (in.n != n || in.k != n)
    throw_wire_error(format.name(),
                     fmt::format("the message carries a tensor of {} floats "
                                 "({} entries), expected {}",
                                 in.n, in.k, n));
  if (in.bytes.size() != n * bytes_per_float)
    throw_wire_error(format.name(),
                     fmt::format("the message carries {} bytes for {} "
                                 "floats, expected {}",
                                 in.bytes.size(), n, n * bytes_per_float));
}

} // namespace detail

} // namespace actorps
