#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/wire_format.hpp"

namespace actorps {

struct placement;

/// A run of one server's dense region whose floats a push sends in one wire
/// format: [offset, offset + size) of the region (ps_offset units).
struct wire_run {
  uint64_t offset = 0;
  uint64_t size = 0;
  std::shared_ptr<const wire_format> format; ///< never null ("fp32" too)
};

/// Per server (replica group): the runs of its dense region, in region
/// order, covering it exactly; empty for a server without dense shards.
/// Consecutive shards whose variables share a format form one run.
using wire_plan = std::vector<std::vector<wire_run>>;

/// The push plan of `layout`: each dense variable's shards in the format
/// `per_variable` names for it (by variable name), the others in `fallback`
/// (null: fp32). A format with error feedback (topk) selects its k among a
/// run's floats.
/// @throws input_error "cluster.variable_formats: ..." naming the variable
///         if `per_variable` names one the model lacks or a table, or a
///         format cannot carry a run (topk:K with K above the run's floats).
wire_plan make_push_plan(
  const placement& layout, std::shared_ptr<const wire_format> fallback,
  const std::map<std::string, std::shared_ptr<const wire_format>>&
    per_variable);

/// True if every run of group `p` is plain floats (the push then carries
/// them as floats, not encoded).
bool plain_floats(const wire_plan& plan, uint32_t p);

/// The bytes of the encoded runs of group `p` (floats x 4 for fp32 runs).
uint64_t encoded_bytes(const wire_plan& plan, uint32_t p);

} // namespace actorps
