#include "core/table_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/checkpoint_files.hpp"
#include "core/error.hpp"

namespace actorps {

namespace {

constexpr char table_magic[8] = {'A', 'P', 'S', 'T', 'A', 'B', 'L', 'E'};

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<unsigned char>(v >> (8 * i));
}

void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

} // namespace

table_file_info write_table_file(const std::string& path, uint64_t dim,
                                 const std::vector<uint64_t>& keys,
                                 const std::vector<float>& values) {
  if (dim == 0)
    throw std::invalid_argument(fmt::format("{}: dim 0", path));
  uint64_t rows = keys.size();
  if (values.size() != rows * dim)
    throw std::invalid_argument(fmt::format("{}: {} floats for {} rows of {}",
                                            path, values.size(), rows, dim));
  for (uint64_t i = 1; i < rows; ++i)
    if (keys[i] <= keys[i - 1])
      throw std::invalid_argument(fmt::format("{}: keys not strictly "
                                              "increasing at {}",
                                              path, i));
  uint64_t keys_offset = table_file_header_bytes;
  uint64_t values_offset = keys_offset + 8 * rows;
  uint64_t file_bytes = values_offset + 4 * rows * dim;
  // The payload's CRC first: the header carries it.
  std::vector<unsigned char> key_bytes(8 * rows);
  for (uint64_t i = 0; i < rows; ++i)
    put_u64(key_bytes.data() + 8 * i, keys[i]);
  auto payload = detail::crc32_update(0, key_bytes.data(), key_bytes.size());
  // Floats as stored: this host is little-endian (as checkpoints assume).
  payload = detail::crc32_update(
    payload, reinterpret_cast<const unsigned char*>(values.data()),
    values.size() * sizeof(float));
  unsigned char header[table_file_header_bytes] = {};
  std::memcpy(header, table_magic, 8);
  put_u32(header + 8, table_file_version);
  put_u32(header + 12, static_cast<uint32_t>(table_file_header_bytes));
  put_u64(header + 16, dim);
  put_u64(header + 24, rows);
  put_u64(header + 32, keys_offset);
  put_u64(header + 40, values_offset);
  put_u64(header + 48, file_bytes);
  put_u32(header + 56, payload);
  put_u32(header + 60, detail::crc32_update(0, header, 60));
  detail::file_writer out{path};
  out.put(header, sizeof(header));
  out.put(key_bytes.data(), key_bytes.size());
  out.put(values.data(), values.size() * sizeof(float));
  out.finish();
  return {out.bytes(), out.crc()};
}

table_file table_file::view(const unsigned char* data, size_t n,
                            const std::string& name) {
  auto fail = [&](const std::string& what) {
    throw input_error(fmt::format("{}: {}", name, what));
  };
  if (n < table_file_header_bytes)
    fail(fmt::format("truncated: {} bytes, a table file has a {}-byte header",
                     n, table_file_header_bytes));
  if (std::memcmp(data, table_magic, 8) != 0)
    fail("not a table file (no \"APSTABLE\" magic)");
  auto version = get_u32(data + 8);
  if (version != table_file_version)
    fail(fmt::format("unsupported table file version {} (this build reads "
                     "{})",
                     version, table_file_version));
  auto header_crc = get_u32(data + 60);
  auto crc = detail::crc32_update(0, data, 60);
  if (crc != header_crc)
    fail(fmt::format("header checksum mismatch (expected {:08x}, got {:08x})",
                     header_crc, crc));
  auto header_bytes = get_u32(data + 12);
  auto dim = get_u64(data + 16);
  auto rows = get_u64(data + 24);
  auto keys_offset = get_u64(data + 32);
  auto values_offset = get_u64(data + 40);
  auto file_bytes = get_u64(data + 48);
  // Sizes checked against the largest file there could be before any
  // product is formed, so that none overflows.
  constexpr uint64_t limit = uint64_t{1} << 56;
  if (header_bytes != table_file_header_bytes || dim == 0 || dim > (1u << 20)
      || rows > limit / 8 || keys_offset != table_file_header_bytes
      || values_offset != keys_offset + 8 * rows
      || rows * dim > limit / 4
      || file_bytes != values_offset + 4 * rows * dim)
    fail(fmt::format("inconsistent header: header {} bytes, dim {}, {} rows, "
                     "keys at {}, values at {}, {} bytes",
                     header_bytes, dim, rows, keys_offset, values_offset,
                     file_bytes));
  if (n < file_bytes)
    fail(fmt::format("truncated: {} bytes, header says {}", n, file_bytes));
  if (n > file_bytes)
    fail(fmt::format("too long: {} bytes, header says {}", n, file_bytes));
  auto payload = detail::crc32_update(0, data + table_file_header_bytes,
                                      file_bytes - table_file_header_bytes);
  if (payload != get_u32(data + 56))
    fail(fmt::format("checksum mismatch (expected {:08x}, got {:08x})",
                     get_u32(data + 56), payload));
  table_file f;
  f.keys_ = data + keys_offset;
  f.values_ = reinterpret_cast<const float*>(data + values_offset);
  f.dim_ = dim;
  f.rows_ = rows;
  for (uint64_t i = 1; i < rows; ++i)
    if (f.key(i) <= f.key(i - 1))
      fail(fmt::format("keys out of order at row {} ({} after {})", i,
                       f.key(i), f.key(i - 1)));
  return f;
}

table_file table_file::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw input_error(fmt::format("{}: cannot open: {}", path,
                                  detail::errno_text(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw input_error(fmt::format("{}: not a regular file", path));
  }
  auto n = static_cast<size_t>(st.st_size);
  void* map = nullptr;
  if (n > 0) {
    map = mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      auto err = errno;
      ::close(fd);
      throw input_error(fmt::format("{}: cannot map: {}", path,
                                    detail::errno_text(err)));
    }
  }
  ::close(fd);
  static const unsigned char empty = 0;
  try {
    auto f = view(map != nullptr ? static_cast<const unsigned char*>(map)
                                 : &empty,
                  n, path);
    f.map_ = map;
    f.map_bytes_ = n;
    return f;
  } catch (...) {
    if (map != nullptr)
      munmap(map, n);
    throw;
  }
}

table_file::table_file(table_file&& other) noexcept {
  *this = std::move(other);
}

table_file& table_file::operator=(table_file&& other) noexcept {
  if (this != &other) {
    release();
    keys_ = other.keys_;
    values_ = other.values_;
    dim_ = other.dim_;
    rows_ = other.rows_;
    map_ = other.map_;
    map_bytes_ = other.map_bytes_;
    other.map_ = nullptr;
    other.map_bytes_ = 0;
    other.keys_ = nullptr;
    other.values_ = nullptr;
    other.rows_ = 0;
  }
  return *this;
}

table_file::~table_file() {
  release();
}

void table_file::release() noexcept {
  if (map_ != nullptr)
    munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

uint64_t table_file::key(uint64_t i) const noexcept {
  return get_u64(keys_ + 8 * i);
}

const float* table_file::find(uint64_t key) const noexcept {
  uint64_t lo = 0;
  uint64_t hi = rows_;
  while (lo < hi) {
    auto mid = lo + (hi - lo) / 2;
    auto k = this->key(mid);
    if (k == key)
      return row(mid);
    if (k < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return nullptr;
}

} // namespace actorps
