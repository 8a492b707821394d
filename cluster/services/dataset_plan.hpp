#pragma once

// Dynamic data shards of a fixed dataset (data.sharding dynamic; DLRover's
// to-do/doing queues): each epoch of fit is the training split in that
// epoch's order (core/dataset_ranges.hpp), cut into closures of one batch
// each, positions [k B, (k + 1) B) for closure k (the last one shorter).
// The coordinator's queue holds them (to do), a worker holds the ones it
// runs (doing); a closure of a worker that is lost goes back to the front
// of the queue and trains the same positions on another worker, one that
// leaves finishes its own. So every example is trained once per epoch,
// whichever workers come and go.

#include <cstdint>
#include <string>

#include "cluster/services/data_plan.hpp"

namespace actorps {

class dataset_plan final : public data_plan {
public:
  /// @param rows  examples in the training split (at least 1).
  /// @param batch_size  examples per closure (at least 1).
  /// @param max_closures  closures per epoch at most (0: no bound): an
  ///        epoch of training.steps_per_epoch x workers closures is the
  ///        first max_closures batches of the epoch's order (a full pass
  ///        when it has more).
  /// @throws std::invalid_argument for rows or batch_size 0.
  dataset_plan(uint64_t rows, uint64_t batch_size, uint64_t max_closures = 0);

  /// ceil(rows / batch_size), or max_closures if fewer. Never 0.
  uint64_t closures(uint64_t epoch) override;

  /// Positions [k B, min((k + 1) B, rows)) of epoch `epoch`'s order, not
  /// progressive (the epoch is evaluated on the test split).
  /// @throws std::logic_error for k >= closures(epoch).
  data_range range(uint64_t epoch, uint64_t k) override;

  std::string ended_reason() const override;

  /// Examples closures(epoch) closures train: rows, or fewer with
  /// max_closures.
  uint64_t examples_per_epoch() const;

private:
  uint64_t rows_;
  uint64_t batch_size_;
  uint64_t closures_;
};

} // namespace actorps
