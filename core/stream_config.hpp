#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/bad_record.hpp"
#include "core/dataset.hpp"

namespace actorps {

struct job_config;

/// Where a job's endless input comes from and how it is read: the options
/// of a stream source (core/stream_source.hpp). A plain struct; validate()
/// checks it. Messages name the fields by the job config's keys
/// ("data.stream_FIELD"), which stream_config_of() reads.
struct stream_config {
  // -- where --------------------------------------------------------------------

  /// The source kind: a name of the stream-source registry ("dir",
  /// core/stream_dir.hpp).
  std::string source = "dir";
  /// dir: the folder the producer writes its parts into. Must exist when
  /// the source opens.
  std::string dir;

  // -- what a part holds ------------------------------------------------------

  /// The format of every part: a name of the part-format registry
  /// (core/part_format.hpp): "ctr_csv" or "libsvm".
  std::string format = "ctr_csv";
  /// ctr_csv: dense features per example (columns I1..Id), at most 1024.
  uint64_t dense_features = 13;
  /// ctr_csv: sparse fields per example (columns C1..Cn), 1 to 1024.
  uint64_t fields = 26;
  /// libsvm: the number of features (required, 1 to 2^40).
  uint64_t num_features = 0;
  /// libsvm: whether indices start at 1 (the LIBSVM convention).
  bool one_based = true;

  // -- when ---------------------------------------------------------------------

  /// How often the source looks for a new part while it waits, 1 ms to
  /// 60 s. Also how soon it notices a stop request.
  std::chrono::milliseconds poll_interval{100};
  /// The stream ends after the parts of index 0 .. end_after - 1 (counted
  /// over restarts: the index of a part is its place in the stream);
  /// 0: never.
  uint64_t end_after = 0;
  /// The stream ends when no new part appeared for this long while the
  /// reader waited for one; 0: never. At least poll_interval otherwise.
  std::chrono::milliseconds idle_timeout{0};

  // -- bad input ----------------------------------------------------------------

  /// What a bad record does: skip (dropped, counted, logged) or fail
  /// (input_error naming file and line; the CLI exits 2).
  on_bad_record bad_records = on_bad_record::skip;
};

/// Checks `cfg`: a known source and format, a dir for "dir", the bounds
/// above, and the format's own fields (part_format::schema).
/// @throws input_error "data.stream_FIELD: ..." naming the first wrong field.
void validate(const stream_config& cfg);

/// The stream a job config describes (data.stream_dir and the other
/// data.stream_* fields, data.on_bad_record); source "dir".
stream_config stream_config_of(const job_config& cfg);

/// The schema of every part of the stream `cfg` describes (no file is read).
/// @throws input_error as validate.
data_schema stream_schema(const stream_config& cfg);

} // namespace actorps
