// Fuzz target: IDX files (MNIST's format), plain or gzip-compressed, as the
// fashion_mnist dataset reads them: one file alone (read_idx and the
// streaming idx_reader), or an image file with its label file
// (load_idx_dataset, which scales pixels and checks labels against classes).
//
// Input: one byte: bits 0-6 `keep` (items to keep; 0 = all), bit 7 the pair
// mode. One file: the rest is the file. Pair: 2 bytes (little-endian) of the
// label file's length, the label file, then the image file.
//
// Properties: every reader returns data or throws input_error, and memory
// follows the bytes in the file, not the counts its header promises. Data
// read is as large as the header says (kept items x item size); the
// streaming reader hands over consecutive items, never more than kept; a
// dataset is well formed (labels below 10, one dense row per label).

#include <cstddef>
#include <cstdint>

#include "core/dataset.hpp"
#include "core/error.hpp"
#include "core/idx.hpp"
#include "fuzz/dataset_checks.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

void one_file(const std::string& path, uint64_t keep) {
  try {
    auto arr = read_idx(path, keep);
    fuzz::check(!arr.dims.empty(), "read_idx returned no dimensions");
    fuzz::check(arr.data.size() == arr.items() * arr.item_size(),
                "read_idx data size differs from its dimensions");
    fuzz::check(keep == 0 || arr.items() <= keep,
                "read_idx kept more items than asked");
  } catch (const input_error&) {
    // A clear refusal.
  }
  try {
    idx_reader reader{path};
    uint64_t next = 0;
    auto wanted = keep == 0 ? reader.items() : keep;
    reader.read_items(wanted, [&](uint64_t first, uint64_t count,
                                  const uint8_t* bytes) {
      fuzz::check(first == next && count > 0 && bytes != nullptr,
                  "idx_reader skipped or repeated items");
      next += count;
      fuzz::check(next <= wanted, "idx_reader passed more items than kept");
    });
    fuzz::check(next == std::min<uint64_t>(wanted, reader.items()),
                "idx_reader passed fewer items than kept");
  } catch (const input_error&) {
    // A clear refusal.
  }
}

void image_and_labels(const std::string& images, const std::string& labels,
                      uint64_t keep) {
  try {
    auto ds = load_idx_dataset(images, labels, 10, keep);
    fuzz::check_dataset(ds, "load_idx_dataset");
    fuzz::check(keep == 0 || ds.rows() <= keep,
                "load_idx_dataset kept more rows than its limit");
  } catch (const input_error&) {
    // A clear refusal.
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto mode = in.u8();
  uint64_t keep = mode & 0x7f;
  static const auto first = fuzz::scratch_path("a.idx");
  static const auto second = fuzz::scratch_path("b.idx");
  if ((mode & 0x80) == 0) {
    fuzz::write_file(first, in.rest());
    one_file(first, keep);
  } else {
    fuzz::write_file(first, in.sized(true));
    fuzz::write_file(second, in.rest());
    image_and_labels(second, first, keep);
  }
  return 0;
}
