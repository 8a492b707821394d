#pragma once

// `actorps simulate --timing-only`: the timing of a job without
// its arithmetic, for scale studies (10,000 workers). The workers run a
// stand-in for the model: one dense float per parameter server instead of
// the model's dense variables (its tables stay as they are), a zero
// gradient, loss 0, and batches without their dense features; so a worker
// holds bytes, not megabytes. The simulated network still charges every
// pull and push the bytes the real model's dense values would take on that
// server (in the job's pull and push formats), and the compute model the
// real model's step time. No test metrics are computed.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/job_config.hpp"
#include "core/placement.hpp"

namespace actorps {

class model;
class batch_source;

struct timing_job {
  /// The job for the stand-in: its partitioner gives each server one
  /// shard of the stand-in's dense variable.
  job_config cfg;
  std::shared_ptr<const model> net;
  std::shared_ptr<const placement> layout;
  /// Per server: the bytes the real model's dense values take in a pull
  /// reply and in a push.
  std::vector<uint64_t> pull_bytes;
  std::vector<uint64_t> push_bytes;
};

/// Bytes of `floats` dense values in wire format `format` ("fp32" or
/// empty: plain floats).
/// @throws input_error for a format that cannot encode that many.
uint64_t dense_wire_bytes(const std::string& format, uint64_t floats);

/// The stand-in for `real` (placed as `real_layout`) in job `cfg`.
/// @throws input_error if the push or pull format cannot encode a server's
///         dense values (as for the real job).
timing_job make_timing_job(const job_config& cfg,
                           std::shared_ptr<const model> real,
                           const placement& real_layout);

/// `real` without the dense features of its batches (rows, labels and the
/// sparse fields stay: the stand-in's tables need their keys). All sources
/// made by this function share one scratch batch: single-threaded use only
/// (a simulation).
std::shared_ptr<batch_source> timing_source(std::shared_ptr<batch_source> real);

} // namespace actorps
