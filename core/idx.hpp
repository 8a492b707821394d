#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

struct gzFile_s; // zlib's gzFile

namespace actorps {

/// An unsigned-byte array read from an IDX file (the format of MNIST and
/// Fashion-MNIST, http://yann.lecun.com/exdb/mnist/): `dims` in file order,
/// `data` row-major with prod(dims) bytes.
struct idx_array {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;

  /// Number of items: dims[0].
  uint64_t items() const {
    return dims.empty() ? 0 : dims[0];
  }

  /// Bytes per item: the product of dims[1..].
  uint64_t item_size() const;
};

/// Reads an IDX file of unsigned bytes, gzip-compressed or plain (zlib's gzread
/// reads both). At most `max_items` items are kept (0 = all); the header's
/// counts are still checked against the bytes that follow them.
///
/// @throws input_error naming `path` if the file is missing or unreadable, the
///         gzip stream is corrupt, the magic number is not an unsigned-byte
///         IDX header, a dimension is 0 or absurd, or the file ends before the
///         data the header promises.
idx_array read_idx(const std::string& path, uint64_t max_items = 0);

/// Reads an IDX file of unsigned bytes as a stream: the header when opened,
/// then the items in file order, a chunk at a time, so that a caller keeping
/// only some items (a worker's shard) never holds the whole file. Checks the
/// file as read_idx does. Not thread-safe; one pass per reader.
class idx_reader {
public:
  /// Called with `count` consecutive items starting at item `first`,
  /// `count` x item_size() bytes, row-major; the bytes are valid during the
  /// call only.
  using visitor
    = std::function<void(uint64_t first, uint64_t count, const uint8_t* bytes)>;

  /// Opens `path` (gzip or plain) and reads its header.
  /// @throws input_error naming `path` as read_idx (missing file, bad magic,
  ///         element type or rank, a dimension of 0 or absurd, short header).
  explicit idx_reader(std::string path);

  ~idx_reader();

  idx_reader(const idx_reader&) = delete;
  idx_reader& operator=(const idx_reader&) = delete;

  /// The dimensions in file order, as the header states them.
  const std::vector<uint32_t>& dims() const noexcept {
    return dims_;
  }

  /// Items the header promises: dims()[0].
  uint64_t items() const noexcept {
    return dims_[0];
  }

  /// Bytes per item: the product of dims()[1..].
  uint64_t item_size() const noexcept {
    return item_size_;
  }

  /// Reads every item to the end of the file, passing the first `keep` items
  /// (all if keep >= items()) to `visit` in order and in chunks of at most
  /// 64 KiB (at least one item), then checks that the stream ends there (for
  /// gzip: with a matching trailer). Items past `keep` are read and checked
  /// but not passed on. Call once.
  /// @throws input_error naming the file if it ends early, holds more bytes
  ///         than its header promises or is corrupt; whatever `visit` throws.
  void read_items(uint64_t keep, const visitor& visit);

private:
  std::string path_;
  gzFile_s* file_ = nullptr;
  std::vector<uint32_t> dims_;
  uint64_t item_size_ = 1;
};

/// Writes `arr` as a gzip-compressed IDX file (for tests and tools).
/// @throws input_error if the file cannot be written.
void write_idx_gz(const std::string& path, const idx_array& arr);

} // namespace actorps
