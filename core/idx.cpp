#include "core/idx.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <zlib.h>

#include "core/error.hpp"

namespace actorps {

namespace {

/// Closes a gzFile on scope exit.
struct gz_closer {
  gzFile f;
  ~gz_closer() {
    if (f != nullptr)
      gzclose(f);
  }
};

/// Reads exactly `n` bytes or throws, naming `what` that was being read.
/// When the `n` bytes are a piece of a larger read of `total` bytes that
/// has `before` bytes already, messages count the whole read.
void read_exact(gzFile f, const std::string& path, void* buf, size_t n,
                const char* what, uint64_t before = 0, uint64_t total = 0) {
  auto* out = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    auto chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      throw input_error(fmt::format("{}: corrupt compressed data while reading "
                                    "the {} ({})",
                                    path, what, msg ? msg : "unknown"));
    }
    if (got == 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      if (code != Z_OK && code != Z_STREAM_END && msg != nullptr && *msg)
        throw input_error(fmt::format("{}: truncated or corrupt file while "
                                      "reading the {} ({}; {} of {} bytes)",
                                      path, what, msg, before + done,
                                      total > 0 ? total : n));
      throw input_error(fmt::format("{}: truncated file: the {} needs {} "
                                    "bytes, only {} are there",
                                    path, what, total > 0 ? total : n,
                                    before + done));
    }
    done += static_cast<size_t>(got);
  }
}

/// Bytes read at once by read_growing and skip_exact.
constexpr uint64_t read_piece = uint64_t{1} << 20;

/// Reads exactly `n` bytes into `out` (replacing its contents) a piece at a
/// time, so that `out` grows only as the bytes arrive: a header promising
/// gigabytes that the file does not hold costs no more memory than the file.
/// Throws as read_exact.
void read_growing(gzFile f, const std::string& path, std::vector<uint8_t>& out,
                  uint64_t n, const std::string& what) {
  out.clear();
  while (out.size() < n) {
    auto before = out.size();
    auto k = std::min<uint64_t>(read_piece, n - before);
    out.resize(before + k);
    read_exact(f, path, out.data() + before, k, what.c_str(), before, n);
  }
}

/// Reads and drops exactly `n` bytes, a piece at a time. Throws as
/// read_exact.
void skip_exact(gzFile f, const std::string& path, uint64_t n,
                const std::string& what) {
  std::vector<uint8_t> scratch(std::min(n, read_piece));
  for (uint64_t done = 0; done < n;) {
    auto k = std::min<uint64_t>(scratch.size(), n - done);
    read_exact(f, path, scratch.data(), k, what.c_str(), done, n);
    done += k;
  }
}

uint32_t big_endian(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8)
         | uint32_t{p[3]};
}

} // namespace

uint64_t idx_array::item_size() const {
  uint64_t result = 1;
  for (size_t i = 1; i < dims.size(); ++i)
    result *= dims[i];
  return result;
}

idx_reader::idx_reader(std::string path) : path_(std::move(path)) {
  file_ = gzopen(path_.c_str(), "rb");
  if (file_ == nullptr)
    throw input_error(fmt::format("{}: cannot open file (missing or not "
                                  "readable)",
                                  path_));
  // The destructor does not run if the constructor throws.
  gz_closer guard{file_};
  unsigned char magic[4];
  read_exact(file_, path_, magic, 4, "IDX magic number");
  if (magic[0] != 0 || magic[1] != 0)
    throw input_error(fmt::format("{}: not an IDX file (bad magic number "
                                  "{:02x}{:02x}{:02x}{:02x})",
                                  path_, magic[0], magic[1], magic[2],
                                  magic[3]));
  if (magic[2] != 0x08)
    throw input_error(fmt::format("{}: unsupported IDX element type 0x{:02x} "
                                  "(only unsigned bytes, 0x08)",
                                  path_, magic[2]));
  auto ndims = magic[3];
  if (ndims < 1 || ndims > 4)
    throw input_error(fmt::format("{}: unsupported IDX rank {} (expected 1 "
                                  "to 4)",
                                  path_, ndims));
  unsigned char buf[4];
  uint64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    read_exact(file_, path_, buf, 4, "IDX dimensions");
    auto d = big_endian(buf);
    if (d == 0)
      throw input_error(fmt::format("{}: dimension {} is 0", path_, i));
    total *= d;
    if (total > (uint64_t{1} << 34))
      throw input_error(fmt::format("{}: header promises more than 16 GiB of "
                                    "data; the file is corrupt",
                                    path_));
    dims_.push_back(d);
  }
  for (size_t i = 1; i < dims_.size(); ++i)
    item_size_ *= dims_[i];
  guard.f = nullptr;
}

idx_reader::~idx_reader() {
  if (file_ != nullptr)
    gzclose(file_);
}

void idx_reader::read_items(uint64_t keep, const visitor& visit) {
  const auto item = item_size_;
  const uint64_t items = dims_[0];
  keep = std::min(keep, items);
  auto per_chunk = std::max<uint64_t>(1, (uint64_t{1} << 16) / item);
  std::vector<uint8_t> chunk;
  for (uint64_t first = 0; first < items; first += per_chunk) {
    auto n = std::min<uint64_t>(per_chunk, items - first);
    if (first < keep) {
      // An item larger than the file (a corrupt header) fails before its
      // bytes are allocated: the chunk grows as they arrive.
      read_growing(file_, path_, chunk, n * item,
                   fmt::format("data ({} items of {} bytes)", keep, item));
      visit(first, std::min(n, keep - first), chunk.data());
    } else {
      // The items not kept must still be there, as the header promises.
      skip_exact(file_, path_, n * item,
                 fmt::format("data (items {} to {}, {} bytes each)", first,
                             first + n - 1, item));
    }
  }
  // A complete read must also be the end of the stream (for gzip: a
  // trailer whose checksum matches).
  char extra;
  int got = gzread(file_, &extra, 1);
  if (got > 0)
    throw input_error(fmt::format("{}: more bytes than the header promises "
                                  "({} items of {} bytes)",
                                  path_, items, item));
  int code = Z_OK;
  const char* msg = gzerror(file_, &code);
  if (got < 0 || code != Z_OK)
    throw input_error(fmt::format("{}: truncated or corrupt compressed data "
                                  "after the last item ({})",
                                  path_, msg != nullptr ? msg : "unknown"));
}

idx_array read_idx(const std::string& path, uint64_t max_items) {
  idx_reader in{path};
  idx_array result;
  result.dims = in.dims();
  auto items = in.items();
  if (max_items > 0 && max_items < items)
    items = max_items;
  const auto item = in.item_size();
  // Not sized from the header up front: a header promising more than the
  // file holds must fail as a truncated file, not allocate what it promises
  // (up to 16 GiB). The data grows as the items arrive.
  result.data.reserve(std::min<uint64_t>(items * item, uint64_t{64} << 20));
  in.read_items(items, [&](uint64_t, uint64_t count, const uint8_t* bytes) {
    result.data.insert(result.data.end(), bytes, bytes + count * item);
  });
  result.dims[0] = static_cast<uint32_t>(items);
  return result;
}

void write_idx_gz(const std::string& path, const idx_array& arr) {
  gz_closer f{gzopen(path.c_str(), "wb")};
  if (f.f == nullptr)
    throw input_error(fmt::format("{}: cannot create file", path));
  unsigned char header[4] = {0, 0, 0x08, static_cast<unsigned char>(
                                           arr.dims.size())};
  bool ok = gzwrite(f.f, header, 4) == 4;
  for (auto d : arr.dims) {
    unsigned char b[4] = {static_cast<unsigned char>(d >> 24),
                          static_cast<unsigned char>(d >> 16),
                          static_cast<unsigned char>(d >> 8),
                          static_cast<unsigned char>(d)};
    ok = ok && gzwrite(f.f, b, 4) == 4;
  }
  if (!arr.data.empty())
    ok = ok
         && gzwrite(f.f, arr.data.data(), static_cast<unsigned>(arr.data.size()))
              == static_cast<int>(arr.data.size());
  if (!ok)
    throw input_error(fmt::format("{}: write failed", path));
}

} // namespace actorps
