#pragma once

// A frame pump that records the push frames it receives, for the tests of
// cluster/net/frame_pump.hpp over TCP and shared memory: each frame's id,
// its number of floats and whether every float had the value its id implies
// (value_of), and why the channel closed. Every wait is bounded.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "caf/actor_system.hpp"

#include "cluster/net/frame_pump.hpp"
#include "cluster/net/data_frame.hpp"
#include "cluster/net/tls_channel.hpp"

namespace actorps::test {

/// The value of every float of frame `id` (sender thread and number).
inline float value_of(uint64_t id) {
  return static_cast<float>((id >> 32) * 1000 + (id & 0xffffffff));
}

/// A push frame of `n` floats, each `value`.
inline out_frame push_frame(caf::actor_system& sys, uint64_t id, size_t n,
                            float value) {
  push_request req;
  req.gradient.values.assign(n, value);
  return encode(sys, id, std::move(req));
}

/// What a receiving connection got.
struct received {
  struct frame {
    uint64_t id;
    size_t floats;
    bool values_right;
  };
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<frame> frames;
  std::string closed;
  bool is_closed = false;

  template <class Pred>
  bool wait_for(Pred pred, std::chrono::seconds limit
                           = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, limit, [&] { return pred(*this); });
  }

  /// Whether every frame so far had the values its id implies.
  bool all_right() {
    std::lock_guard<std::mutex> guard{mtx};
    for (auto& f : frames)
      if (!f.values_right)
        return false;
    return true;
  }
};

/// A connection on `fd` (plain TCP) whose frames and end go into `got`;
/// `limit`, `mode` and `limits` as frame_pump's caller limit, shm_mode and
/// frame limits.
inline std::unique_ptr<frame_pump>
receiving_conn(caf::actor_system& sys, int fd, received& got,
               size_t limit = SIZE_MAX, shm_mode mode = shm_mode::none,
               frame_limits limits = {}) {
  return std::make_unique<frame_pump>(
    std::make_unique<channel>(fd, nullptr),
    [&sys, &got](in_frame f) {
      auto id = f.header.id;
      auto req = decode_push(sys, f);
      auto& v = req.gradient.values;
      bool right = true;
      for (auto x : v)
        right = right && x == value_of(id);
      std::lock_guard<std::mutex> guard{got.mtx};
      got.frames.push_back({id, v.size(), right});
      got.cv.notify_all();
    },
    [&got](const std::string& why) {
      std::lock_guard<std::mutex> guard{got.mtx};
      got.closed = why;
      got.is_closed = true;
      got.cv.notify_all();
    },
    "test", limit, mode, 0, limits);
}

} // namespace actorps::test
