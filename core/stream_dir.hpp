#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/part_format.hpp"
#include "core/stream_source.hpp"

namespace actorps {

/// A stream of part files in a folder, the way Hadoop and Spark jobs hand
/// files to each other: a producer writes part NAME (under a temporary
/// name, then renamed), then creates the empty marker NAME.done (Hadoop's
/// _SUCCESS, per part). `actorps stream-gen` writes such a folder.
///
/// The rules, in the order they apply:
/// - Names. A part is a regular file whose name neither starts with '.' or
///   '_' (temporary and bookkeeping files) nor ends in ".done". It is
///   complete once NAME.done exists too; only complete parts are read.
/// - Order. Parts are read in name order (bytewise; zero-padded numbers
///   sort as numbers): each call takes the smallest complete name after the
///   last one read, whether or not a smaller incomplete part is still being
///   written (a stray file without marker would otherwise stop the stream
///   for good). The source remembers the names it has passed (those still in
///   the folder), so:
/// - Late parts. A part that completes after a part sorting after it was
///   read is never read: it is logged ("late part ..."), counted once
///   (stream_stats::late_parts) and skipped, not silently read out of
///   order. A producer avoids this by publishing in name order.
/// - A marker without its part (NAME.done, no NAME) is logged and counted
///   once and otherwise ignored: it is not a part, and later parts are read;
///   should NAME appear later, it is read if it still sorts after the last
///   part read, else it is late.
/// - A part that is gone when it is read (deleted after it was listed) is
///   logged, counted (vanished_parts) and skipped.
/// - An empty part (no record, or a CSV header alone), or one whose every
///   record is bad, is logged, counted (empty_parts) and skipped.
/// - Bad records and unusable parts follow stream_config::bad_records:
///   skip drops them (logged, the first 10 per part, and counted), fail
///   throws input_error naming the file and line.
/// Each part the source passes, whether read or skipped (vanished, empty,
/// bad), uses up one index; late parts use none.
///
/// Waiting: polling. While a caller waits, the source lists the folder
/// every poll_interval (100 ms by default; a few ms in tests), and lists it
/// once per part handed out. Polling and not inotify because it works the
/// same on every file system a producer may write to from another machine
/// (NFS, SMB, FUSE mounts, where inotify sees no remote writes), needs no
/// thread or file descriptor, and a poll costs one directory listing, far
/// less than reading a part. The cost of a listing grows with the files in
/// the folder: a producer should remove consumed parts after a while.
///
/// The end: a stop request (stream_env::stop_requested, checked at each
/// poll), end_after parts (by index: a stream resumed at index k reads
/// parts k .. end_after - 1), or idle_timeout without a new complete part
/// while the reader waited (measured from the last time a new part was
/// found, or from the open or seek).
///
/// Resuming (seek): with the name of the next part, the parts sorting
/// before it are skipped: exact even if older parts were deleted. With an
/// index alone, the first next_index complete parts in name order are
/// skipped: exact only if the folder still holds every part before that
/// index and no part was late (late or deleted parts shift the count).
///
/// Memory: one part, parsed, at a time (plus what the caller keeps), and the
/// names of the parts passed that are still in the folder.
/// Not thread-safe (one reader); see stream_source.
class stream_dir final : public stream_source {
public:
  /// The suffix of a part's completion marker.
  static constexpr std::string_view done_suffix = ".done";

  /// Opens cfg.dir, reading nothing yet.
  /// @throws input_error as validate(cfg), or "data.stream_dir: DIR is not a
  ///         folder" if it does not exist (a typo must not wait for ever).
  stream_dir(stream_config cfg, stream_env env);

  std::optional<stream_part>
  next_part(std::chrono::milliseconds wait) override;

  stream_end ended() const override {
    return ended_;
  }

  const stream_stats& stats() const override {
    return stats_;
  }

  const data_schema& schema() const override {
    return schema_;
  }

  std::string describe() const override;

protected:
  /// @throws input_error "data.stream_dir: cannot resume at part N: DIR holds
  ///         only M complete parts" for an index alone past the parts.
  void do_seek(uint64_t next_index, const std::string& next_name) override;

private:
  using clock = std::chrono::steady_clock;

  /// Lists the folder: reports late parts and lone markers (once each),
  /// forgets passed names that are gone, and returns the next complete part
  /// after the cursor, if any. With `all`, fills it with every complete
  /// name, sorted.
  std::optional<std::string> scan(std::set<std::string>* all = nullptr);

  /// Whether `name` is after the cursor.
  bool ahead(const std::string& name) const;

  /// Reads the part `name` as part `index`; std::nullopt if it was
  /// skipped (vanished, empty, unusable under skip).
  std::optional<stream_part> read(const std::string& name, uint64_t index);

  /// A diagnostic: to env_.log, else to the process log (a warning, or
  /// information).
  void log(const std::string& line, bool warning = true) const;

  void end(stream_end why);

  stream_config cfg_;
  stream_env env_;
  part_format format_;
  data_schema schema_;
  stream_stats stats_;
  stream_end ended_ = stream_end::none;
  uint64_t next_index_ = 0;
  // The cursor: names after it are ahead (>= cursor_ when inclusive).
  std::string cursor_;
  bool cursor_inclusive_ = true;
  // Complete names not ahead that were read, skipped or reported late.
  std::set<std::string> passed_;
  // Markers without their part, reported.
  std::set<std::string> lone_markers_;
  bool listing_failed_ = false;
  clock::time_point last_new_;
};

/// The opener of the source "dir" (core/stream_source.hpp).
std::unique_ptr<stream_source> open_stream_dir(const stream_config& cfg,
                                               stream_env env);

} // namespace actorps
