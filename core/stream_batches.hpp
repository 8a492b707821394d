#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dataset.hpp"
#include "core/stream_source.hpp"

namespace actorps {

/// A worker's minibatches from a stream: the rows j of each part with
/// j % W == w (worker w of W = ctx.num_input_pipelines, as shard_indices
/// splits a split), so that the W workers, each with a source of its own
/// on the same stream, train every example of a part exactly once between
/// them. Within a part the rows are taken in order, or shuffled with a
/// seed (a permutation of the worker's rows of that part drawn from
/// (seed, worker, part index): the same after a restart), batch_size at a
/// time. A batch never spans two parts: the last batch of a part is short
/// when the worker's rows of it are not a multiple of batch_size (every
/// example once, none repeated to fill a batch); a worker with no row in a
/// part (a part of fewer than W rows) goes straight on to the next part.
///
/// Position: data_position{epoch = index of the current part, offset = rows
/// of this worker's share of that part taken so far}, plus the part's name
/// (part_name()). seek() resumes exactly there after a restart: the rest of
/// that part, then the parts after it; nothing twice, nothing skipped.
///
/// Not a batch_source: on an endless stream next() would block without
/// bound. try_next waits at most as long as it is told and says whether it
/// filled a batch; ended() tells a stream that ended from one that is slow.
/// Not thread-safe: one per worker.
class stream_batches {
public:
  /// @param source      this worker's own source (not shared with another
  ///                    reader), not read yet.
  /// @param ctx         worker w of W.
  /// @param batch_size  rows per batch, at least 1.
  /// @param shuffle_seed  std::nullopt: rows in part order.
  /// @throws input_error "data.batch_size: ..." for batch_size 0;
  ///         std::invalid_argument for a null source or an input_pipeline_id
  ///         >= num_input_pipelines.
  stream_batches(std::shared_ptr<stream_source> source, input_context ctx,
                 uint64_t batch_size,
                 std::optional<uint64_t> shuffle_seed = std::nullopt);

  /// Fills `out` (reset first, its memory kept) with the next batch: 1 to
  /// batch_size rows, all of one part. Waits at most `wait` for a new part
  /// when the current one is used up (never when it is not).
  /// @returns true with a batch; false if no part came in time (out empty)
  ///          or the stream ended (ended()).
  /// @throws input_error as stream_source::next_part (a bad record under
  ///         on_bad_record::fail), or for a part whose schema is not the
  ///         stream's; or, after seek(pos), if the part at pos.epoch has
  ///         fewer than pos.offset rows for this worker.
  bool try_next(example_batch& out, std::chrono::milliseconds wait);

  /// Whether the stream ended and every row of this worker was handed out.
  bool ended() const noexcept {
    return ended_;
  }

  /// Where the worker is; after seek() and before the part arrives, the
  /// position sought.
  data_position position() const noexcept {
    return pos_;
  }

  /// The name of the part at position().epoch ("" before the first part, or
  /// as seek() was given it).
  const std::string& part_name() const noexcept {
    return part_name_;
  }

  /// Resumes at `pos` (with the part's name, if known: see
  /// stream_source::seek). The part at pos.epoch is read again and its
  /// first pos.offset rows of this worker's share skipped. If that part is
  /// gone (vanished or deleted), the stream resumes with the next part, from
  /// its start. Call it before the first try_next.
  /// @throws input_error as stream_source::seek.
  void seek(data_position pos, const std::string& part_name = {});

  uint64_t batch_size() const noexcept {
    return batch_size_;
  }

  const data_schema& schema() const {
    return source_->schema();
  }

  const stream_source& source() const noexcept {
    return *source_;
  }

private:
  /// Makes `part` the current one: this worker's rows of it, in order or
  /// shuffled.
  void take(stream_part part);

  std::shared_ptr<stream_source> source_;
  input_context ctx_;
  uint64_t batch_size_;
  std::optional<uint64_t> seed_;
  std::shared_ptr<const dataset> part_; // null until the first part
  std::vector<uint64_t> rows_;          // this worker's rows of part_
  data_position pos_;
  std::string part_name_;
  // After seek(): the offset to skip once the part at pos_.epoch arrives.
  std::optional<uint64_t> pending_offset_;
  bool ended_ = false;
};

} // namespace actorps
