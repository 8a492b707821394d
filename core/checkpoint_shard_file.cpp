#include "core/checkpoint_shard_file.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "core/checkpoint_files.hpp"
#include "core/error.hpp"

namespace actorps::detail {

namespace {

constexpr char shard_magic[8] = {'A', 'P', 'S', 'S', 'H', 'A', 'R', 'D'};
constexpr uint64_t shard_header_size = 16;

// -- byte order ---------------------------------------------------------------

void put_le(unsigned char* p, uint32_t x) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<unsigned char>(x >> (8 * i));
}

void put_le(unsigned char* p, uint64_t x) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<unsigned char>(x >> (8 * i));
}

template <class UInt>
UInt get_le(const unsigned char* p) {
  UInt x = 0;
  for (int i = static_cast<int>(sizeof(UInt)) - 1; i >= 0; --i)
    x = static_cast<UInt>((x << 8) | p[i]);
  return x;
}

/// The bits of T (float or uint64_t) as an unsigned integer of its width.
template <class T>
auto bits_of(T x) {
  using uint = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  uint bits;
  std::memcpy(&bits, &x, sizeof(T));
  return bits;
}

template <class T>
T from_bits(const unsigned char* p) {
  using uint = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  auto bits = get_le<uint>(p);
  T x;
  std::memcpy(&x, &bits, sizeof(T));
  return x;
}

// -- arrays -------------------------------------------------------------------

template <class UInt>
void put_int(file_writer& out, UInt x) {
  unsigned char b[sizeof(UInt)];
  put_le(b, x);
  out.put(b, sizeof(UInt));
}

/// Appends `xs` (floats or uint64s) little-endian, encoded in 64 KiB pieces.
template <class T>
void put_array(file_writer& out, const std::vector<T>& xs) {
  unsigned char buf[1 << 16];
  constexpr size_t per_piece = sizeof(buf) / sizeof(T);
  for (size_t i = 0; i < xs.size(); i += per_piece) {
    auto n = std::min(per_piece, xs.size() - i);
    for (size_t k = 0; k < n; ++k)
      put_le(buf + sizeof(T) * k, bits_of(xs[i + k]));
    out.put(buf, sizeof(T) * n);
  }
}

/// Reads n elements (floats or uint64s) into `out`.
template <class T>
void take_array(file_reader& in, std::vector<T>& out, uint64_t n) {
  out.resize(n);
  constexpr size_t per_take = file_reader::chunk_size / sizeof(T);
  for (size_t i = 0; i < n; i += per_take) {
    auto k = std::min<uint64_t>(per_take, n - i);
    auto* p = in.take(k * sizeof(T));
    for (size_t j = 0; j < k; ++j)
      out[i + j] = from_bits<T>(p + sizeof(T) * j);
  }
}

// -- checked arithmetic -------------------------------------------------------

bool mul(uint64_t x, uint64_t y, uint64_t& out) {
  if (x != 0 && y > std::numeric_limits<uint64_t>::max() / x)
    return false;
  out = x * y;
  return true;
}

bool add(uint64_t x, uint64_t y, uint64_t& out) {
  if (y > std::numeric_limits<uint64_t>::max() - x)
    return false;
  out = x + y;
  return true;
}

/// What is wrong with the header and the length table ("" if nothing), for
/// a shard of `rows` rows; consumes the table only if the header is right.
std::string check_layout(file_reader& in, const checkpoint_shard& s,
                         uint64_t rows, uint64_t removed_keys,
                         uint32_t version) {
  auto* head = in.take(shard_header_size);
  if (std::memcmp(head, shard_magic, sizeof(shard_magic)) != 0)
    return "bad magic: not an actorps shard file";
  auto file_version = get_le<uint32_t>(head + 8);
  if (file_version < checkpoint_oldest_version
      || file_version > checkpoint_format_version)
    return fmt::format("unsupported shard file version {} (this build reads "
                       "versions {} to {})",
                       file_version, checkpoint_oldest_version,
                       checkpoint_format_version);
  if (file_version != version)
    return fmt::format("shard file version {}, but the manifest is version {}",
                       file_version, version);
  auto arrays = get_le<uint32_t>(head + 12);
  auto floats = 1 + s.slots.size();
  auto expected = floats + (s.table ? 2 : 0) + (s.delta ? 1 : 0);
  if (arrays != expected)
    return fmt::format("header says {} arrays, manifest says {} (values and "
                       "{} slots{}{})",
                       arrays, expected, s.slots.size(),
                       s.table ? ", keys, steps" : "",
                       s.delta ? ", removed keys" : "");
  auto* lengths = in.take(8 * arrays);
  auto row_word = s.table ? "keys" : "rows";
  for (size_t j = 0; j < floats; ++j) {
    auto n = get_le<uint64_t>(lengths + 8 * j);
    if (n != rows * s.cols)
      return fmt::format("array {} has {} floats, manifest says {} ({} {} x "
                         "{} cols)",
                         j, n, rows * s.cols, rows, row_word, s.cols);
  }
  if (s.table) {
    auto keys = get_le<uint64_t>(lengths + 8 * floats);
    auto steps = get_le<uint64_t>(lengths + 8 * floats + 8);
    if (keys != steps)
      return fmt::format("{} keys but {} steps", keys, steps);
    if (keys != rows)
      return fmt::format("{} keys, manifest says {} rows", keys, rows);
  }
  if (s.delta) {
    auto removed = get_le<uint64_t>(lengths + 8 * floats + 16);
    if (removed != removed_keys)
      return fmt::format("{} removed keys, manifest says {}", removed,
                         removed_keys);
  }
  return "";
}

} // namespace

bool shard_file_size(uint64_t rows, uint64_t cols, size_t slots, bool table,
                     uint64_t& bytes, bool delta, uint64_t removed) {
  uint64_t floats_arrays = 1 + slots;
  uint64_t arrays = floats_arrays + (table ? 2 : 0) + (delta ? 1 : 0);
  uint64_t floats = 0;
  uint64_t float_bytes = 0;
  uint64_t int_bytes = 0;
  uint64_t removed_bytes = 0;
  return mul(rows, cols, floats) && mul(floats, 4 * floats_arrays, float_bytes)
         && mul(rows, table ? 16 : 0, int_bytes)
         && mul(removed, delta ? 8 : 0, removed_bytes)
         && add(shard_header_size + 8 * arrays, float_bytes, bytes)
         && add(bytes, int_bytes, bytes) && add(bytes, removed_bytes, bytes);
}

bool find_duplicate_key(const std::vector<uint64_t>& keys, uint64_t& dup) {
  auto increasing = [](const auto& xs) {
    return std::adjacent_find(xs.begin(), xs.end(), std::greater_equal<>{})
           == xs.end();
  };
  if (increasing(keys))
    return false;
  auto sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  auto i = std::adjacent_find(sorted.begin(), sorted.end());
  if (i == sorted.end())
    return false;
  dup = *i;
  return true;
}

shard_file_entry write_shard_file(const std::string& path,
                                  const checkpoint_shard& s) {
  file_writer out{path};
  out.put(shard_magic, sizeof(shard_magic));
  put_int(out, checkpoint_format_version);
  put_int(out, static_cast<uint32_t>(1 + s.slots.size() + (s.table ? 2 : 0)
                                    + (s.delta ? 1 : 0)));
  auto put_length = [&](size_t n) { put_int(out, static_cast<uint64_t>(n)); };
  put_length(s.values.size());
  for (auto& slot : s.slots)
    put_length(slot.size());
  if (s.table) {
    put_length(s.keys.size());
    put_length(s.steps.size());
  }
  if (s.delta)
    put_length(s.removed.size());
  put_array(out, s.values);
  for (auto& slot : s.slots)
    put_array(out, slot);
  if (s.table) {
    put_array(out, s.keys);
    put_array(out, s.steps);
  }
  if (s.delta)
    put_array(out, s.removed);
  out.finish();
  shard_file_entry e;
  e.bytes = out.bytes();
  e.crc = out.crc();
  e.rows = s.table ? s.keys.size() : s.row_end - s.row_begin;
  e.removed = s.removed.size();
  return e;
}

void read_shard_file(const std::string& path, const shard_file_entry& e,
                     uint32_t version, checkpoint_shard& s) {
  file_reader in{path, e.bytes};
  auto check_crc = [&] {
    if (in.crc() != e.crc)
      in.fail(fmt::format("checksum mismatch (expected {:08x}, got {:08x})",
                          e.crc, in.crc()));
  };
  // The manifest checked "bytes" against rows, cols and slots, and the file
  // has that size: the header fits, and so do the arrays once their lengths
  // match the manifest.
  auto problem = check_layout(in, s, e.rows, e.removed, version);
  if (!problem.empty()) {
    in.skip_rest();
    check_crc();
    in.fail(problem);
  }
  take_array(in, s.values, e.rows * s.cols);
  for (auto& slot : s.slots)
    take_array(in, slot, e.rows * s.cols);
  if (s.table) {
    take_array(in, s.keys, e.rows);
    take_array(in, s.steps, e.rows);
  }
  if (s.delta)
    take_array(in, s.removed, e.removed);
  if (in.remaining() != 0)
    in.fail(fmt::format("{} bytes after the last array", in.remaining()));
  check_crc();
  uint64_t dup = 0;
  if (s.table && find_duplicate_key(s.keys, dup))
    in.fail(fmt::format("duplicate key {}", dup));
}

} // namespace actorps::detail
