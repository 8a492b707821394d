// Values pulled ahead (worker_options::overlap, ::prefetch): a pull of the
// next step's dense values sent with the running step's push. Whether a
// step takes them, and their replies' way into it; the requests go out in
// worker_step.cpp (send_ahead).

#include <algorithm>
#include <utility>
#include <vector>

#include "actors/worker_state.hpp"

namespace actorps::detail {

bool awaits_ahead(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto& a = st.slots[p].ahead;
  return st.busy && !st.failed && st.at == phase::pulling
         && a.taken_by == st.seq;
}

bool use_ahead(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto& a = st.slots[p].ahead;
  if (a.at == pull_ahead::state::in_flight)
    return true;
  if (a.at != pull_ahead::state::ready)
    return false;
  if (clock_seconds_since(self, a.sent) <= std::max(st.last_step_s, 5e-3))
    return true;
  a = pull_ahead{};
  return false;
}

void ahead_arrived(worker_ptr self, uint32_t p, uint64_t token, uint32_t i,
                   pull_reply& reply) {
  auto& st = self->state;
  auto& a = st.slots[p].ahead;
  if (a.token != token)
    return;
  --a.left;
  auto slice = a.sliced ? i : whole_region;
  if (awaits_ahead(self, p)) {
    // Forgotten before it is taken: taking the last part may end the step
    // and start the next, which sends pulls ahead anew.
    if (a.left == 0) {
      a = pull_ahead{};
      ++st.result.pulls_ahead;
    }
    take_pull(self, p, reply, true, false, slice);
    return;
  }
  a.replies[i] = std::move(reply);
  a.stored[i] = true;
  if (a.left == 0)
    a.at = pull_ahead::state::ready;
}

void ahead_failed(worker_ptr self, uint32_t p, uint64_t token,
                  caf::error& err) {
  auto& a = self->state.slots[p].ahead;
  if (a.token != token)
    return;
  auto taken = awaits_ahead(self, p);
  a = pull_ahead{};
  if (taken)
    fail(self, server_error(self, p, std::move(err)));
}

void take_ahead(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  auto seq = st.seq;
  auto& a = st.slots[p].ahead;
  std::vector<std::pair<uint32_t, pull_reply>> got;
  for (uint32_t i = 0; i < a.stored.size(); ++i)
    if (a.stored[i]) {
      got.emplace_back(a.sliced ? i : whole_region, std::move(a.replies[i]));
      a.stored[i] = false;
    }
  if (a.left == 0) {
    a = pull_ahead{};
    ++st.result.pulls_ahead;
  }
  for (size_t k = 0; k < got.size(); ++k) {
    if (st.failed || st.seq != seq)
      break;
    st.hold_stages = k + 1 < got.size();
    take_pull(self, p, got[k].second, true, false, got[k].first);
  }
  st.hold_stages = false;
}

void drop_ahead(worker_ptr self, uint32_t p) {
  auto& st = self->state;
  if (p < st.slots.size() && !awaits_ahead(self, p))
    st.slots[p].ahead = pull_ahead{};
}

} // namespace actorps::detail
