#include "core/wire_format.hpp"

#include <mutex>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
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

/// Formats added at run time (register_wire_format), after the built-in ones.
struct added_formats {
  std::mutex mtx;
  std::vector<std::pair<std::string, wire_format_factory>> entries;
};

added_formats& added() {
  static added_formats x;
  return x;
}

} // namespace

std::shared_ptr<const wire_format> make_wire_format(const std::string& spec) {
  auto colon = spec.find(':');
  auto name = spec.substr(0, colon);
  std::optional<std::string> arg;
  if (colon != std::string::npos)
    arg = spec.substr(colon + 1);
  for (auto& entry : detail::registered_wire_formats())
    if (name == entry.name)
      return entry.make(spec, arg);
  wire_format_factory make;
  {
    auto& r = added();
    std::lock_guard<std::mutex> guard{r.mtx};
    for (auto& [key, f] : r.entries)
      if (key == name)
        make = f;
  }
  if (make) {
    auto result = make(spec, arg);
    if (!result)
      detail::throw_wire_error(spec, "the registered factory built nothing");
    return result;
  }
  std::string known;
  for (auto& x : wire_format_names())
    known += (known.empty() ? "" : ", ") + x;
  detail::throw_wire_error(spec, fmt::format("unknown format \"{}\" (known: "
                                             "{})",
                                             name, known));
}

std::vector<std::string> wire_format_names() {
  std::vector<std::string> out;
  for (auto& entry : detail::registered_wire_formats())
    out.emplace_back(entry.name);
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  for (auto& entry : r.entries)
    out.push_back(entry.first);
  return out;
}

void register_wire_format(const std::string& name, wire_format_factory make) {
  if (name.empty())
    throw std::invalid_argument("register_wire_format: empty name");
  if (name.find(':') != std::string::npos)
    throw std::invalid_argument(fmt::format(
      "register_wire_format(\"{}\"): a name cannot contain ':'", name));
  if (!make)
    throw std::invalid_argument(
      fmt::format("register_wire_format(\"{}\"): empty factory", name));
  for (auto& entry : detail::registered_wire_formats())
    if (name == entry.name)
      throw std::invalid_argument(fmt::format(
        "register_wire_format(\"{}\"): a built-in format has that name",
        name));
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  for (auto& entry : r.entries)
    if (entry.first == name)
      throw std::invalid_argument(fmt::format(
        "register_wire_format(\"{}\"): registered before", name));
  r.entries.emplace_back(name, std::move(make));
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
