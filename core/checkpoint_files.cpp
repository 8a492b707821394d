#include "core/checkpoint_files.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <fmt/format.h>
#include <zlib.h>

#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps::detail {

namespace {

bool starts_with(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

/// Parses "ckpt-" followed by at least 10 decimal digits.
bool parse_checkpoint_name(const std::string& name, uint64_t& step) {
  auto n = std::strlen(checkpoint_dir_prefix);
  if (!starts_with(name, checkpoint_dir_prefix)
      || name.size() < n + checkpoint_dir_digits)
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
    auto manifest = join_path(join_path(root, name), checkpoint_manifest_name);
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
    auto path = join_path(root, fmt::format("{}ckpt-{:0{}}-{}-{}",
                                            checkpoint_tmp_prefix, step,
                                            checkpoint_dir_digits, ::getpid(),
                                            counter++));
    // Any error other than "exists" is left for mkdir or rename to report.
    struct stat sb;
    if (::lstat(path.c_str(), &sb) != 0)
      return path;
  }
}

} // namespace

// -- names --------------------------------------------------------------------

std::string parent_of(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  auto pos = path.rfind('/');
  if (pos == std::string::npos)
    return ".";
  return pos == 0 ? "/" : path.substr(0, pos);
}

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  auto pos = path.rfind('/');
  return pos == std::string::npos ? path : path.substr(pos + 1);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}

std::string checkpoint_dir_name(uint64_t step) {
  return fmt::format("{}{:0{}}", checkpoint_dir_prefix, step,
                     checkpoint_dir_digits);
}

bool safe_file_name(const std::string& name) {
  if (name.empty() || name.size() > 255 || name[0] == '.')
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

std::string errno_text(int err) {
  return std::system_category().message(err);
}

void io_fail(const std::string& path, const char* what, int err) {
  throw runtime_failure(fmt::format("{}: cannot {}: {}", path, what,
                                    errno_text(err)));
}

// -- checksums ----------------------------------------------------------------

uint32_t crc32_update(uint32_t crc, const unsigned char* p, size_t n) {
  uLong c = crc;
  while (n > 0) {
    auto chunk = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
    c = ::crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

// -- writing ------------------------------------------------------------------

file_writer::file_writer(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0)
    io_fail(path_, "create checkpoint file", errno);
  buf_.resize(size_t{1} << 20);
}

file_writer::~file_writer() {
  if (fd_ >= 0)
    ::close(fd_);
}

void file_writer::put(const void* data, size_t n) {
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

void file_writer::finish() {
  flush();
  if (::fsync(fd_) != 0)
    io_fail(path_, "fsync checkpoint file", errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    io_fail(path_, "close checkpoint file", errno);
}

void file_writer::flush() {
  crc_ = crc32_update(crc_, buf_.data(), used_);
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

void make_root(const std::string& root) {
  if (::mkdir(root.c_str(), 0755) == 0) {
    sync_dir(parent_of(root));
    return;
  }
  if (errno == EEXIST)
    return;
  if (errno != ENOENT)
    io_fail(root, "create checkpoint directory", errno);
  // A parent is missing: create it first, as TensorFlow's checkpoint
  // manager does (tf.io.gfile.makedirs), each level made durable in its own.
  auto parent = parent_of(root);
  if (parent == root || parent == "." || parent == "/")
    io_fail(root, "create checkpoint directory", ENOENT);
  make_root(parent);
  if (::mkdir(root.c_str(), 0755) == 0)
    sync_dir(parent);
  else if (errno != EEXIST)
    io_fail(root, "create checkpoint directory", errno);
}

void check_root_writable(const std::string& root) {
  make_root(root);
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0)
    io_fail(root, "read checkpoint directory", errno);
  if (!S_ISDIR(st.st_mode))
    io_fail(root, "use checkpoint directory", ENOTDIR);
  auto probe = unique_tmp_path(root, 0);
  if (::mkdir(probe.c_str(), 0755) != 0)
    io_fail(root, "write into checkpoint directory", errno);
  ::rmdir(probe.c_str());
}

std::string make_tmp_dir(const std::string& root, uint64_t step) {
  auto tmp = unique_tmp_path(root, step);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    io_fail(tmp, "create temporary checkpoint directory", errno);
  return tmp;
}

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

bool remove_tmp_dirs(const std::string& root, uint64_t step) {
  int err = 0;
  auto names = list_dir(root, err);
  if (err != 0) {
    log::warn("checkpoint", -1, "step {}: cannot list {} to remove old "
              "checkpoints: {}", step, root, errno_text(err));
    return false;
  }
  for (auto& name : names)
    if (starts_with(name, checkpoint_tmp_prefix))
      remove_tree(join_path(root, name));
  return true;
}

void remove_checkpoint(const std::string& root, const std::string& name,
                       uint64_t step) {
  uint64_t its_step = 0;
  (void) parse_checkpoint_name(name, its_step);
  auto from = join_path(root, name);
  auto to = unique_tmp_path(root, its_step);
  if (::rename(from.c_str(), to.c_str()) != 0) {
    log::warn("checkpoint", -1, "step {}: cannot remove old checkpoint {}: "
              "{}", step, from, errno_text(errno));
    return;
  }
  remove_tree(to);
}

void remove_tree_quietly(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

// -- reading ------------------------------------------------------------------

std::vector<listed_checkpoint> list_checkpoints(const std::string& root,
                                                int& err) {
  auto names = list_dir(root, err);
  if (err != 0)
    return {};
  return complete_checkpoints(root, names);
}

file_reader::file_reader(std::string path, uint64_t bytes)
  : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0)
    fail(fmt::format("cannot open shard file: {}", errno_text(errno)));
  struct stat sb;
  if (::fstat(fd_, &sb) != 0)
    fail(fmt::format("cannot stat shard file: {}", errno_text(errno)));
  if (!S_ISREG(sb.st_mode))
    fail("not a regular file");
  size_ = static_cast<uint64_t>(sb.st_size);
  if (size_ < bytes)
    fail(fmt::format("truncated: {} bytes, manifest says {}", size_, bytes));
  if (size_ > bytes)
    fail(fmt::format("too long: {} bytes, manifest says {}", size_, bytes));
  left_ = size_;
  buf_.resize(std::min<uint64_t>(chunk_size, size_));
}

file_reader::~file_reader() {
  if (fd_ >= 0)
    ::close(fd_);
}

const unsigned char* file_reader::take(size_t n) {
  if (end_ - pos_ < n) {
    if (n > buf_.size())
      fail(fmt::format("truncated while reading: {} bytes, manifest says {}",
                       size_ - remaining(), size_));
    // Keep the unread tail, then fill the buffer up.
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
    while (end_ < n) {
      auto want = std::min<uint64_t>(buf_.size() - end_, left_);
      auto got = want == 0 ? 0 : ::read(fd_, buf_.data() + end_, want);
      if (got < 0) {
        if (errno == EINTR)
          continue;
        fail(fmt::format("cannot read shard file: {}", errno_text(errno)));
      }
      if (got == 0)
        fail(fmt::format("truncated while reading: {} bytes, manifest says {}",
                         size_ - left_, size_));
      crc_ = crc32_update(crc_, buf_.data() + end_, static_cast<size_t>(got));
      end_ += static_cast<size_t>(got);
      left_ -= static_cast<uint64_t>(got);
    }
  }
  auto* p = buf_.data() + pos_;
  pos_ += n;
  return p;
}

void file_reader::skip_rest() {
  pos_ = end_;
  while (left_ > 0)
    take(std::min<uint64_t>(left_, buf_.size()));
}

void file_reader::fail(const std::string& what) const {
  throw input_error(fmt::format("{}: {}", path_, what));
}

} // namespace actorps::detail
