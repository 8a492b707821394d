#pragma once

// The file layer of checkpoints (core/checkpoint.hpp): paths, listing,
// buffered writes with a running CRC-32, fsync, atomic install and pruning.
// It knows directory names ("ckpt-NNNNNNNNNN", ".tmp-") and that a complete
// checkpoint has a manifest.json; it knows nothing of what files contain.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace actorps::detail {

// -- names --------------------------------------------------------------------

constexpr const char* checkpoint_manifest_name = "manifest.json";
constexpr const char* checkpoint_tmp_prefix = ".tmp-";
constexpr const char* checkpoint_dir_prefix = "ckpt-";
constexpr size_t checkpoint_dir_digits = 10;

/// `dir` + "/" + `name` (no second '/' when `dir` ends in one).
std::string join_path(const std::string& dir, const std::string& name);

/// "ckpt-" + `step`, zero-padded to checkpoint_dir_digits digits.
std::string checkpoint_dir_name(uint64_t step);

/// Whether `name` is a plain file name (no path, no hidden file, only
/// [A-Za-z0-9._-], at most 255 bytes), so that a manifest cannot point
/// outside its directory.
bool safe_file_name(const std::string& name);

/// The system's text for errno value `err`.
std::string errno_text(int err);

/// Throws runtime_failure "PATH: cannot WHAT: REASON" for errno value `err`.
[[noreturn]] void io_fail(const std::string& path, const char* what, int err);

// -- checksums ----------------------------------------------------------------

/// Continues zlib's CRC-32 `crc` over n bytes at `p` (any n; zlib's length
/// argument is only 32 bits wide). Start with crc = 0.
uint32_t crc32_update(uint32_t crc, const unsigned char* p, size_t n);

// -- writing ------------------------------------------------------------------

/// Writes one new file (O_EXCL: it must not exist) through a 1 MiB buffer,
/// keeping the CRC-32 and the size of what was written.
/// @throws runtime_failure naming the path on any I/O error; the file is
///         then closed and left for the caller's cleanup.
class file_writer {
public:
  explicit file_writer(std::string path);

  ~file_writer();

  file_writer(const file_writer&) = delete;
  file_writer& operator=(const file_writer&) = delete;

  /// Appends n bytes.
  void put(const void* data, size_t n);

  /// Writes what is buffered, fsyncs and closes the file.
  void finish();

  /// CRC-32 of the bytes written so far (complete after finish()).
  uint32_t crc() const noexcept {
    return crc_;
  }

  /// Bytes written so far (complete after finish()).
  uint64_t bytes() const noexcept {
    return bytes_;
  }

private:
  void flush();

  std::string path_;
  int fd_ = -1;
  std::vector<unsigned char> buf_;
  size_t used_ = 0;
  uint32_t crc_ = 0;
  uint64_t bytes_ = 0;
};

/// fsyncs a directory, so that the names in it are durable. File systems that
/// cannot fsync a directory (EINVAL) are accepted.
/// @throws runtime_failure naming the path.
void sync_dir(const std::string& path);

/// Creates directory `root` if missing, with its missing parents, fsyncing
/// the parent of each directory it creates.
/// @throws runtime_failure naming `root` and the system's reason.
void make_root(const std::string& root);

/// make_root, then checks that `root` is a directory a checkpoint can be
/// written into (creates and removes a temporary directory in it).
/// @throws runtime_failure naming `root` and the system's reason.
void check_root_writable(const std::string& root);

/// Creates and returns a fresh directory ROOT/.tmp-ckpt-STEP-PID-N.
/// @throws runtime_failure naming it.
std::string make_tmp_dir(const std::string& root, uint64_t step);

/// Renames the finished temporary directory `tmp` to `final_path`. An existing
/// checkpoint there is swapped into `tmp` (a ".tmp-" name, which prune()
/// removes), atomically where the file system can (renameat2 with
/// RENAME_EXCHANGE), else by moving it aside first.
/// @throws runtime_failure naming `final_path`; every checkpoint that existed
///         before is then still in place.
void install(const std::string& root, const std::string& tmp,
             const std::string& final_path, uint64_t step);

/// Removes every ".tmp-" directory in `root` (left by crashed writers).
/// Best effort: what cannot be removed is logged as a warning and left
/// there. Returns false, logged, if `root` cannot be listed.
bool remove_tmp_dirs(const std::string& root, uint64_t step);

/// Removes the checkpoint `name` in `root`: renamed to a ".tmp-" name first,
/// so that a crash halfway never leaves a checkpoint with a manifest but
/// missing shard files. Best effort, logged as a warning (`step`: the
/// checkpoint being written, for the log).
void remove_checkpoint(const std::string& root, const std::string& name,
                       uint64_t step);

/// The directory that holds `path` ("." for a bare name).
std::string parent_of(std::string path);

/// The last component of `path` ("ckpt-0000000010" for "ck/ckpt-0000000010/").
std::string base_name(std::string path);

/// Removes `path` and everything below it, ignoring errors.
void remove_tree_quietly(const std::string& path);

// -- reading ------------------------------------------------------------------

/// A complete checkpoint in a listing: its step and directory name.
struct listed_checkpoint {
  uint64_t step;
  std::string name;
};

/// The complete checkpoints in `root` (directories named "ckpt-" + at least
/// 10 digits holding a regular manifest.json), newest first; equal steps
/// break by name. Sets `err` to errno and returns nothing if `root` cannot be
/// listed.
std::vector<listed_checkpoint> list_checkpoints(const std::string& root,
                                                int& err);

/// Reads one file of a known size front to back through a 1 MiB buffer,
/// keeping the CRC-32 of what it has read, so that a file of any size costs
/// the buffer and nothing more.
/// Errors: input_error "PATH: WHAT" for a file that is missing, not regular,
/// of another size than expected ("truncated: N bytes, manifest says M",
/// "too long: ..."), or unreadable.
class file_reader {
public:
  /// The most bytes one take() returns.
  static constexpr size_t chunk_size = size_t{1} << 20;

  /// Opens `path` and checks that it is a regular file of `bytes` bytes.
  file_reader(std::string path, uint64_t bytes);

  ~file_reader();

  file_reader(const file_reader&) = delete;
  file_reader& operator=(const file_reader&) = delete;

  /// Returns the next n bytes (n <= chunk_size), valid until the next call.
  /// @throws input_error if the file ends first (it shrank while read).
  const unsigned char* take(size_t n);

  /// Reads the rest of the file, so that crc() covers all of it.
  void skip_rest();

  /// Bytes not yet returned by take().
  uint64_t remaining() const noexcept {
    return left_ + (end_ - pos_);
  }

  /// CRC-32 of the bytes read from the file so far.
  uint32_t crc() const noexcept {
    return crc_;
  }

  /// Throws input_error "PATH: WHAT".
  [[noreturn]] void fail(const std::string& what) const;

private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t left_ = 0; // bytes still in the file, not yet in buf_
  std::vector<unsigned char> buf_;
  size_t pos_ = 0;
  size_t end_ = 0;
  uint32_t crc_ = 0;
};

} // namespace actorps::detail
