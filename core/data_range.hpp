#pragma once

// Examples handed out by the coordinator: a closure that carries a
// data_range trains on exactly those examples, whichever worker runs it
// (a closure re-run after its worker was lost trains on the same ones), so
// that every example of a stream is trained once or counted lost. DLRover's
// dynamic data sharding works the same way (Wang et al., "DLRover", 2023:
// the master hands out shards of examples instead of fixed slices by
// worker index).

#include <cstdint>
#include <string>

namespace actorps {

struct example_batch;

/// Rows [begin, end) of one part of a stream (core/stream_source.hpp): the
/// part's index in the stream and its file name in the stream's folder; or
/// of a fixed dataset's epoch (dynamic data shards, core/dataset_ranges.hpp):
/// `part` is the epoch (0-based), `name` empty, and the rows are positions
/// in that epoch's order of the training split.
/// Empty (end <= begin): the worker's own source.
struct data_range {
  uint64_t part = 0;
  std::string name;
  uint64_t begin = 0;
  uint64_t end = 0;
  /// Progressive evaluation (a stream's "test, then train"): the worker
  /// scores each example with the values pulled before its update and
  /// returns the scores with the step's result.
  bool progressive = true;

  bool empty() const noexcept {
    return end <= begin;
  }

  uint64_t rows() const noexcept {
    return empty() ? 0 : end - begin;
  }
};

/// Reads the examples of a data_range on a worker. Not thread-safe: one
/// per worker.
class range_reader {
public:
  virtual ~range_reader() = default;

  /// Fills `out` (reset first) with the rows of `r`, in order.
  /// @throws input_error if the part cannot be read or holds fewer than
  ///         r.end rows.
  virtual void read(const data_range& r, example_batch& out) = 0;
};

} // namespace actorps
