#include "cluster/net/data_channel_ends.hpp"

#include <functional>

#include "caf/actor_cast.hpp"
#include "caf/message.hpp"
#include "caf/weak_intrusive_ptr.hpp"

#include "actors/message_ids.hpp"

#include "cluster/net/inline_unit.hpp"
#include "cluster/net/tls_channel.hpp"

namespace actorps::detail {

std::shared_ptr<frame_pump> start_pump(std::unique_ptr<channel> ch,
                                       std::shared_ptr<inbox> box,
                                       caf::strong_actor_ptr self, bool keep,
                                       std::string label, size_t caller_limit,
                                       shm_mode shm, size_t frame_bytes,
                                       frame_limits limits,
                                       std::unique_ptr<shm_segment> segment) {
  std::function<void()> tell;
  if (keep) {
    tell = [self] {
      detail::run_here(self, caf::make_message(frames_atom_v));
    };
  } else {
    auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
    tell = [weak] {
      if (auto strong = weak.lock())
        detail::run_here(strong, caf::make_message(frames_atom_v));
    };
  }
  return std::make_shared<frame_pump>(
    std::move(ch),
    [box, tell](in_frame f) {
      {
        std::lock_guard<std::mutex> guard{box->mtx};
        box->frames.push_back(std::move(f));
      }
      tell();
    },
    [box, tell](const std::string& why) {
      {
        std::lock_guard<std::mutex> guard{box->mtx};
        box->closed = why;
      }
      tell();
    },
    std::move(label), caller_limit, shm, frame_bytes, limits,
    std::move(segment));
}

std::optional<std::chrono::milliseconds>
next_idle_check(bool busy, clock_type::duration quiet,
                std::chrono::milliseconds limit) {
  if (!busy && quiet >= limit)
    return std::nullopt;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(limit - quiet);
  if (busy || left <= std::chrono::milliseconds::zero())
    return limit;
  return left;
}

} // namespace actorps::detail
