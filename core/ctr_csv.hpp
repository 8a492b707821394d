#pragma once

#include <cstdint>
#include <string>

#include "core/dataset.hpp"

namespace actorps {

class bad_record_sink;

/// The CSV format of a click log: one file (a part of a stream,
/// core/part_format.hpp) holds a header line and one example per line:
///
///     label,I1,...,Id,C1,...,Cn
///     0,1.5,0.25,...,7,123|456,...
///
/// - label: 0 or 1 (a click).
/// - I1..Id: the dense features, finite decimal numbers (written as the
///   shortest text that reads back as the same float).
/// - C1..Cn: the keys of the sparse fields, whole numbers in [0, 2^64), or
///   several separated by '|' (multi-hot), or nothing (no key).
/// The header names the columns exactly so and in this order: "label", then
/// "I" + 1..d, then the schema's field names. It is the format that
/// `actorps stream-gen` writes (synthetic_ctr's examples, Criteo's layout).

/// The schema of click-log parts of `dense_features` dense features and
/// `fields` fields "C1".."Cn" with unbounded keys (vocabulary 0: a stream
/// brings new ids), one key or several per example, unweighted; binary labels.
data_schema ctr_csv_schema(uint64_t dense_features, uint64_t fields);

/// The header line of `schema`, without its line end.
std::string ctr_csv_header(const data_schema& schema);

/// Appends every row of `ex` (dense as floats, unweighted fields, binary
/// labels) to `out` as one line each, "\n"-terminated.
void append_ctr_csv_rows(const example_batch& ex, std::string& out);

/// Reads one click-log CSV file with `schema` (made by ctr_csv_schema, or
/// with fixed vocabularies, whose keys are then checked to be below them).
/// Each unusable record goes to `bad` as "PATH:LINE: WHAT", which throws or
/// drops it (core/bad_record.hpp): a row whose column count is not the
/// header's, a label other than 0 and 1, a dense value that is not a finite
/// number, a key that is not a whole number (or not below its field's
/// vocabulary), malformed quoting (the CSV is read by core/csv_reader.hpp).
/// An empty file, or a header alone, is a dataset of 0 rows.
///
/// Memory: the file's text while it is read, plus the dataset.
/// @throws input_error "PATH: cannot open ..." for a file that cannot be
///         read, "PATH:1: the header ..." for a header that is not the
///         schema's (whatever `bad` says: without the header no row can be
///         read), and as `bad` does; std::invalid_argument for a weighted
///         field in the schema.
dataset read_ctr_csv(const std::string& path, const data_schema& schema,
                     bad_record_sink& bad);

} // namespace actorps
