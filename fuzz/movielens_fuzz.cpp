// Fuzz target: the MovieLens ratings CSV (RFC 4180 quoting, a header naming
// the columns) that the movielens dataset reads.
//
// Properties: read_movielens_csv returns two well-formed datasets with one
// schema (keys inside every field's vocabulary, labels 0 or 1) or throws
// input_error.

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "core/movielens.hpp"
#include "fuzz/dataset_checks.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto path = fuzz::scratch_path("movielens.csv");
  fuzz::write_file(path, fuzz::as_string(data, size));
  try {
    auto ml = read_movielens_csv(path);
    fuzz::check_dataset(ml.train, "read_movielens_csv (train)");
    fuzz::check_dataset(ml.test, "read_movielens_csv (test)");
    fuzz::check(ml.test.rows() > 0, "a MovieLens file gave no test rows");
  } catch (const input_error&) {
    // A clear refusal.
  }
  return 0;
}
