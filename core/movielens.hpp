#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/dataset.hpp"

namespace actorps {

class data_provider;
struct job_config;

/// The training and test splits of the MovieLens ratings.
struct movielens_data {
  dataset train;
  dataset test;
};

/// Reads the MovieLens ratings that scripts/export_movielens.sh exports from
/// Debian's r-cran-dslabs (`dslabs::movielens`: 100,004 ratings of 9,066
/// movies by 671 users, a sample of the MovieLens "latest-small" data of
/// GroupLens, https://grouplens.org/datasets/movielens/) from
/// `dir`/movielens.csv, as a binary "liked" dataset.
///
/// The file is CSV (RFC 4180 quoting; titles contain commas and quotes) with
/// a header naming at least the columns movieId, title, year, genres,
/// userId, rating, timestamp (in any order; title is not used). Every row
/// becomes one example with no dense features and four sparse fields, in
/// this order:
/// - user: one key, userId; vocabulary = the largest userId + 1.
/// - movie: one key, movieId; vocabulary = the largest movieId + 1.
/// - genres: multi-hot, one key per name of the '|'-separated list
///   ("Action|Comedy"), keys ascending; names are numbered in sorted (byte)
///   order of all distinct names; "(no genres listed)" is a name like the
///   others; vocabulary = the number of distinct names.
/// - year: one key, the release year, 0 when NA; vocabulary = the largest
///   year + 1.
/// The label is 1 (liked) when rating >= 4, else 0.
///
/// Split, per user: the user's n ratings are ordered by timestamp, ties by
/// movieId (then by file order); the last n_test = max(1, round(0.2 n)) of
/// them are test rows, the others training rows. 0.2 n is never halfway
/// between two integers, so round() is unambiguous: n_test =
/// max(1, floor((n + 2) / 5)) (n = 1..4 -> 1, 5 -> 1, 8 -> 2, 20 -> 4).
/// Both splits keep the file's row order. Vocabularies are computed over
/// the whole file, so both splits (and every node) share one schema.
///
/// @throws input_error "DIR/movielens.csv not found: export it once with
///         scripts/export_movielens.sh (needs Debian's r-cran-dslabs:
///         scripts/setup.sh installs it)" if the file is missing; otherwise
///         as read_movielens_csv.
movielens_data load_movielens(const std::string& dir);

/// Reads a ratings CSV file as load_movielens() describes.
/// @throws input_error "PATH: cannot open ..." or, with "PATH:LINE: ..."
///         (LINE: the physical line where the row starts), for a header
///         without a needed column, a row with another number of columns
///         than the header, malformed quoting, a userId, movieId or year
///         (other than NA) that is not a whole number, a rating that is not
///         a finite number, or a timestamp that is not an integer; "PATH: no
///         ratings" for a file with a header only.
movielens_data read_movielens_csv(const std::string& path);

/// Opens the dataset "movielens" (core/data_registry.hpp): load_movielens on
/// data.data_dir (default data/movielens), read once for both splits, each
/// cut to its limit (data.train_limit, data.test_limit). No data fields.
/// @throws input_error for a data field. The file is not read yet.
std::unique_ptr<data_provider> open_movielens(const job_config& cfg);

} // namespace actorps
