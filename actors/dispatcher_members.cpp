// Workers that join a running job and workers that leave it gracefully:
// the dispatcher's side of elastic membership (DLRover's elastic workers).
// A joining worker gets a slot and takes closures like the others; a
// leaving one gets no new closure, finishes what it holds and then leaves
// service without being counted lost, so nothing is re-executed.

#include <algorithm>

#include <fmt/format.h>

#include "caf/actor_system.hpp"

#include "actors/dispatcher_state.hpp"
#include "core/log.hpp"

namespace actorps::detail {

caf::result<uint32_t> enlist_worker(dispatcher_ptr self, uint32_t w,
                                    worker_actor worker) {
  auto& st = self->state;
  if (!worker)
    return caf::make_error(errc::shape_mismatch, "worker", w,
                           "joined without an actor");
  if (w < st.workers.size() && st.workers[w].alive)
    return caf::make_error(errc::shape_mismatch, "worker", w,
                           "is in service already");
  if (w >= st.workers.size()) {
    // Slots between (indices no worker took yet): never started.
    auto n = st.workers.size();
    st.workers.resize(w + 1);
    for (auto i = n; i <= w; ++i)
      st.workers[i].alive = false;
  }
  admit(self, w, std::move(worker));
  log::info("dispatcher", -1, "worker {} joined; {} worker(s) in service", w,
            st.alive_count);
  return static_cast<uint32_t>(st.alive_count);
}

/// Worker `w`, leaving, holds no closure: it leaves service.
void let_go(dispatcher_ptr self, uint32_t w) {
  auto& st = self->state;
  auto& slot = st.workers[w];
  slot.leaving = false;
  slot.alive = false;
  --st.alive_count;
  slot.lost_reason = "left the job";
  st.idle.erase(std::remove(st.idle.begin(), st.idle.end(), w),
                st.idle.end());
  self->demonitor(slot.actor.address());
  log::info("dispatcher", -1,
            "worker {} left after finishing its {} closure(s); nothing "
            "re-executed, {} worker(s) in service",
            w, slot.finished_leaving, st.alive_count);
  slot.farewell.deliver(slot.finished_leaving);
  slot.farewell = caf::typed_response_promise<uint32_t>{};
  dispatch(self);
}

caf::result<uint32_t> begin_leave(dispatcher_ptr self, uint32_t w) {
  auto& st = self->state;
  if (w >= st.workers.size() || !st.workers[w].alive)
    return caf::make_error(errc::no_workers, "worker", w, "is not in service");
  auto& slot = st.workers[w];
  if (slot.leaving)
    return caf::make_error(errc::no_workers, "worker", w, "is leaving already");
  slot.leaving = true;
  slot.finished_leaving = 0;
  st.idle.erase(std::remove(st.idle.begin(), st.idle.end(), w),
                st.idle.end());
  log::info("dispatcher", -1,
            "worker {} leaves: it gets no new closure and finishes the {} it "
            "holds{}",
            w, slot.running.size(),
            st.alive_count == 1 ? "; it is the last worker in service" : "");
  slot.farewell = self->make_response_promise<uint32_t>();
  auto promise = slot.farewell;
  if (slot.running.empty())
    let_go(self, w);
  return promise;
}

void free_place(dispatcher_ptr self, uint32_t w) {
  auto& st = self->state;
  auto& slot = st.workers[w];
  if (slot.leaving) {
    if (slot.running.empty())
      let_go(self, w);
    return;
  }
  if (!slot.benched)
    st.idle.push_back(w);
}

void leave_failed(dispatcher_ptr self, uint32_t w) {
  auto& slot = self->state.workers[w];
  slot.leaving = false;
  slot.farewell.deliver(caf::make_error(errc::no_workers, "worker", w,
                                        "was lost before it finished its "
                                        "closures: they run again elsewhere"));
  slot.farewell = caf::typed_response_promise<uint32_t>{};
}

} // namespace actorps::detail
