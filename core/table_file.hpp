#pragma once

// The table shard file of an export (docs/reference/export-format.md): the
// rows of one embedding table's key range, keys sorted for binary search,
// checksummed, read through a read-only memory map so that a server holds
// a table of any size at the cost of the pages it touches.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace actorps {

/// Version of the table file format write_table_file writes and
/// table_file reads.
constexpr uint32_t table_file_version = 1;

/// Bytes of a table file's header.
constexpr uint64_t table_file_header_bytes = 64;

/// What write_table_file wrote: the file's size and its CRC-32 (zlib's)
/// over all its bytes, for the manifest.
struct table_file_info {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

/// Writes a new table file `path` (it must not exist) holding `keys` (R
/// keys, strictly increasing) and their rows `values` (R x dim floats,
/// row-major, row i belonging to keys[i]), then fsyncs it.
///
/// Layout (all integers little-endian, floats IEEE 754 binary32
/// little-endian):
/// - bytes [0, 64), the header: "APSTABLE" (8 bytes); uint32 version (1);
///   uint32 header bytes (64); uint64 dim; uint64 rows R; uint64 keys
///   offset (64); uint64 values offset (64 + 8 R); uint64 file bytes
///   (64 + 8 R + 4 R dim); uint32 CRC-32 of bytes [64, file bytes) (the
///   payload); uint32 CRC-32 of bytes [0, 60) (the header before it);
/// - R uint64 keys, strictly increasing, at the keys offset (8-aligned);
/// - R x dim floats, row-major, at the values offset (4-aligned).
///
/// @throws std::invalid_argument for dim 0, values.size() != R x dim or
///         keys not strictly increasing (before touching the disk).
/// @throws runtime_failure naming `path` on any I/O error (the partial
///         file is left for the caller's cleanup).
table_file_info write_table_file(const std::string& path, uint64_t dim,
                                 const std::vector<uint64_t>& keys,
                                 const std::vector<float>& values);

/// A table file, read-only: mapped into memory (open) or over bytes the
/// caller holds (view). Immutable; find() may be called from any thread.
class table_file {
public:
  /// Maps `path` read-only and checks it whole before returning: the
  /// header (magic, version, header CRC, offsets and size consistent with
  /// dim and rows), the file's size, the payload's CRC-32, keys strictly
  /// increasing. O(file) once; then lookups touch only the pages they read.
  /// @throws input_error "PATH: WHAT" for a missing or unreadable file, a
  ///         wrong magic or version, "truncated: N bytes, header says M", a
  ///         checksum mismatch, keys out of order; nothing stays mapped.
  static table_file open(const std::string& path);

  /// The same checks over `n` bytes at `data` (not copied: they must
  /// outlive the view), naming `name` in errors.
  static table_file view(const unsigned char* data, size_t n,
                         const std::string& name);

  table_file(table_file&& other) noexcept;
  table_file& operator=(table_file&& other) noexcept;
  table_file(const table_file&) = delete;
  table_file& operator=(const table_file&) = delete;
  ~table_file();

  /// Floats per row.
  uint64_t dim() const noexcept {
    return dim_;
  }

  /// Rows (keys) held.
  uint64_t rows() const noexcept {
    return rows_;
  }

  /// Key of row i (i < rows()).
  uint64_t key(uint64_t i) const noexcept;

  /// Row i: dim() floats (i < rows()).
  const float* row(uint64_t i) const noexcept {
    return values_ + i * dim_;
  }

  /// The row of `key` (binary search, O(log rows)), or null if the file
  /// does not hold it.
  const float* find(uint64_t key) const noexcept;

private:
  table_file() = default;
  void release() noexcept;

  const unsigned char* keys_ = nullptr; // rows_ little-endian uint64
  const float* values_ = nullptr;
  uint64_t dim_ = 0;
  uint64_t rows_ = 0;
  void* map_ = nullptr; // the mapping, when open() made one
  size_t map_bytes_ = 0;
};

} // namespace actorps
