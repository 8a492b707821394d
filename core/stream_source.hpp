#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/bad_record.hpp"
#include "core/dataset.hpp"
#include "core/stream_config.hpp"

namespace actorps {

/// One complete part of a stream: a whole file of a part format, parsed.
struct stream_part {
  /// Its place in the stream: 0, 1, 2, ... in the order parts are read,
  /// counted over restarts (seek); the data_position epoch of its batches
  /// (core/stream_batches.hpp). A part that could not be used (vanished,
  /// empty, unreadable) uses up its index too, so indices can have gaps.
  uint64_t index = 0;
  /// Its name in the source (the file name, for "dir").
  std::string name;
  /// Its examples, at least one row, with the stream's schema.
  std::shared_ptr<const dataset> data;
};

/// Why a stream ended.
enum class stream_end : uint8_t {
  /// It has not.
  none,
  /// The owner asked it to stop (stream_env::stop_requested).
  stopped,
  /// All parts of stream_config::end_after were read.
  end_after,
  /// No new part came for stream_config::idle_timeout.
  idle,
};

/// "running", "stopped", "end_after", "idle".
const char* to_string(stream_end why) noexcept;

/// What a source counted since it was made. Every count is also a line in
/// the log when it happens (the first few bad records of a part; every other
/// event once).
struct stream_stats {
  /// Parts handed out by next_part, and their rows.
  uint64_t parts = 0;
  uint64_t rows = 0;
  /// Records dropped as unusable (on_bad_record::skip).
  uint64_t bad_records = 0;
  /// Parts unusable as a whole (unreadable, broken compression, a wrong
  /// header), skipped under on_bad_record::skip.
  uint64_t bad_parts = 0;
  /// Parts with no record at all, or none usable: skipped.
  uint64_t empty_parts = 0;
  /// Parts that were complete when listed but gone when read: skipped.
  uint64_t vanished_parts = 0;
  /// Parts that completed after a part sorting after them was read: skipped
  /// (never reordered; see core/stream_dir.hpp).
  uint64_t late_parts = 0;
  /// Completion markers whose part was not there when seen.
  uint64_t markers_without_part = 0;
};

/// What a source's owner gives it besides its config.
struct stream_env {
  /// Polled while the source waits (every poll interval) and before it
  /// reads a part; true ends the stream (stream_end::stopped). Empty: never.
  std::function<bool()> stop_requested;
  /// Where diagnostics go (bad records, vanished parts, ...); empty: the
  /// process log (core/log.hpp, warning, role "stream").
  diagnostic_fn log;
};

/// A data source that does not end: it hands out parts in order, waiting
/// for the next one as long as its caller lets it, until the stream ends
/// (a stop request, end_after parts, an idle timeout).
///
/// Position: the index of the next part. seek() resumes a stream after a
/// restart: the parts before that index are skipped and never read again.
///
/// Not thread-safe: one reader per source; each worker of a job makes its
/// own (core/stream_batches.hpp). next_part runs in the caller's thread
/// (no background thread: a part is read and parsed inside the call).
class stream_source {
public:
  virtual ~stream_source();

  /// The next complete part, waiting at most `wait` for one to appear
  /// (0: only look). std::nullopt if none came in time or the stream ended:
  /// ended() tells which. Once ended, it returns std::nullopt at once, for
  /// good.
  /// @throws input_error naming the file (and line) for a bad record or an
  ///         unusable part under on_bad_record::fail; the part's index is
  ///         used up then (the next call reads the part after it).
  virtual std::optional<stream_part> next_part(std::chrono::milliseconds wait)
    = 0;

  /// Resumes at part `next_index`: the next part handed out gets that
  /// index, and the parts before it are skipped, never read. With
  /// `next_name` (the name of the part at next_index, as stream_part::name
  /// gave it before the restart) the source resumes at that name, which
  /// stays exact when parts before it were deleted since; without, at the
  /// next_index-th part in the source's order (see the source for when that
  /// is exact). Call it before the first next_part.
  /// @throws input_error if the source cannot find the place (e.g. fewer
  ///         than next_index parts, without a name).
  void seek(uint64_t next_index, const std::string& next_name = {}) {
    do_seek(next_index, next_name);
  }

  /// Why the stream ended, or stream_end::none.
  virtual stream_end ended() const = 0;

  virtual const stream_stats& stats() const = 0;

  /// The schema of every part.
  virtual const data_schema& schema() const = 0;

  /// Where the parts come from, for messages ("parts of ctr_csv in DIR").
  virtual std::string describe() const = 0;

protected:
  virtual void do_seek(uint64_t next_index, const std::string& next_name)
    = 0;
};

/// Makes a source from its config and its owner's environment.
using stream_opener = std::function<std::unique_ptr<stream_source>(
  const stream_config& cfg, stream_env env)>;

/// Opens the stream `cfg` describes: validate(cfg), then the opener
/// cfg.source names: "dir" (core/stream_dir.hpp), or one added with
/// register_stream_source (Kafka: one file and one line in the registry
/// table of core/stream_source.cpp).
/// @throws input_error as validate, or as the source's opener.
std::unique_ptr<stream_source> open_stream(const stream_config& cfg,
                                           stream_env env = {});

/// Whether `name` is a stream source. Thread-safe.
bool has_stream_source(const std::string& name);

/// The names of the stream sources, sorted.
std::vector<std::string> stream_source_names();

/// Adds the stream source `name`. Thread-safe.
/// @throws std::invalid_argument for an empty or taken name or an empty
///         opener; nothing changes then.
void register_stream_source(const std::string& name, stream_opener open);

/// Removes a source register_stream_source added. @returns whether it did.
bool unregister_stream_source(const std::string& name);

} // namespace actorps
