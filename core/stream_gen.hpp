#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "core/synthetic_ctr.hpp"

namespace actorps {

/// What `actorps stream-gen` writes: a stream of click-log parts
/// (core/ctr_csv.hpp) whose ids drift, for a job that reads a stream
/// (core/stream_dir.hpp).
struct stream_gen_config {
  /// The folder the parts go to (created if missing).
  std::string out;
  /// Parts to write, at least 1, and examples per part, at least 1.
  uint64_t parts = 10;
  uint64_t rows_per_part = 1000;
  /// Share of key lookups (one per field and example) that are new ids,
  /// never seen before, in [0, 1].
  double new_id_rate = 0.0;
  /// How far the Zipf head of every field moves per part, in ids: part p's
  /// Zipf-drawn keys are shifted by floor(drift * p), so the hot ids of
  /// part 0 fade as p grows. In [0, 2^40].
  double drift = 0.0;
  /// Pause between two parts (none after the last).
  std::chrono::milliseconds interval{0};
  /// The generator: its seed, dense features, fields (cardinalities: the
  /// Zipf range of each field before the shift) and Zipf exponent. The
  /// defaults are synthetic_ctr's (13 dense features, Criteo's 26 fields).
  synthetic_ctr_config ctr;
};

/// Checks `cfg`. @throws input_error "--FLAG: ..." naming the first wrong
/// field by its command-line flag (--out, --parts, --rows-per-part,
/// --new-id-rate, --drift).
void validate(const stream_gen_config& cfg);

/// The name of part `p`: "part-", p in 8 digits, ".csv"
/// ("part-00000042.csv"), so that name order is part order (validate allows
/// at most 10^8 parts).
std::string stream_part_name(uint64_t p);

/// What stream_gen has written so far.
struct stream_gen_summary {
  uint64_t parts = 0;
  uint64_t rows = 0;
  /// Key lookups (rows x fields), and those that drew a new id.
  uint64_t lookups = 0;
  uint64_t new_id_lookups = 0;
  /// Distinct (field, key) pairs so far, and those seen exactly once.
  uint64_t distinct_ids = 0;
  uint64_t ids_seen_once = 0;

  /// ids_seen_once / distinct_ids (0 when none).
  double share_seen_once() const noexcept {
    return distinct_ids == 0 ? 0.0
                             : static_cast<double>(ids_seen_once)
                                 / static_cast<double>(distinct_ids);
  }
};

/// One line for a person: "N parts, R rows in DIR; D distinct ids so far,
/// S% of them seen once; X% of lookups new ids".
std::string to_string(const stream_gen_summary& s, const std::string& dir);

/// Writes cfg.parts parts into cfg.out, part p holding the examples
/// synthetic_ctr::append_stream(p, 0 .. rows_per_part - 1,
/// key_drift{floor(drift * p), new_id_rate}) in the format of
/// core/ctr_csv.hpp with ctr_csv_schema(dense_features, fields). Each part is
/// written under a hidden temporary name (".NAME.tmp", which readers
/// ignore), renamed to NAME, then its empty marker NAME.done is created:
/// a reader never sees half a part. The same config writes the same bytes.
/// Labels: the hidden logistic model of synthetic_ctr, the same weight for
/// a key in every part, so a model can learn it while ids drift.
///
/// Memory: one part, as examples and as text, and an entry per distinct
/// (field, key) for the summary (25 bytes per slot of a flat hash map,
/// 1 to 2 slots per id, twice that while it grows). Measured: 10 parts of
/// 100,000 rows, 2.26 million distinct ids, 253 MB peak resident, 5.3 s.
/// @param on_part  called after each part with the summary so far.
/// @param stop     polled before each part and during the pause; true
///                 stops early (the parts written stay complete).
/// @throws input_error as validate, or "OUT: cannot write ..." if the
///         folder cannot be made or a part written, or "OUT/NAME: exists
///         already" (a folder holds one stream).
stream_gen_summary
generate_stream(const stream_gen_config& cfg,
                const std::function<void(const stream_gen_summary&)>& on_part
                = {},
                const std::function<bool()>& stop = {});

} // namespace actorps
