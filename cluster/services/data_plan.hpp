#pragma once

// The coordinator hands out the examples: a data_plan says how many
// closures an epoch has and which examples each trains on (a stream: epoch
// e is the stream's part e, cut into batches). fit() asks it instead of
// using a fixed number of steps per epoch over the workers' own sources.

#include <cstdint>

#include "core/data_range.hpp"

namespace actorps {

class data_plan {
public:
  virtual ~data_plan() = default;

  /// The closures of epoch `epoch` (0-based); blocks until that is known
  /// (a stream waits for its part). 0: the data has ended (fit stops, with
  /// ended_reason() as the reason).
  /// @throws input_error for data that cannot be read (the job stops).
  virtual uint64_t closures(uint64_t epoch) = 0;

  /// The examples of closure `k` of epoch `epoch` (k < closures(epoch)).
  virtual data_range range(uint64_t epoch, uint64_t k) = 0;

  /// Why closures() returned 0 ("the stream ended: 20 parts").
  virtual std::string ended_reason() const = 0;
};

} // namespace actorps
