#pragma once

// What the fuzz targets in fuzz/ share: reading the fuzzer's bytes, scratch
// files for parsers that read from a path, and checks of the properties a
// target asserts (a failed check aborts, which libFuzzer reports as a crash
// and the replay driver as a failed test).
//
// Every target defines `LLVMFuzzerTestOneInput(data, size)`. The fuzz build
// (CMake option ACTORPS_FUZZ, clang) links it with libFuzzer; the normal
// build compiles the same file under another name into actorps_fuzz_replay
// (fuzz/replay_main.cpp), which feeds it the corpus in fuzz/corpus/.

#include <cstddef>
#include <cstdint>
#include <string>

namespace actorps::fuzz {

/// Stops the process after printing "fuzz check failed: WHAT" to stderr.
/// Called when a property the target checks does not hold (a round trip that
/// changes a value, an exception other than the documented one).
[[noreturn]] void fail(const std::string& what);

/// fail(what) unless `ok`.
inline void check(bool ok, const char* what) {
  if (!ok)
    fail(what);
}

/// Bytes taken from the front of the fuzzer's input, for targets whose input
/// is a few parameters followed by a payload. Taking past the end gives 0s
/// (and empty payloads), so every input is valid for the harness.
class input {
public:
  input(const uint8_t* data, size_t size) : data_(data), size_(size) {
    // nop
  }

  /// The next byte, or 0 at the end.
  uint8_t u8();

  /// The next 4 bytes, little-endian (missing bytes are 0).
  uint32_t u32();

  /// The next `n` bytes (fewer at the end) as a string.
  std::string bytes(size_t n);

  /// Up to the next `n` bytes, where n is the next byte or, with `wide`, the
  /// next 2 bytes (little-endian).
  std::string sized(bool wide = false);

  /// Everything not taken yet.
  std::string rest();

  /// Bytes not taken yet.
  size_t left() const {
    return size_ - pos_;
  }

private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// The input as a string (it may hold any byte, NUL included).
inline std::string as_string(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// The path of `name` in this process's scratch directory
/// (/dev/shm/actorps-fuzz-PID, or the system's temporary directory when there
/// is no /dev/shm), created on first use and removed at exit.
std::string scratch_path(const std::string& name);

/// A fresh, empty directory `name` in the scratch directory (an old one of
/// that name is removed first).
std::string scratch_dir(const std::string& name);

/// Writes `bytes` to `path`, replacing the file. Aborts if it cannot (the
/// harness's own failure, not the parser's).
void write_file(const std::string& path, const std::string& bytes);

} // namespace actorps::fuzz
