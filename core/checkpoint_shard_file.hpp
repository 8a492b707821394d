#pragma once

// The binary shard file of a checkpoint: one checkpoint_shard per file, a
// header, a table of array lengths, then the arrays. The layout is documented
// at write_checkpoint in core/checkpoint.hpp.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint.hpp"

namespace actorps::detail {

/// The oldest format version read_checkpoint still reads (dense shards only;
/// its shard files have version 2's dense layout).
constexpr uint32_t checkpoint_oldest_version = 1;

/// What the manifest records of one shard file.
struct shard_file_entry {
  /// Plain file name in the checkpoint directory.
  std::string file;
  /// The file's size.
  uint64_t bytes = 0;
  /// zlib's CRC-32 of the whole file.
  uint32_t crc = 0;
  /// Rows per array: row_end - row_begin of a dense shard, the number of keys
  /// of a table shard.
  uint64_t rows = 0;
  /// A table delta shard (format 3): its number of tombstones.
  uint64_t removed = 0;
};

/// The size of the shard file of a shard of `rows` rows of `cols` floats with
/// `slots` optimizer slots:
///   16 + 8 * A + 4 * (1 + slots) * rows * cols + (table ? 16 * rows : 0)
///   + (delta ? 8 * removed : 0),
/// with A = 1 + slots (+ 2 for a table, + 1 more for a table delta) arrays.
/// Returns false if it does not fit in 64 bits.
bool shard_file_size(uint64_t rows, uint64_t cols, size_t slots, bool table,
                     uint64_t& bytes, bool delta = false,
                     uint64_t removed = 0);

/// Whether `keys` holds a value twice; if so, sets `dup` to the smallest such
/// key. O(n) if `keys` is strictly increasing, else O(n log n) time and a
/// sorted copy of `keys` in memory.
bool find_duplicate_key(const std::vector<uint64_t>& keys, uint64_t& dup);

/// Writes `s` as a new shard file of format checkpoint_format_version at
/// `path`, and returns its size and CRC-32 (`file` left empty, `rows` set).
/// @pre `s` passed validate_state (core/checkpoint_manifest.hpp).
/// @throws runtime_failure naming the path on any I/O error.
shard_file_entry write_shard_file(const std::string& path,
                                  const checkpoint_shard& s);

/// Reads the shard file at `path` that a manifest of format `version`
/// describes as `e`, into `s`, whose other fields the manifest set (`table`,
/// `cols`, and `slots` sized). Reads the file once, front to back: memory is
/// the decoded arrays plus a 1 MiB buffer.
///
/// Checks the file's size; then its CRC-32 (reported before anything the
/// header says, so that a damaged byte reads as a checksum mismatch); the
/// magic; the version, which must be the manifest's; the number of arrays;
/// each array's length (rows * cols floats, or rows keys and rows steps);
/// and for a table that no key appears twice.
/// @throws input_error "PATH: WHAT", e.g. "checksum mismatch (expected
///         1a2b3c4d, got 5e6f7a8b)", "12 keys but 13 steps", "duplicate key
///         42"; `s` is then in an unspecified state and must not be used.
void read_shard_file(const std::string& path, const shard_file_entry& e,
                     uint32_t version, checkpoint_shard& s);

} // namespace actorps::detail
