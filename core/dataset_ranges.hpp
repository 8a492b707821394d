#pragma once

// Dynamic data shards of a fixed dataset (DLRover's to-do/doing queues,
// Wang et al., "DLRover", 2023): each epoch the coordinator cuts the
// training split, in that epoch's order, into ranges of one batch and hands
// them out as closures (cluster/services/dataset_plan.hpp); any worker can
// train any range, because every worker reads the whole split through a
// dataset_ranges. A range is positions [begin, end) of epoch `part`'s order,
// so a closure re-run after its worker was lost trains the same examples.

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/data_range.hpp"
#include "core/dataset.hpp"

namespace actorps {

/// The order of a training split of `rows` rows in epoch `epoch`: a
/// permutation of 0 .. rows - 1, shuffled (std::shuffle with mt19937_64)
/// from (seed, epoch) only, so every process computes the same one.
/// @throws std::invalid_argument if rows exceeds 2^32 - 1.
std::vector<uint32_t> epoch_order(uint64_t rows, uint64_t seed,
                                  uint64_t epoch);

/// Reads data ranges of a whole training split held in memory: range r is
/// the rows epoch_order(rows, seed, r.part)[r.begin .. r.end). Keeps the
/// order of the last two epochs asked for (4 bytes per row each: 0.5 MB for
/// Fashion-MNIST's 60,000 rows), built once per epoch per process.
/// Thread-safe: the workers of one process share one.
class dataset_ranges final : public range_reader {
public:
  /// @throws input_error if `data` is null or holds no rows.
  dataset_ranges(std::shared_ptr<const dataset> data, uint64_t seed);

  /// @throws input_error if r.end is past the split's rows.
  void read(const data_range& r, example_batch& out) override;

  uint64_t rows() const noexcept {
    return data_->rows();
  }

private:
  std::shared_ptr<const std::vector<uint32_t>> order(uint64_t epoch);

  std::shared_ptr<const dataset> data_;
  uint64_t seed_;
  std::mutex mtx_; // guards orders_
  std::vector<std::pair<uint64_t, std::shared_ptr<const std::vector<uint32_t>>>>
    orders_;
};

} // namespace actorps
