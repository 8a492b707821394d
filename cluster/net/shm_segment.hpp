#pragma once

// Shared memory between the two ends of a data channel on one host
// (cluster/net/frame_pump.hpp): two byte rings, one per direction, in
// one memory file (memfd) that the dialing end creates and the accepting
// end opens through /proc/<pid>/fd/<fd>. Frames then go from the sender's
// buffers into the ring and from the ring into the receiver's, one copy
// each as over TCP, but without the loopback TCP path: no system call, no
// segments, no acknowledgements and no wake-up per 64 KiB segment (on this
// project's PVM guests that path is where `launch` spends most of the CPU
// `train` does not; see the notes). The TCP connection stays: it
// carries the doorbell bytes that wake a sleeping end, and its end tells
// that the peer is gone.
//
// Each ring has one writer and one reader, each a single thread at a time
// (frame_pump guarantees it): `head` counts bytes written, `tail` bytes
// read, both only ever growing. An end about to sleep sets its flag and
// looks once more (Dekker's protocol, all sequentially consistent); the
// other end, after writing or reading, takes the flag and rings the
// doorbell if it was set. The file is sealed against shrinking and growing
// (F_SEAL_SHRINK, F_SEAL_GROW), so neither end can make the other's
// mapping fault; counters that do not add up are reported as a malformed
// peer (input_error), never trusted.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace actorps {

class shm_segment {
public:
  /// Random bytes that identify one segment: the accepting end checks the
  /// ones in the file against the ones in the offer (the file it opened
  /// could be another process's, on another host, with the same pid).
  using nonce_type = std::array<uint8_t, 16>;

  /// The default bytes per ring (each direction), and the most a segment
  /// may have (a peer's offer of more is declined).
  static constexpr size_t default_ring_bytes = size_t{2} << 20;
  static constexpr size_t max_ring_bytes = size_t{256} << 20;

  /// Bytes per ring for frames of up to about `frame_bytes`: room for two
  /// (one read while the next is written), the power of two at or above,
  /// from 64 KiB to 256 MiB; 0: default_ring_bytes. Smaller rings stay in
  /// the caches: for Fashion-MNIST's 0.47 MB frames (2 ps) `launch` made
  /// 1.05x the samples/s with 1 MiB as with 2 MiB and 1.07x as with 8 MiB
  /// (medians of four rounds); a ring smaller than a frame made the writer
  /// wait for the reader within each frame (256 KiB: 0.6x).
  static size_t ring_bytes_for(uint64_t frame_bytes);

  /// Creates a segment of two rings of `ring_bytes` each (a power of two,
  /// 4 KiB to 256 MiB) in a sealed memfd; the dialing end writes into ring
  /// 0 and reads from ring 1.
  /// @throws runtime_failure (memfd_create, ftruncate, mmap failed) or
  ///         std::invalid_argument (a bad size).
  static std::unique_ptr<shm_segment> create(size_t ring_bytes
                                             = default_ring_bytes);

  /// Opens the segment that process `pid` created as its descriptor `fd`
  /// (an offer's fields), as the accepting end (writes ring 1, reads ring
  /// 0). Checks that the process runs as this one's user (its effective
  /// uid), that it is in this one's network namespace (one in another is
  /// an emulated host, scripts/netns-cluster.sh), and the file's name,
  /// seals, size, magic and `nonce`.
  /// @throws input_error naming what does not fit (the peer runs as another
  ///         user, is on another host, in another pid or network
  ///         namespace, or sent a wrong offer), or
  ///         runtime_failure (mmap failed).
  static std::unique_ptr<shm_segment> open(uint32_t pid, int32_t fd,
                                           size_t ring_bytes,
                                           const nonce_type& nonce);

  ~shm_segment();

  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;

  /// The creator's descriptor of the file (-1 once closed or for an end
  /// that opened it), its size per ring and nonce: what an offer says.
  int fd() const {
    return fd_;
  }
  size_t ring_bytes() const {
    return ring_bytes_;
  }
  const nonce_type& nonce() const {
    return nonce_;
  }

  /// Closes the creator's descriptor (once the peer opened the file or
  /// declined it); the mapping stays.
  void close_fd();

  // -- the outbound ring (this end writes) -------------------------------------

  /// Copies up to `n` bytes of `p` into the ring; returns how many (0: the
  /// ring is full).
  /// @throws input_error if the peer's counters do not add up.
  size_t write_some(const char* p, size_t n);

  /// After writing: whether the reader sleeps and must be woken (its flag
  /// is taken, so one doorbell serves any number of writes).
  bool reader_needs_wake();

  /// Before sleeping because the ring is full: sets this end's flag and
  /// returns false if there is room now after all (then do not sleep).
  bool writer_may_sleep();

  // -- the inbound ring (this end reads) ---------------------------------------

  /// Copies up to `n` bytes out of the ring into `p`; returns how many (0:
  /// nothing there).
  /// @throws input_error if the peer's counters do not add up.
  size_t read_some(char* p, size_t n);

  /// After reading: whether the writer sleeps for room and must be woken.
  bool writer_needs_wake();

  /// Before sleeping for input: sets this end's flag and returns false if
  /// bytes arrived after all (then do not sleep).
  bool reader_may_sleep();

  /// Clears this end's sleep flags after waking.
  void woke();

private:
  struct control;

  shm_segment() = default;
  void map(int fd, size_t ring_bytes, bool creator);

  int fd_ = -1;
  size_t ring_bytes_ = 0;
  nonce_type nonce_{};
  char* base_ = nullptr;
  size_t mapped_ = 0;
  control* out_ = nullptr;
  control* in_ = nullptr;
  char* out_data_ = nullptr;
  char* in_data_ = nullptr;
};

} // namespace actorps
