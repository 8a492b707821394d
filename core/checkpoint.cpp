#include "core/checkpoint.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

using json = nlohmann::json;

constexpr char shard_magic[8] = {'A', 'P', 'S', 'S', 'H', 'A', 'R', 'D'};
constexpr uint64_t shard_header_size = 16;
constexpr const char* format_name = "actorps-checkpoint";
constexpr const char* manifest_name = "manifest.json";
constexpr const char* tmp_prefix = ".tmp-";
constexpr const char* ckpt_prefix = "ckpt-";
constexpr size_t ckpt_digits = 10;

// -- bytes and paths ----------------------------------------------------------

void put_le32(unsigned char* p, uint32_t x) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<unsigned char>(x >> (8 * i));
}

void put_le64(unsigned char* p, uint64_t x) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<unsigned char>(x >> (8 * i));
}

uint32_t get_le32(const unsigned char* p) {
  uint32_t x = 0;
  for (int i = 3; i >= 0; --i)
    x = (x << 8) | p[i];
  return x;
}

uint64_t get_le64(const unsigned char* p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; --i)
    x = (x << 8) | p[i];
  return x;
}

/// zlib's crc32 over any length (its length argument is 32 bits wide).
uint32_t crc_update(uint32_t crc, const unsigned char* p, size_t n) {
  uLong c = crc;
  while (n > 0) {
    auto chunk = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
    c = ::crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

std::string join(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}

/// The directory that holds `path` ("." for a bare name).
std::string parent_of(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  auto pos = path.rfind('/');
  if (pos == std::string::npos)
    return ".";
  return pos == 0 ? "/" : path.substr(0, pos);
}

std::string reason(int err) {
  return std::system_category().message(err);
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

/// Parses "ckpt-" followed by at least 10 decimal digits.
bool parse_checkpoint_name(const std::string& name, uint64_t& step) {
  auto n = std::strlen(ckpt_prefix);
  if (!starts_with(name, ckpt_prefix) || name.size() < n + ckpt_digits)
    return false;
  uint64_t x = 0;
  for (size_t i = n; i < name.size(); ++i) {
    auto c = name[i];
    if (c < '0' || c > '9')
      return false;
    auto d = static_cast<uint64_t>(c - '0');
    if (x > (std::numeric_limits<uint64_t>::max() - d) / 10)
      return false;
    x = x * 10 + d;
  }
  step = x;
  return true;
}

/// Whether `name` is a plain file name (no path, no hidden file, no odd
/// characters), so that a manifest cannot point outside its directory.
bool safe_file_name(const std::string& name) {
  if (name.empty() || name.size() > 255 || name[0] == '.')
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

// -- listing and removing -----------------------------------------------------

/// Names in directory `dir` except "." and "..". Sets `err` to errno and
/// returns nothing if it cannot be listed.
std::vector<std::string> list_dir(const std::string& dir, int& err) {
  std::vector<std::string> result;
  err = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    err = errno;
    return result;
  }
  for (;;) {
    errno = 0;
    auto* e = ::readdir(d);
    if (e == nullptr) {
      err = errno;
      break;
    }
    std::string name = e->d_name;
    if (name != "." && name != "..")
      result.push_back(std::move(name));
  }
  ::closedir(d);
  if (err != 0)
    result.clear();
  return result;
}

/// A complete checkpoint in a listing: its step and directory name.
struct listed_checkpoint {
  uint64_t step;
  std::string name;
};

/// The complete checkpoints among `names` in `root`, newest first.
std::vector<listed_checkpoint>
complete_checkpoints(const std::string& root,
                     const std::vector<std::string>& names) {
  std::vector<listed_checkpoint> result;
  for (auto& name : names) {
    uint64_t step = 0;
    if (!parse_checkpoint_name(name, step))
      continue;
    struct stat sb;
    auto manifest = join(join(root, name), manifest_name);
    if (::stat(manifest.c_str(), &sb) == 0 && S_ISREG(sb.st_mode))
      result.push_back({step, name});
  }
  // Ties (ckpt-0000000001 vs ckpt-00000000001) break by name for determinism.
  std::sort(result.begin(), result.end(), [](auto& x, auto& y) {
    return x.step != y.step ? x.step > y.step : x.name > y.name;
  });
  return result;
}

/// Removes `path` and everything below it; logs a warning if it cannot.
void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec)
    log::warn("checkpoint", -1, "cannot remove {}: {}", path, ec.message());
}

/// A fresh name ROOT/.tmp-ckpt-STEP-PID-N that does not exist yet.
std::string unique_tmp_path(const std::string& root, uint64_t step) {
  static std::atomic<uint64_t> counter{0};
  for (;;) {
    auto path = join(root, fmt::format("{}ckpt-{:0{}}-{}-{}", tmp_prefix, step,
                                       ckpt_digits, ::getpid(), counter++));
    // Any error other than "exists" is left for mkdir or rename to report.
    struct stat sb;
    if (::lstat(path.c_str(), &sb) != 0)
      return path;
  }
}

// -- writing ------------------------------------------------------------------

[[noreturn]] void io_fail(const std::string& path, const char* what, int err) {
  throw runtime_failure(fmt::format("{}: cannot {}: {}", path, what,
                                    reason(err)));
}

/// Writes one new file through a buffer, keeping its CRC-32 and size.
class file_writer {
public:
  explicit file_writer(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0)
      io_fail(path_, "create checkpoint file", errno);
    buf_.resize(buffer_size);
  }

  ~file_writer() {
    if (fd_ >= 0)
      ::close(fd_);
  }

  file_writer(const file_writer&) = delete;
  file_writer& operator=(const file_writer&) = delete;

  void put(const void* data, size_t n) {
    auto* p = static_cast<const unsigned char*>(data);
    while (n > 0) {
      if (used_ == buf_.size())
        flush();
      auto k = std::min(n, buf_.size() - used_);
      std::memcpy(buf_.data() + used_, p, k);
      used_ += k;
      p += k;
      n -= k;
    }
  }

  void put_u32(uint32_t x) {
    unsigned char b[4];
    put_le32(b, x);
    put(b, 4);
  }

  void put_u64(uint64_t x) {
    unsigned char b[8];
    put_le64(b, x);
    put(b, 8);
  }

  /// Appends `xs` as little-endian IEEE 754 binary32.
  void put_floats(const std::vector<float>& xs) {
    for (float x : xs) {
      if (buf_.size() - used_ < 4)
        flush();
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      put_le32(buf_.data() + used_, bits);
      used_ += 4;
    }
  }

  /// Writes what is buffered, fsyncs and closes the file.
  void finish() {
    flush();
    if (::fsync(fd_) != 0)
      io_fail(path_, "fsync checkpoint file", errno);
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      io_fail(path_, "close checkpoint file", errno);
  }

  uint32_t crc() const noexcept {
    return crc_;
  }

  uint64_t bytes() const noexcept {
    return bytes_;
  }

private:
  static constexpr size_t buffer_size = size_t{1} << 20;

  void flush() {
    crc_ = crc_update(crc_, buf_.data(), used_);
    const unsigned char* p = buf_.data();
    size_t n = used_;
    while (n > 0) {
      auto got = ::write(fd_, p, std::min(n, size_t{1} << 30));
      if (got < 0) {
        if (errno == EINTR)
          continue;
        io_fail(path_, "write checkpoint file", errno);
      }
      p += got;
      n -= static_cast<size_t>(got);
    }
    bytes_ += used_;
    used_ = 0;
  }

  std::string path_;
  int fd_ = -1;
  std::vector<unsigned char> buf_;
  size_t used_ = 0;
  uint32_t crc_ = 0;
  uint64_t bytes_ = 0;
};

/// fsyncs a directory, so that the names in it are durable.
void sync_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    io_fail(path, "open directory to fsync it", errno);
  // Some file systems cannot fsync a directory (EINVAL); nothing to do there.
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL)
    io_fail(path, "fsync directory", err);
}

/// Throws std::invalid_argument if `st` cannot be written as a valid
/// checkpoint.
void validate(const checkpoint_state& st, uint32_t keep) {
  auto bad = [](const std::string& what) {
    throw std::invalid_argument("write_checkpoint: " + what);
  };
  if (keep == 0)
    bad("keep must be at least 1");
  if (st.ps_clocks.size() != st.optimizer_steps.size())
    bad(fmt::format("{} ps_clocks but {} optimizer_steps", st.ps_clocks.size(),
                    st.optimizer_steps.size()));
  std::set<std::pair<std::string, uint32_t>> seen;
  for (auto& s : st.shards) {
    auto name = fmt::format("shard {} of variable \"{}\"", s.index, s.variable);
    if (!seen.emplace(s.variable, s.index).second)
      bad(name + " appears twice");
    if (s.row_end < s.row_begin)
      bad(fmt::format("{}: row_end {} < row_begin {}", name, s.row_end,
                      s.row_begin));
    auto rows = s.row_end - s.row_begin;
    if (rows != 0 && s.cols > std::numeric_limits<uint64_t>::max() / 4 / rows)
      bad(fmt::format("{}: {} rows x {} cols is too large", name, rows,
                      s.cols));
    if (s.values.size() != rows * s.cols)
      bad(fmt::format("{}: {} values, expected {} rows x {} cols = {}", name,
                      s.values.size(), rows, s.cols, rows * s.cols));
    if (s.slots.size() > checkpoint_max_slots)
      bad(fmt::format("{}: {} optimizer slots, at most {}", name,
                      s.slots.size(), checkpoint_max_slots));
    for (size_t j = 0; j < s.slots.size(); ++j)
      if (s.slots[j].size() != s.values.size())
        bad(fmt::format("{}: slot {} has {} floats, values have {}", name, j,
                        s.slots[j].size(), s.values.size()));
  }
}

/// The manifest without the shards' "bytes" and "crc32".
json manifest_of(const checkpoint_state& st) {
  json doc = json::object();
  doc["format"] = format_name;
  doc["version"] = checkpoint_format_version;
  doc["global_step"] = st.global_step;
  doc["epoch"] = st.epoch;
  doc["step_in_epoch"] = st.step_in_epoch;
  doc["workers"] = json::array();
  for (auto& w : st.workers)
    doc["workers"].push_back({{"epoch", w.epoch}, {"offset", w.offset}});
  doc["ps_clocks"] = st.ps_clocks;
  doc["optimizer_steps"] = st.optimizer_steps;
  doc["job"] = json::object();
  for (auto& [key, value] : st.job)
    doc["job"][key] = value;
  doc["shards"] = json::array();
  for (size_t i = 0; i < st.shards.size(); ++i) {
    auto& s = st.shards[i];
    doc["shards"].push_back({{"variable", s.variable},
                             {"index", s.index},
                             {"row_begin", s.row_begin},
                             {"row_end", s.row_end},
                             {"cols", s.cols},
                             {"ps", s.ps},
                             {"slots", s.slots.size()},
                             {"file", fmt::format("shard-{:04}.bin", i)}});
  }
  try {
    (void) doc.dump();
  } catch (const json::type_error& e) {
    // nlohmann refuses to write strings that are not valid UTF-8.
    throw std::invalid_argument(
      fmt::format("write_checkpoint: a variable name or job field is not "
                  "valid UTF-8 ({})",
                  e.what()));
  }
  return doc;
}

/// Writes one shard file; returns its size and CRC-32.
std::pair<uint64_t, uint32_t> write_shard(const std::string& path,
                                          const checkpoint_shard& s) {
  file_writer out{path};
  out.put(shard_magic, sizeof(shard_magic));
  out.put_u32(checkpoint_format_version);
  out.put_u32(static_cast<uint32_t>(1 + s.slots.size()));
  out.put_u64(s.values.size());
  for (auto& slot : s.slots)
    out.put_u64(slot.size());
  out.put_floats(s.values);
  for (auto& slot : s.slots)
    out.put_floats(slot);
  out.finish();
  return {out.bytes(), out.crc()};
}

/// Renames the finished temporary directory to `final_path`. An existing
/// checkpoint there is swapped into `tmp` (a ".tmp-" name, which pruning
/// removes), atomically where the file system can.
void install(const std::string& root, const std::string& tmp,
             const std::string& final_path, uint64_t step) {
  if (::rename(tmp.c_str(), final_path.c_str()) == 0)
    return;
  int err = errno;
  if (err != EEXIST && err != ENOTEMPTY)
    io_fail(final_path, "rename the new checkpoint into place", err);
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(),
                  RENAME_EXCHANGE)
      == 0)
    return;
  err = errno;
  if (err != EINVAL && err != ENOSYS)
    io_fail(final_path, "swap the new checkpoint into place", err);
#endif
  // No atomic exchange: move the old one aside first. A crash in between
  // leaves both under ".tmp-" names; the checkpoints of other steps survive.
  auto aside = unique_tmp_path(root, step);
  if (::rename(final_path.c_str(), aside.c_str()) != 0)
    io_fail(final_path, "move the old checkpoint of the same step aside",
            errno);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    err = errno;
    (void) ::rename(aside.c_str(), final_path.c_str());
    io_fail(final_path, "rename the new checkpoint into place", err);
  }
}

/// Removes ".tmp-" directories and all but the newest `keep` complete
/// checkpoints, never `written`. Best effort: failures are logged.
void prune(const std::string& root, const std::string& written, uint32_t keep,
           uint64_t step) {
  int err = 0;
  auto names = list_dir(root, err);
  if (err != 0) {
    log::warn("checkpoint", -1, "step {}: cannot list {} to remove old "
              "checkpoints: {}", step, root, reason(err));
    return;
  }
  for (auto& name : names)
    if (starts_with(name, tmp_prefix))
      remove_tree(join(root, name));
  uint32_t kept = 1; // `written`
  for (auto& ck : complete_checkpoints(root, names)) {
    if (ck.name == written)
      continue;
    if (kept < keep) {
      ++kept;
      continue;
    }
    // Renamed first so that a crash halfway never leaves a checkpoint with a
    // manifest but missing shard files.
    auto from = join(root, ck.name);
    auto to = unique_tmp_path(root, ck.step);
    if (::rename(from.c_str(), to.c_str()) != 0) {
      log::warn("checkpoint", -1, "step {}: cannot remove old checkpoint {}: "
                "{}", step, from, reason(errno));
      continue;
    }
    remove_tree(to);
  }
}

// -- reading ------------------------------------------------------------------

/// Reads the fields of a parsed manifest; every error names the manifest.
class manifest_reader {
public:
  explicit manifest_reader(std::string path) : path_(std::move(path)) {
    // nop
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw input_error(fmt::format("{}: {}", path_, what));
  }

  const json& field(const json& obj, const std::string& where,
                    const char* key) const {
    auto i = obj.find(key);
    if (i == obj.end())
      fail(fmt::format("field \"{}{}\" is missing", where, key));
    return *i;
  }

  uint64_t count(const json& obj, const std::string& where, const char* key,
                 uint64_t max = std::numeric_limits<uint64_t>::max()) const {
    return to_count(field(obj, where, key), where + key, max);
  }

  uint64_t to_count(const json& v, const std::string& name,
                    uint64_t max = std::numeric_limits<uint64_t>::max()) const {
    if (v.is_number_integer() && !v.is_number_unsigned())
      fail(fmt::format("field \"{}\" must not be negative, got {}", name,
                       v.get<int64_t>()));
    if (!v.is_number_unsigned())
      fail(fmt::format("field \"{}\" must be a whole number, got {}", name,
                       v.dump()));
    auto x = v.get<uint64_t>();
    if (x > max)
      fail(fmt::format("field \"{}\" is {}, at most {} allowed", name, x, max));
    return x;
  }

  std::string text(const json& obj, const std::string& where,
                   const char* key) const {
    auto& v = field(obj, where, key);
    if (!v.is_string())
      fail(fmt::format("field \"{}{}\" must be a string", where, key));
    return v.get<std::string>();
  }

  const json& array(const json& obj, const std::string& where,
                    const char* key) const {
    auto& v = field(obj, where, key);
    if (!v.is_array())
      fail(fmt::format("field \"{}{}\" must be an array", where, key));
    return v;
  }

  const json& object(const json& obj, const std::string& where,
                     const char* key) const {
    auto& v = field(obj, where, key);
    if (!v.is_object())
      fail(fmt::format("field \"{}{}\" must be an object", where, key));
    return v;
  }

  std::vector<uint64_t> counts(const json& obj, const char* key) const {
    std::vector<uint64_t> result;
    auto& xs = array(obj, "", key);
    for (size_t i = 0; i < xs.size(); ++i)
      result.push_back(to_count(xs[i], fmt::format("{}[{}]", key, i)));
    return result;
  }

private:
  std::string path_;
};

/// What the manifest says about one shard file.
struct shard_entry {
  std::string file;
  uint64_t bytes = 0;
  uint32_t crc = 0;
  uint64_t floats = 0; // per array
};

uint32_t parse_crc(const manifest_reader& r, const std::string& name,
                   const std::string& text) {
  uint32_t x = 0;
  bool ok = text.size() == 8;
  for (char c : text) {
    if (!ok)
      break;
    uint32_t d = 0;
    if (c >= '0' && c <= '9')
      d = static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<uint32_t>(c - 'a' + 10);
    else
      ok = false;
    x = (x << 4) | d;
  }
  if (!ok)
    r.fail(fmt::format("field \"{}\" must be 8 lowercase hex digits, got "
                       "\"{}\"",
                       name, text));
  return x;
}

/// Reads the whole shard file at `path` after checking that it has `bytes`
/// bytes, so that a corrupt manifest cannot make it allocate more.
std::vector<unsigned char> read_shard_file(const std::string& path,
                                           uint64_t bytes) {
  auto fail = [&](const std::string& what) {
    throw input_error(fmt::format("{}: {}", path, what));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(fmt::format("cannot open shard file: {}", reason(errno)));
  struct closer {
    int fd;
    ~closer() {
      ::close(fd);
    }
  } guard{fd};
  struct stat sb;
  if (::fstat(fd, &sb) != 0)
    fail(fmt::format("cannot stat shard file: {}", reason(errno)));
  if (!S_ISREG(sb.st_mode))
    fail("not a regular file");
  auto size = static_cast<uint64_t>(sb.st_size);
  if (size < bytes)
    fail(fmt::format("truncated: {} bytes, manifest says {}", size, bytes));
  if (size > bytes)
    fail(fmt::format("too long: {} bytes, manifest says {}", size, bytes));
  std::vector<unsigned char> buf(bytes);
  size_t done = 0;
  while (done < buf.size()) {
    auto got = ::read(fd, buf.data() + done,
                      std::min(buf.size() - done, size_t{1} << 30));
    if (got < 0) {
      if (errno == EINTR)
        continue;
      fail(fmt::format("cannot read shard file: {}", reason(errno)));
    }
    if (got == 0)
      fail(fmt::format("truncated while reading: {} bytes, manifest says {}",
                       done, bytes));
    done += static_cast<size_t>(got);
  }
  return buf;
}

/// Verifies and decodes one shard file into `s` (whose slot count is set).
void load_shard(const std::string& path, const shard_entry& e,
                checkpoint_shard& s) {
  auto fail = [&](const std::string& what) {
    throw input_error(fmt::format("{}: {}", path, what));
  };
  auto buf = read_shard_file(path, e.bytes);
  auto crc = crc_update(0, buf.data(), buf.size());
  if (crc != e.crc)
    fail(fmt::format("checksum mismatch (expected {:08x}, got {:08x})", e.crc,
                     crc));
  // The manifest's "bytes" was checked against rows, cols and slots, so the
  // header and the data fit in `buf`.
  const unsigned char* p = buf.data();
  if (std::memcmp(p, shard_magic, sizeof(shard_magic)) != 0)
    fail("bad magic: not an actorps shard file");
  auto version = get_le32(p + 8);
  if (version != checkpoint_format_version)
    fail(fmt::format("unsupported shard file version {} (this build reads "
                     "version {})",
                     version, checkpoint_format_version));
  auto arrays = get_le32(p + 12);
  auto expected_arrays = 1 + s.slots.size();
  if (arrays != expected_arrays)
    fail(fmt::format("header says {} arrays, manifest says {} (values and {} "
                     "slots)",
                     arrays, expected_arrays, s.slots.size()));
  p += shard_header_size;
  for (uint32_t j = 0; j < arrays; ++j, p += 8) {
    auto n = get_le64(p);
    if (n != e.floats)
      fail(fmt::format("array {} has {} floats, manifest says {} ({} rows x "
                       "{} cols)",
                       j, n, e.floats, s.row_end - s.row_begin, s.cols));
  }
  auto decode = [&](std::vector<float>& out) {
    out.resize(e.floats);
    for (auto& x : out) {
      auto bits = get_le32(p);
      std::memcpy(&x, &bits, 4);
      p += 4;
    }
  };
  decode(s.values);
  for (auto& slot : s.slots)
    decode(slot);
}

} // namespace

// -- public -------------------------------------------------------------------

std::string write_checkpoint(const std::string& root,
                             const checkpoint_state& st, uint32_t keep) {
  validate(st, keep);
  auto doc = manifest_of(st);
  if (::mkdir(root.c_str(), 0755) == 0)
    sync_dir(parent_of(root));
  else if (errno != EEXIST)
    io_fail(root, "create checkpoint directory", errno);
  auto final_name = fmt::format("{}{:0{}}", ckpt_prefix, st.global_step,
                                ckpt_digits);
  auto final_path = join(root, final_name);
  auto tmp = unique_tmp_path(root, st.global_step);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    io_fail(tmp, "create temporary checkpoint directory", errno);
  try {
    auto& shards = doc["shards"];
    for (size_t i = 0; i < st.shards.size(); ++i) {
      auto& entry = shards[i];
      auto [bytes, crc] = write_shard(
        join(tmp, entry["file"].get<std::string>()), st.shards[i]);
      entry["bytes"] = bytes;
      entry["crc32"] = fmt::format("{:08x}", crc);
    }
    auto text = doc.dump(2) + "\n";
    file_writer manifest{join(tmp, manifest_name)};
    manifest.put(text.data(), text.size());
    manifest.finish();
    sync_dir(tmp);
    install(root, tmp, final_path, st.global_step);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    throw;
  }
  sync_dir(root);
  prune(root, final_name, keep, st.global_step);
  return final_path;
}

checkpoint_state read_checkpoint(const std::string& dir) {
  auto path = join(dir, manifest_name);
  auto text = read_text_file(path, "checkpoint manifest");
  manifest_reader r{path};
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, ..."
    std::string msg = e.what();
    auto pos = msg.find("] ");
    r.fail(fmt::format("malformed JSON: {}",
                       pos == std::string::npos ? msg : msg.substr(pos + 2)));
  }
  if (!doc.is_object())
    r.fail("must be a JSON object");
  auto& format = r.field(doc, "", "format");
  if (!format.is_string() || format.get<std::string>() != format_name)
    r.fail(fmt::format("not an actorps checkpoint (\"format\" is {}, expected "
                       "\"{}\")",
                       format.dump(), format_name));
  auto version = r.count(doc, "", "version");
  if (version != checkpoint_format_version)
    r.fail(fmt::format("unsupported checkpoint version {} (this build reads "
                       "version {})",
                       version, checkpoint_format_version));
  checkpoint_state st;
  st.global_step = r.count(doc, "", "global_step");
  st.epoch = static_cast<uint32_t>(
    r.count(doc, "", "epoch", std::numeric_limits<uint32_t>::max()));
  st.step_in_epoch = r.count(doc, "", "step_in_epoch");
  auto& workers = r.array(doc, "", "workers");
  for (size_t i = 0; i < workers.size(); ++i) {
    auto where = fmt::format("workers[{}]", i);
    if (!workers[i].is_object())
      r.fail(fmt::format("field \"{}\" must be an object", where));
    where += ".";
    data_position pos;
    pos.epoch = r.count(workers[i], where, "epoch");
    pos.offset = r.count(workers[i], where, "offset");
    st.workers.push_back(pos);
  }
  st.ps_clocks = r.counts(doc, "ps_clocks");
  st.optimizer_steps = r.counts(doc, "optimizer_steps");
  if (st.ps_clocks.size() != st.optimizer_steps.size())
    r.fail(fmt::format("{} ps_clocks but {} optimizer_steps",
                       st.ps_clocks.size(), st.optimizer_steps.size()));
  for (auto& [key, value] : r.object(doc, "", "job").items()) {
    if (!value.is_string())
      r.fail(fmt::format("field \"job.{}\" must be a string", key));
    st.job.emplace(key, value.get<std::string>());
  }
  // The whole manifest is checked before any shard file is opened.
  auto& shards = r.array(doc, "", "shards");
  std::vector<shard_entry> entries;
  std::set<std::string> files;
  std::set<std::pair<std::string, uint32_t>> ids;
  constexpr auto u32_max = std::numeric_limits<uint32_t>::max();
  constexpr auto u64_max = std::numeric_limits<uint64_t>::max();
  for (size_t i = 0; i < shards.size(); ++i) {
    auto name = fmt::format("shards[{}]", i);
    auto& js = shards[i];
    if (!js.is_object())
      r.fail(fmt::format("field \"{}\" must be an object", name));
    auto where = name + ".";
    checkpoint_shard s;
    shard_entry e;
    s.variable = r.text(js, where, "variable");
    s.index = static_cast<uint32_t>(r.count(js, where, "index", u32_max));
    s.row_begin = r.count(js, where, "row_begin");
    s.row_end = r.count(js, where, "row_end");
    s.cols = r.count(js, where, "cols");
    s.ps = static_cast<uint32_t>(r.count(js, where, "ps", u32_max));
    s.slots.resize(r.count(js, where, "slots", checkpoint_max_slots));
    e.file = r.text(js, where, "file");
    e.bytes = r.count(js, where, "bytes");
    e.crc = parse_crc(r, where + "crc32", r.text(js, where, "crc32"));
    if (!safe_file_name(e.file))
      r.fail(fmt::format("field \"{}file\" is not a plain file name: \"{}\"",
                         where, e.file));
    if (!files.insert(e.file).second)
      r.fail(fmt::format("{} names file \"{}\" a second time", name, e.file));
    if (!ids.emplace(s.variable, s.index).second)
      r.fail(fmt::format("{}: shard {} of variable \"{}\" appears twice", name,
                         s.index, s.variable));
    if (s.row_end < s.row_begin)
      r.fail(fmt::format("{}: row_end {} < row_begin {}", name, s.row_end,
                         s.row_begin));
    // bytes = 16 + arrays * (8 + 4 * rows * cols), without overflow.
    auto rows = s.row_end - s.row_begin;
    uint64_t arrays = 1 + s.slots.size();
    uint64_t limit = (u64_max - shard_header_size) / arrays / 4 - 2;
    if (rows != 0 && s.cols > limit / rows)
      r.fail(fmt::format("{}: {} rows x {} cols is too large", name, rows,
                         s.cols));
    e.floats = rows * s.cols;
    auto expected = shard_header_size + arrays * (8 + 4 * e.floats);
    if (e.bytes != expected)
      r.fail(fmt::format("{} ({}): \"bytes\" is {}, but {} rows x {} cols "
                         "with {} slots make {} bytes",
                         name, e.file, e.bytes, rows, s.cols, s.slots.size(),
                         expected));
    st.shards.push_back(std::move(s));
    entries.push_back(std::move(e));
  }
  for (size_t i = 0; i < entries.size(); ++i)
    load_shard(join(dir, entries[i].file), entries[i], st.shards[i]);
  return st;
}

std::string latest_checkpoint(const std::string& root) {
  int err = 0;
  auto names = list_dir(root, err);
  if (err == ENOENT)
    return "";
  if (err != 0)
    throw input_error(fmt::format("{}: cannot list checkpoint directory: {}",
                                  root, reason(err)));
  auto found = complete_checkpoints(root, names);
  return found.empty() ? "" : join(root, found.front().name);
}

} // namespace actorps
