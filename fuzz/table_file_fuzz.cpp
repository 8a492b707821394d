// Fuzz target: a table shard file of an export (core/table_file.hpp), as a
// server maps it.
//
// Input: one byte of flags, then the file. Flag bit 0: the harness writes
// the true CRC-32s into the header (of the payload at byte 56, of the
// header at byte 60) before reading, so that the fuzzer reaches the shape
// checks and the keys behind the checksums.
//
// Properties: table_file::view returns a table or throws input_error; a
// table it returns has exactly 64 + 8 rows + 4 rows dim bytes, keys
// strictly increasing, and find() gives row i for key i's key and nothing
// for a key between two of them.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <zlib.h>

#include "core/error.hpp"
#include "core/table_file.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

uint32_t crc_of(const unsigned char* p, size_t n) {
  return static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), p,
                                     static_cast<uInt>(n)));
}

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<unsigned char>(v >> (8 * i));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto flags = in.u8();
  auto rest = in.rest();
  // An 8-aligned copy, as a mapping is (page-aligned).
  std::vector<uint64_t> buf((rest.size() + 7) / 8 + 1);
  auto* bytes = reinterpret_cast<unsigned char*>(buf.data());
  std::memcpy(bytes, rest.data(), rest.size());
  auto n = rest.size();
  if ((flags & 1) != 0 && n >= table_file_header_bytes) {
    put_u32(bytes + 56, crc_of(bytes + table_file_header_bytes,
                               n - table_file_header_bytes));
    put_u32(bytes + 60, crc_of(bytes, 60));
  }
  try {
    auto t = table_file::view(bytes, n, "fuzz.apstable");
    fuzz::check(n == table_file_header_bytes + 8 * t.rows()
                       + 4 * t.rows() * t.dim(),
                "the size is the shape's");
    for (uint64_t i = 0; i < t.rows(); ++i) {
      fuzz::check(i == 0 || t.key(i) > t.key(i - 1), "keys increase");
      fuzz::check(t.find(t.key(i)) == t.row(i), "find gives the key's row");
      if (i > 0 && t.key(i) > t.key(i - 1) + 1)
        fuzz::check(t.find(t.key(i) - 1) == nullptr,
                    "find gives nothing for a key not held");
    }
  } catch (const input_error&) {
    return 0;
  }
  return 0;
}
