#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/dataset.hpp"

namespace actorps {

class bad_record_sink;
class data_provider;
struct job_config;

/// Longest line the LIBSVM reader accepts, in bytes (newline excluded).
inline constexpr uint64_t libsvm_max_line = uint64_t{1} << 20;

/// Reads a LIBSVM text file ("label index:value index:value ...", one example
/// a line; https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/), plain or
/// gzip-compressed (zlib reads both), as a binary dataset.
///
/// The result has no dense features and one weighted sparse field,
/// "features", with vocabulary `num_features`: index i of a line becomes key
/// i - 1 when `one_based` (the LIBSVM convention) or key i otherwise, with
/// its value. Labels +1 and 1 become 1, -1 and 0 become 0. Empty lines (and
/// lines of blanks) are skipped; "\r\n" line ends are accepted. A line may
/// have no index:value pair at all (an all-zero example).
///
/// @param num_features  the number of features (keys are in
///                      [0, num_features)); at least 1.
/// @param limit         keep the first `limit` examples (0 = all); the rest of
///                      the file is not read.
/// @throws input_error "PATH: cannot open ..." for a missing or unreadable
///         file, "PATH: [truncated or ]corrupt compressed data ..." for a
///         broken gzip stream,
///         and "PATH:LINE: ..." (LINE 1-based) for: a label whose value is
///         not one of +1, 1, -1, 0 ("1.0" is 1); a token without ':'; an index or value that is not a
///         number; an index below the base (0 when one_based) or above the
///         last feature; indices not strictly ascending within the line; a
///         line longer than libsvm_max_line bytes (not allocated). No dataset
///         is returned on error.
dataset load_libsvm(const std::string& path, uint64_t num_features,
                    bool one_based = true, uint64_t limit = 0);

/// The schema of a LIBSVM file of `num_features` features: no dense
/// features, one weighted field "features" of vocabulary num_features,
/// binary labels.
data_schema libsvm_schema(uint64_t num_features);

/// Reads one LIBSVM file as load_libsvm does (same lines, same checks, same
/// messages, all of it), except that each unusable line goes to `bad`
/// ("PATH:LINE: WHAT"), which throws (on_bad_record::fail) or counts it and
/// goes on with the next line (skip): a part of a stream
/// (core/part_format.hpp).
/// @param schema  libsvm_schema(num_features).
/// @throws input_error as `bad` does, and for what is wrong with the file as
///         a whole whatever `bad` says: "PATH: cannot open ...", a broken
///         gzip stream, a line longer than libsvm_max_line;
///         std::invalid_argument for a schema libsvm_schema() does not make.
dataset read_libsvm_part(const std::string& path, const data_schema& schema,
                         bool one_based, bad_record_sink& bad);

/// Opens the dataset "libsvm" (core/data_registry.hpp): a LIBSVM training
/// and test file, read with load_libsvm. Data fields: train_file, test_file
/// (required; relative to data.data_dir unless absolute), num_features
/// (required, [1, 2^40]), one_based (default true). The schema is known
/// without reading: one weighted field "features".
/// @throws input_error naming a missing or wrong field. Files are not read
///         yet.
std::unique_ptr<data_provider> open_libsvm(const job_config& cfg);

/// Opens the dataset "a9a": the LIBSVM files a9a.gz and a9a.t.gz (123
/// features, one-based) in data.data_dir (default data/a9a). No data fields.
std::unique_ptr<data_provider> open_a9a(const job_config& cfg);

} // namespace actorps
