// Fuzz target: one binary shard file of a checkpoint, as read_checkpoint
// reads it once the manifest has described it.
//
// Input: one byte of what the manifest says (bit 0: a table shard; bits 1-2:
// slots, 0 to 2 (3 reads as 0); bit 3: format version 1, whose shards are
// dense), one byte of rows,
// one byte of cols, then the file. As read_checkpoint guarantees (the
// manifest's "bytes" are checked against the shape and the file's size
// before), the file is cut or zero-padded to the size of its shape; the
// harness states its true CRC-32, so the fuzzer reaches the header, the
// array lengths and the arrays behind the checksum.
//
// Properties: read_shard_file fills the shard or throws input_error; a shard
// it fills has rows x cols floats in its values and in each slot, and a
// table as many keys as steps, as many as rows, none twice.

#include <cstddef>
#include <cstdint>

#include <zlib.h>

#include "core/checkpoint_shard_file.hpp"
#include "core/error.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto flags = in.u8();
  uint64_t rows = in.u8();
  uint64_t cols = in.u8();
  auto file = in.rest();
  // What decode_manifest guarantees: a version it reads, tables only in
  // version 2, at most checkpoint_max_slots slots, a size that fits.
  uint32_t version = (flags & 8) != 0 ? 1 : 2;
  checkpoint_shard s;
  s.table = version == 2 && (flags & 1) != 0;
  s.slots.resize(((flags >> 1) & 3) % (checkpoint_max_slots + 1));
  s.cols = cols;
  s.row_end = s.table ? 0 : rows;
  uint64_t bytes = 0;
  if (!detail::shard_file_size(rows, cols, s.slots.size(), s.table, bytes))
    return 0;
  file.resize(bytes);
  detail::shard_file_entry e;
  e.file = "shard-0000.bin";
  e.bytes = file.size();
  e.crc = static_cast<uint32_t>(
    crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(file.data()),
          static_cast<uInt>(file.size())));
  e.rows = rows;
  static const auto path = fuzz::scratch_path("shard-0000.bin");
  fuzz::write_file(path, file);
  try {
    detail::read_shard_file(path, e, version, s);
  } catch (const input_error&) {
    return 0;
  }
  fuzz::check(s.values.size() == rows * cols,
              "read_shard_file: values are not rows x cols floats");
  for (auto& slot : s.slots)
    fuzz::check(slot.size() == rows * cols,
                "read_shard_file: a slot is not rows x cols floats");
  if (s.table) {
    fuzz::check(s.keys.size() == rows && s.steps.size() == rows,
                "read_shard_file: a table has not one key and step per row");
    uint64_t dup = 0;
    fuzz::check(!detail::find_duplicate_key(s.keys, dup),
                "read_shard_file accepted a key twice");
  } else {
    fuzz::check(s.keys.empty() && s.steps.empty(),
                "read_shard_file gave a dense shard keys");
  }
  return 0;
}
