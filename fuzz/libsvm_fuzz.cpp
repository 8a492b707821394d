// Fuzz target: a LIBSVM text file (a9a, the "libsvm" dataset), plain or
// gzip-compressed.
//
// Input: one byte of options (bit 0: one-based indices; bits 1-7: the limit
// of examples, 0 = all), two bytes of num_features (little-endian, 0 read as
// 1), then the file.
//
// Properties: load_libsvm returns a well-formed dataset (keys below
// num_features, labels 0 or 1, at most `limit` rows) or throws input_error.

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "core/libsvm.hpp"
#include "fuzz/dataset_checks.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto opts = in.u8();
  bool one_based = (opts & 1) != 0;
  uint64_t limit = opts >> 1;
  uint64_t features = in.u8();
  features |= uint64_t{in.u8()} << 8;
  features = features == 0 ? 1 : features;
  static const auto path = fuzz::scratch_path("input.libsvm");
  fuzz::write_file(path, in.rest());
  try {
    auto ds = load_libsvm(path, features, one_based, limit);
    fuzz::check_dataset(ds, "load_libsvm");
    fuzz::check(limit == 0 || ds.rows() <= limit,
                "load_libsvm kept more rows than its limit");
    fuzz::check(ds.schema.fields.size() == 1
                  && ds.schema.fields[0].vocabulary == features,
                "load_libsvm's schema is not one field of num_features");
  } catch (const input_error&) {
    // A clear refusal.
  }
  return 0;
}
