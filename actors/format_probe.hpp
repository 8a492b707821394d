#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "caf/fwd.hpp"

#include "actors/ps_actor.hpp"

namespace actorps {

struct placement;
class wire_format;

/// What a worker's measurement of its links chose (cluster.push_format /
/// pull_format "auto").
struct format_choice {
  /// "fp32" or the candidate's name: the format that moved a pull of every
  /// group's dense values faster, its encoding and decoding included.
  std::string format;
  /// Medians of that pull's round trip, in milliseconds: in plain floats,
  /// and in the candidate (encoded by the servers, decoded here).
  double fp32_ms = 0;
  double candidate_ms = 0;
  /// The bytes of one such pull in each.
  uint64_t fp32_bytes = 0;
  uint64_t candidate_bytes = 0;

  /// One line for the log: both times, both sizes, and the choice.
  std::string describe() const;
};

/// Times, from a blocking helper, a pull of the dense values of every group
/// of `servers` (in parallel, as a step pulls) in fp32 and in `candidate`,
/// alternating, `rounds` times each, and chooses the candidate only if its
/// median is at least 10% below fp32's (a push moves the same bytes the
/// other way, with the encoding on the worker and the decoding on the
/// server instead, so the choice stands for both). Agarwal et al. (MLSys
/// 2022) found compression worth it in few real setups: it is measured,
/// not assumed.
///
/// The pulls read as the coordinator does (never held under ssp, nothing
/// created). First waits, up to `wait`, until every group answers with all
/// its dense values (the coordinator creates them after the workers join).
/// @throws std::runtime_error naming the group and what went wrong if a
///         server does not answer in time.
format_choice probe_formats(caf::blocking_actor* self,
                            const std::vector<ps_actor>& servers,
                            const placement& layout,
                            const wire_format& candidate, int rounds,
                            std::chrono::milliseconds wait);

} // namespace actorps
