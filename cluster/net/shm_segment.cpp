#include "cluster/net/shm_segment.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

/// One ring's counters and sleep flags, each on its own cache line.
struct shm_segment::control {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint32_t> reader_sleeps;
  alignas(64) std::atomic<uint32_t> writer_sleeps;
};

namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "shared-memory counters must be lock-free (address-free)");
static_assert(std::atomic<uint32_t>::is_always_lock_free);

/// The file: a header page (magic, ring size, nonce, the two rings'
/// controls), then ring 0's bytes, then ring 1's.
constexpr char segment_magic[8] = {'A', 'P', 'S', 'S', 'H', 'M', '0', '1'};
constexpr size_t header_bytes = 4096;
constexpr size_t nonce_at = 16;
constexpr size_t control_at = 64;

size_t file_bytes(size_t ring_bytes) {
  return header_bytes + 2 * ring_bytes;
}

void check_ring_bytes(size_t n) {
  if (n < 4096 || n > shm_segment::max_ring_bytes || (n & (n - 1)) != 0)
    throw std::invalid_argument(fmt::format(
      "shared-memory ring of {} bytes: must be a power of two from 4 KiB "
      "to 256 MiB",
      n));
}

std::string memfd_name(const shm_segment::nonce_type& nonce) {
  std::string s = "actorps-data-";
  for (auto b : nonce)
    s += fmt::format("{:02x}", b);
  return s;
}

/// Copies `n` bytes to ring position `pos` (wrapping) / from it.
void copy_in(char* ring, size_t size, uint64_t pos, const char* p, size_t n) {
  auto at = static_cast<size_t>(pos & (size - 1));
  auto first = std::min(n, size - at);
  std::memcpy(ring + at, p, first);
  std::memcpy(ring, p + first, n - first);
}

void copy_out(const char* ring, size_t size, uint64_t pos, char* p,
              size_t n) {
  auto at = static_cast<size_t>(pos & (size - 1));
  auto first = std::min(n, size - at);
  std::memcpy(p, ring + at, first);
  std::memcpy(p + first, ring, n - first);
}

/// The effective uid of process `pid`, from the Uid line of
/// /proc/PID/status (real, effective, saved, file system): not the owner
/// of /proc/PID, which is root for a process that is not dumpable (one
/// that changed its uid, for one).
std::optional<uid_t> process_uid(uint32_t pid) {
  std::ifstream in{fmt::format("/proc/{}/status", pid)};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Uid:", 0) == 0) {
      std::istringstream fields{line.substr(4)};
      unsigned long real = 0;
      unsigned long effective = 0;
      if (fields >> real >> effective)
        return static_cast<uid_t>(effective);
      return std::nullopt;
    }
  return std::nullopt;
}

} // namespace

size_t shm_segment::ring_bytes_for(uint64_t frame_bytes) {
  if (frame_bytes == 0)
    return default_ring_bytes;
  size_t n = size_t{64} << 10;
  while (n < 2 * frame_bytes && n < max_ring_bytes)
    n *= 2;
  return n;
}

std::unique_ptr<shm_segment> shm_segment::create(size_t ring_bytes) {
  check_ring_bytes(ring_bytes);
  std::unique_ptr<shm_segment> s{new shm_segment};
  std::random_device rd;
  for (auto& b : s->nonce_)
    b = static_cast<uint8_t>(rd());
  int fd = memfd_create(memfd_name(s->nonce_).c_str(),
                        MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    throw runtime_failure(
      fmt::format("shared memory: memfd_create: {}", std::strerror(errno)));
  if (ftruncate(fd, static_cast<off_t>(file_bytes(ring_bytes))) != 0
      || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
           != 0) {
    auto e = errno;
    ::close(fd);
    throw runtime_failure(
      fmt::format("shared memory: sizing the file: {}", std::strerror(e)));
  }
  s->fd_ = fd;
  s->map(fd, ring_bytes, true);
  return s;
}

std::unique_ptr<shm_segment> shm_segment::open(uint32_t pid, int32_t fd,
                                               size_t ring_bytes,
                                               const nonce_type& nonce) {
  try {
    check_ring_bytes(ring_bytes);
  } catch (const std::invalid_argument& e) {
    throw input_error(e.what());
  }
  if (fd < 0)
    throw input_error(fmt::format("shared memory: descriptor {}", fd));
  // Only a process of this one's user: anything else is declined before
  // its file is touched (root could open another user's memfd).
  if (auto uid = process_uid(pid); !uid || *uid != geteuid())
    throw input_error(
      uid ? fmt::format("shared memory: the peer runs as another user (uid "
                        "{}, this node {})",
                        *uid, geteuid())
          : fmt::format("shared memory: no process {} here", pid));
  // A peer in another network namespace is on another host as far as the
  // job is concerned (scripts/netns-cluster.sh emulates hosts so, with
  // links of their own bandwidth): its frames go over the network.
  struct stat mine {};
  struct stat theirs {};
  auto ns = fmt::format("/proc/{}/ns/net", pid);
  if (stat("/proc/self/ns/net", &mine) != 0 || stat(ns.c_str(), &theirs) != 0)
    throw input_error(fmt::format("shared memory: {}: {}", ns,
                                  std::strerror(errno)));
  if (mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev)
    throw input_error("shared memory: the peer is in another network "
                      "namespace");
  // The offer must name the creator's memfd: anything else (the pid is
  // another process here) is not opened at all.
  auto path = fmt::format("/proc/{}/fd/{}", pid, fd);
  char target[256];
  auto len = readlink(path.c_str(), target, sizeof(target) - 1);
  if (len < 0)
    throw input_error(fmt::format("shared memory: {}: {}", path,
                                  std::strerror(errno)));
  target[len] = '\0';
  auto want = "/memfd:" + memfd_name(nonce) + " (deleted)";
  if (want != target)
    throw input_error(fmt::format("shared memory: {} is \"{}\", not the "
                                  "peer's segment",
                                  path, target));
  int file = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (file < 0)
    throw input_error(fmt::format("shared memory: opening {}: {}", path,
                                  std::strerror(errno)));
  std::unique_ptr<shm_segment> s{new shm_segment};
  struct stat sb {};
  auto seals = fcntl(file, F_GET_SEALS);
  auto need = F_SEAL_SHRINK | F_SEAL_GROW;
  if (fstat(file, &sb) != 0
      || static_cast<size_t>(sb.st_size) != file_bytes(ring_bytes)
      || seals < 0 || (seals & need) != need) {
    ::close(file);
    throw input_error(fmt::format("shared memory: {}: {} bytes and seals "
                                  "{:#x}, expected {} bytes, sealed",
                                  path, static_cast<long long>(sb.st_size),
                                  seals, file_bytes(ring_bytes)));
  }
  try {
    s->map(file, ring_bytes, false);
  } catch (...) {
    ::close(file);
    throw;
  }
  ::close(file);
  if (std::memcmp(s->base_, segment_magic, sizeof(segment_magic)) != 0
      || std::memcmp(s->base_ + nonce_at, nonce.data(), nonce.size()) != 0)
    throw input_error(fmt::format("shared memory: {}: not the segment "
                                  "offered (magic or nonce differ)",
                                  path));
  s->nonce_ = nonce;
  return s;
}

void shm_segment::map(int fd, size_t ring_bytes, bool creator) {
  auto bytes = file_bytes(ring_bytes);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    throw runtime_failure(
      fmt::format("shared memory: mmap: {}", std::strerror(errno)));
  base_ = static_cast<char*>(p);
  mapped_ = bytes;
  ring_bytes_ = ring_bytes;
  auto* c0 = reinterpret_cast<control*>(base_ + control_at);
  auto* c1 = c0 + 1;
  static_assert(control_at + 2 * sizeof(control) <= header_bytes);
  if (creator) {
    // A fresh file reads as zeros; the counters are constructed in it.
    new (c0) control{};
    new (c1) control{};
    std::memcpy(base_ + nonce_at, nonce_.data(), nonce_.size());
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::memcpy(base_, segment_magic, sizeof(segment_magic));
  }
  auto* d0 = base_ + header_bytes;
  auto* d1 = d0 + ring_bytes;
  out_ = creator ? c0 : c1;
  in_ = creator ? c1 : c0;
  out_data_ = creator ? d0 : d1;
  in_data_ = creator ? d1 : d0;
}

shm_segment::~shm_segment() {
  close_fd();
  if (base_ != nullptr)
    munmap(base_, mapped_);
}

void shm_segment::close_fd() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

size_t shm_segment::write_some(const char* p, size_t n) {
  auto head = out_->head.load(std::memory_order_relaxed);
  auto tail = out_->tail.load(std::memory_order_acquire);
  auto used = head - tail;
  if (used > ring_bytes_)
    throw input_error(fmt::format("shared memory: the peer read {} bytes "
                                  "more than were written",
                                  tail - head));
  auto k = std::min(n, ring_bytes_ - static_cast<size_t>(used));
  if (k == 0)
    return 0;
  copy_in(out_data_, ring_bytes_, head, p, k);
  out_->head.store(head + k, std::memory_order_seq_cst);
  return k;
}

bool shm_segment::reader_needs_wake() {
  return out_->reader_sleeps.load(std::memory_order_seq_cst) != 0
         && out_->reader_sleeps.exchange(0, std::memory_order_seq_cst) != 0;
}

bool shm_segment::writer_may_sleep() {
  out_->writer_sleeps.store(1, std::memory_order_seq_cst);
  auto head = out_->head.load(std::memory_order_relaxed);
  auto tail = out_->tail.load(std::memory_order_seq_cst);
  if (head - tail < ring_bytes_) {
    out_->writer_sleeps.store(0, std::memory_order_relaxed);
    return false;
  }
  return true;
}

size_t shm_segment::read_some(char* p, size_t n) {
  auto tail = in_->tail.load(std::memory_order_relaxed);
  auto head = in_->head.load(std::memory_order_acquire);
  auto avail = head - tail;
  if (avail > ring_bytes_)
    throw input_error(fmt::format("shared memory: the peer claims {} bytes "
                                  "in a ring of {}",
                                  avail, ring_bytes_));
  auto k = std::min(n, static_cast<size_t>(avail));
  if (k == 0)
    return 0;
  copy_out(in_data_, ring_bytes_, tail, p, k);
  in_->tail.store(tail + k, std::memory_order_seq_cst);
  return k;
}

bool shm_segment::writer_needs_wake() {
  return in_->writer_sleeps.load(std::memory_order_seq_cst) != 0
         && in_->writer_sleeps.exchange(0, std::memory_order_seq_cst) != 0;
}

bool shm_segment::reader_may_sleep() {
  in_->reader_sleeps.store(1, std::memory_order_seq_cst);
  auto tail = in_->tail.load(std::memory_order_relaxed);
  auto head = in_->head.load(std::memory_order_seq_cst);
  if (head != tail) {
    in_->reader_sleeps.store(0, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void shm_segment::woke() {
  in_->reader_sleeps.store(0, std::memory_order_relaxed);
  out_->writer_sleeps.store(0, std::memory_order_relaxed);
}

} // namespace actorps
