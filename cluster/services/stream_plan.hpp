#pragma once

// The coordinator's side of a stream: each part the source hands out is an
// epoch of fit (cluster/services/fit.hpp), cut into closures of one batch
// each, rows [k B, (k + 1) B) of the part for closure k (the last one
// shorter), so that every example of the part is trained exactly once
// whichever worker runs which closure (a re-run trains the same rows).

#include <cstdint>
#include <memory>
#include <string>

#include "cluster/services/data_plan.hpp"
#include "core/stream_source.hpp"

namespace actorps {

struct training_progress;

class stream_plan final : public data_plan {
public:
  /// @param batch_size  examples per closure (at least 1).
  stream_plan(std::unique_ptr<stream_source> source, uint64_t batch_size);

  /// Waits for the next part (epoch `epoch` is the stream's next part: fit
  /// asks for epochs in order, and again for the one it has, after a
  /// pause). 0 once the stream ended.
  uint64_t closures(uint64_t epoch) override;

  data_range range(uint64_t epoch, uint64_t k) override;

  std::string ended_reason() const override;

  stream_source& source() {
    return *source_;
  }

private:
  std::unique_ptr<stream_source> source_;
  uint64_t batch_size_;
  bool have_ = false;
  uint64_t epoch_ = 0;
  uint64_t part_ = 0;
  std::string name_;
  uint64_t rows_ = 0;
};

/// The stream part a job restored at `progress` goes on with: the part of
/// its last closures if the checkpoint was taken within a part (fit's
/// step_in_epoch > 0), else the one after it; 0 for a new job. The parts'
/// indices are the workers' data positions (a closure's is its part's).
uint64_t stream_resume_part(const training_progress& progress);

} // namespace actorps
