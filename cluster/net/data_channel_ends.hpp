#pragma once

// Internal: what both ends of a data channel share (cluster/net/data_link.cpp,
// a worker's link; cluster/net/data_session.cpp, a server's session): the
// inbox a frame pump fills for its actor, starting that pump, and the idle
// rule.

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "caf/actor_control_block.hpp"

#include "cluster/net/frame_pump.hpp"

namespace actorps::detail {

using clock_type = std::chrono::steady_clock;

/// What a frame pump's thread hands its actor (the data link or session):
/// the frames that arrived, and why the channel ended.
struct inbox {
  std::mutex mtx;
  std::deque<in_frame> frames;
  std::optional<std::string> closed;

  std::deque<in_frame> take(std::optional<std::string>& why) {
    std::lock_guard<std::mutex> guard{mtx};
    why = closed;
    return std::exchange(frames, {});
  }
};

/// Starts the frame pump of `ch` for actor `self`: each frame and the end
/// go into `box`, and the actor is told (frames_atom), on the pump's
/// thread, which then runs it (cluster/net/inline_unit.hpp). With `keep`, the
/// pump holds the actor alive (until it quits); without, the actor ends
/// when nobody else holds it, and the pump with it.
std::shared_ptr<frame_pump> start_pump(std::unique_ptr<channel> ch,
                                       std::shared_ptr<inbox> box,
                                       caf::strong_actor_ptr self, bool keep,
                                       std::string label, size_t caller_limit,
                                       shm_mode shm, size_t frame_bytes = 0,
                                       frame_limits limits = {},
                                       std::unique_ptr<shm_segment> segment
                                       = nullptr);

/// The idle rule of both ends of a channel: with nothing outstanding
/// (`busy` false) and no activity for `quiet` >= `limit`, close (nullopt);
/// otherwise the delay until the next look (the rest of `limit`, or all of
/// it while busy).
std::optional<std::chrono::milliseconds>
next_idle_check(bool busy, clock_type::duration quiet,
                std::chrono::milliseconds limit);

} // namespace actorps::detail
