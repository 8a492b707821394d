#pragma once

// The frame reader and writer of a frame pump (cluster/net/frame_pump.cpp):
// where the next bytes of a frame go or come from, whatever carries them
// (a socket or a shared-memory ring). Internal.

#include <algorithm>
#include <array>
#include <deque>
#include <utility>

#include "cluster/net/data_frame.hpp"

namespace actorps::detail {

/// The frame being read: header, then meta, then bulk.
struct reader {
  /// Meta buffered at first; it doubles as more arrives, up to the header's.
  static constexpr size_t meta_chunk = size_t{64} << 10;

  std::array<char, frame_header_size> header{};
  size_t got = 0; ///< of the current part
  int part = 0;   ///< 0 header, 1 meta, 2 bulk
  in_frame frame;
  frame_limits limits;
  /// Frames completed so far (a new one has begun when this moved).
  uint64_t completed = 0;

  /// Where the current part's next bytes go, and how many are missing.
  std::pair<char*, size_t> space() {
    switch (part) {
      case 0:
        return {header.data() + got, frame_header_size - got};
      case 1:
        return {frame.meta.data() + got, frame.meta.size() - got};
      default:
        return {reinterpret_cast<char*>(frame.bulk.data()) + got,
                frame.bulk.size() * sizeof(float) - got};
    }
  }

  /// Bytes of the current frame still to come (0 between frames).
  size_t missing() const {
    switch (part) {
      case 0:
        return got == 0 ? 0 : frame_header_size - got;
      case 1:
        return frame.header.meta_bytes - got
               + frame.bulk.size() * sizeof(float);
      default:
        return frame.bulk.size() * sizeof(float) - got;
    }
  }

  /// Moves on after `n` more bytes; true when a whole frame is in `frame`.
  /// @throws input_error for a header that does not parse or announces
  ///         more than `limits` (nothing allocated for it then).
  bool advance(size_t n) {
    got += n;
    for (;;) {
      if (space().second > 0)
        return false;
      if (part == 1 && frame.meta.size() < frame.header.meta_bytes) {
        frame.meta.resize(std::min<size_t>(frame.meta.size() * 2,
                                           frame.header.meta_bytes));
        continue;
      }
      got = 0;
      if (part == 0) {
        frame = in_frame{};
        frame.header = parse_frame_header(header.data()); // throws
        check_limits(frame.header, limits); // throws
        frame.meta.resize(std::min<size_t>(frame.header.meta_bytes,
                                           meta_chunk));
        frame.bulk.resize(frame.header.bulk_bytes / sizeof(float));
        part = 1;
      } else if (part == 1) {
        part = 2;
      } else {
        part = 0;
        ++completed;
        return true;
      }
    }
  }
};

/// The frame being written: header, meta, bulk.
struct writer {
  std::deque<out_frame> frames;
  int part = 0;
  size_t done = 0;

  std::pair<const char*, size_t> next() {
    auto& f = frames.front();
    switch (part) {
      case 0:
        return {f.header.data() + done, frame_header_size - done};
      case 1:
        return {f.meta.data() + done, f.meta.size() - done};
      default:
        return {f.bulk + done, f.bulk_bytes - done};
    }
  }

  void advance(size_t n) {
    done += n;
    while (!frames.empty() && next().second == 0) {
      done = 0;
      if (++part == 3) {
        part = 0;
        frames.pop_front();
      }
    }
  }

  /// Passes over the first `n` bytes of the front frame (sent already).
  void skip(size_t n) {
    while (n > 0 && !frames.empty()) {
      auto k = std::min(n, next().second);
      advance(k);
      n -= k;
    }
  }
};

} // namespace actorps::detail
