#pragma once

// The worker's side of a stream the coordinator hands out (a closure per
// batch, core/data_range.hpp): a range_reader that reads a part's file by
// its name, with the stream's part format, and keeps the last parts read,
// and the batch source a worker of a stream job holds instead of its own
// data (it only says the batch size: every closure carries its examples).

#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "core/data_range.hpp"
#include "core/dataset.hpp"
#include "core/stream_config.hpp"

namespace actorps {

/// Reads data ranges of the stream `cfg` describes: the part DIR/NAME
/// parsed with cfg.format (the same reader the coordinator's source uses,
/// so row numbers agree), records skipped or refused by cfg.bad_records as
/// there. Keeps the last `keep` parts parsed (a part's batches come in
/// order, and a re-run may go back one part). Thread-safe: the workers of
/// one process share one reader, so a part is parsed once per process.
class part_reader final : public range_reader {
public:
  /// @throws input_error as validate(cfg).
  explicit part_reader(stream_config cfg, size_t keep = 2);

  /// @throws input_error naming the part if it cannot be read (vanished:
  ///         the coordinator read it, so its files must stay until it is
  ///         trained) or holds fewer than r.end rows.
  void read(const data_range& r, example_batch& out) override;

  /// Parts parsed so far (each once while kept).
  uint64_t parts_read() const;

private:
  std::shared_ptr<const dataset> part(const std::string& name);

  stream_config cfg_;
  data_schema schema_;
  size_t keep_;
  mutable std::mutex mtx_; // guards cache_ and parts_read_
  std::deque<std::pair<std::string, std::shared_ptr<const dataset>>> cache_;
  uint64_t parts_read_ = 0;
};

/// The batch source of a worker whose closures all carry data ranges: it
/// holds no data. batch_size() sizes the worker's buffers; next() throws
/// (a closure without a range on a stream job is a bug).
class ranges_only_source final : public batch_source {
public:
  ranges_only_source(data_schema schema, uint64_t batch_size)
    : schema_(std::move(schema)), batch_size_(batch_size) {
  }

  void next(example_batch& out) override;
  void seek(data_position pos) override;
  data_position position() const override {
    return pos_;
  }
  uint64_t batch_size() const override {
    return batch_size_;
  }
  /// No bound: a position is a part and a row in it (a checkpoint's
  /// positions are the parts' and restore to any).
  uint64_t shard_rows() const override {
    return std::numeric_limits<uint64_t>::max();
  }
  const data_schema& schema() const override {
    return schema_;
  }

private:
  data_schema schema_;
  uint64_t batch_size_;
  data_position pos_;
};

struct job_config;
class data_provider;

/// The data provider of a job that trains on a stream (cfg.stream_dir set;
/// open_dataset returns it): the stream's schema, no training rows of its
/// own (its workers get ranges_only_source: the coordinator hands out the
/// examples), an empty test set (a stream is evaluated progressively).
/// @throws input_error as validate(stream_config_of(cfg)).
std::unique_ptr<data_provider> open_stream_provider(const job_config& cfg);

} // namespace actorps
