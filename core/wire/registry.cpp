// The wire-format registry: one line per format. A new format is one file in
// core/wire/ plus one line here (and its factory's declaration in
// formats.hpp).

#include "core/wire/formats.hpp"

namespace actorps::detail {

namespace {

const wire_entry built_in_formats[] = {
  {"fp32", make_fp32_format},
  {"bf16", make_bf16_format},
  {"fp16", make_fp16_format},
  {"topk", make_topk_format},
  {"int8", make_int8_format},
};

} // namespace

wire_list registered_wire_formats() noexcept {
  return {built_in_formats,
          sizeof(built_in_formats) / sizeof(built_in_formats[0])};
}

} // namespace actorps::detail
