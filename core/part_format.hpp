#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/dataset.hpp"

namespace actorps {

class bad_record_sink;
struct stream_config;

/// How one part of a stream (a whole file) becomes a dataset: an entry of
/// the part-format registry, keyed by stream_config::format. Each entry
/// wraps a reader of its own file format, the one its batch dataset uses
/// too (ctr_csv: core/ctr_csv.hpp; libsvm: core/libsvm.hpp), so a part is
/// read by the same code, with the same checks and messages, as a file of
/// that dataset.
struct part_format {
  /// The schema of every part, from the config's format fields
  /// (stream_config::dense_features, fields, num_features, ...).
  /// @throws input_error "data.stream_FIELD: ..." for a field the format needs
  ///         and the config lacks or gets wrong.
  std::function<data_schema(const stream_config& cfg)> schema;

  /// Reads the part at `path` with `schema` (as schema() made it), handing
  /// each unusable record to `bad`, which throws or drops it.
  /// @throws input_error "PATH: ..." for a file that cannot be read or is
  ///         unusable as a whole, and as `bad` does.
  std::function<dataset(const std::string& path, const stream_config& cfg,
                        const data_schema& schema, bad_record_sink& bad)>
    read;
};

/// The part format `name`: "ctr_csv" (core/ctr_csv.hpp), "libsvm"
/// (core/libsvm.hpp, plain or gzip), or one added by register_part_format.
/// @throws input_error "data.stream_format: unknown format \"x\" (known: ...)".
part_format find_part_format(const std::string& name);

/// The names of the part formats, sorted.
std::vector<std::string> part_format_names();

/// Adds the part format `name`, for a program built on the library. Thread-
/// safe. @throws std::invalid_argument for an empty or taken name or an
/// entry with an empty function; nothing changes then.
void register_part_format(const std::string& name, part_format format);

/// Removes a format register_part_format added. @returns whether it did.
bool unregister_part_format(const std::string& name);

} // namespace actorps
