#pragma once

// Internal header of the wire-format registry: what one format file provides
// and the helpers they share. Nothing outside core/wire_format.cpp and
// core/wire/ includes it; the public interface is core/wire_format.hpp.
//
// Adding a format: write core/wire/NAME.cpp with a factory
//   std::shared_ptr<const wire_format>
//   make_NAME_format(const std::string& spec,
//                    const std::optional<std::string>& arg);
// declare it below, and add one line {"NAME", make_NAME_format} to the table
// in core/wire/registry.cpp.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/wire_format.hpp"

namespace actorps::detail {

// -- registry -----------------------------------------------------------------

/// Builds a format from its spec; throws input_error (see make_wire_format).
using wire_factory = std::shared_ptr<const wire_format> (*)(
  const std::string& spec, const std::optional<std::string>& arg);

/// One line of the registry.
struct wire_entry {
  const char* name;
  wire_factory make;
};

/// The registry's lines (core/wire/registry.cpp).
struct wire_list {
  const wire_entry* first;
  size_t size;

  const wire_entry* begin() const noexcept {
    return first;
  }

  const wire_entry* end() const noexcept {
    return first + size;
  }
};

wire_list registered_wire_formats() noexcept;

// -- factories (one file each) --------------------------------------------------

std::shared_ptr<const wire_format>
make_fp32_format(const std::string& spec,
                 const std::optional<std::string>& arg);
std::shared_ptr<const wire_format>
make_bf16_format(const std::string& spec,
                 const std::optional<std::string>& arg);
std::shared_ptr<const wire_format>
make_fp16_format(const std::string& spec,
                 const std::optional<std::string>& arg);
std::shared_ptr<const wire_format>
make_topk_format(const std::string& spec,
                 const std::optional<std::string>& arg);
std::shared_ptr<const wire_format>
make_int8_format(const std::string& spec,
                 const std::optional<std::string>& arg);

// -- helpers for format files -----------------------------------------------------

/// Throws input_error "wire format \"SPEC\": WHAT".
[[noreturn]] void throw_wire_error(const std::string& spec,
                                   const std::string& what);

/// For formats without settings: throws input_error "wire format \"SPEC\":
/// NAME takes no argument" if the spec has a ':'.
void require_no_argument(const std::string& spec, const char* name,
                         const std::optional<std::string>& arg);

/// Checks a dense payload (n entries of `bytes_per_float` bytes) before
/// decoding it into n floats.
/// @throws input_error naming the format if in.n or in.k differs from n or
///         in.bytes.size() from n * bytes_per_float.
void check_dense_payload(const wire_format& format, const encoded_tensor& in,
                         size_t n, size_t bytes_per_float);

} // namespace actorps::detail
