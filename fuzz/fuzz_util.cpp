#include "fuzz/fuzz_util.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <unistd.h>

namespace actorps::fuzz {

namespace fs = std::filesystem;

void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// -- input ----------------------------------------------------------------------

uint8_t input::u8() {
  return pos_ < size_ ? data_[pos_++] : 0;
}

uint32_t input::u32() {
  uint32_t x = 0;
  for (int i = 0; i < 4; ++i)
    x |= uint32_t{u8()} << (8 * i);
  return x;
}

std::string input::bytes(size_t n) {
  n = std::min(n, left());
  std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
  pos_ += n;
  return out;
}

std::string input::sized(bool wide) {
  size_t n = u8();
  if (wide)
    n |= size_t{u8()} << 8;
  return bytes(n);
}

std::string input::rest() {
  return bytes(left());
}

// -- scratch files ----------------------------------------------------------------

namespace {

/// Removes the scratch directory at exit.
struct scratch_root {
  fs::path path;

  scratch_root() {
    fs::path base = fs::is_directory("/dev/shm") ? fs::path{"/dev/shm"}
                                                 : fs::temp_directory_path();
    path = base / ("actorps-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(path);
  }

  ~scratch_root() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

const fs::path& root() {
  static scratch_root dir;
  return dir.path;
}

} // namespace

std::string scratch_path(const std::string& name) {
  return (root() / name).string();
}

std::string scratch_dir(const std::string& name) {
  auto p = root() / name;
  std::error_code ec;
  fs::remove_all(p, ec);
  fs::create_directories(p, ec);
  if (ec)
    fail("cannot create the scratch directory " + p.string());
  return p.string();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out)
    fail("cannot write the scratch file " + path);
}

} // namespace actorps::fuzz
