#include "actors/ps_move.hpp"

#include <chrono>
#include <utility>
#include <vector>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "actors/ps_chain.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

/// How long pushes may wait for the backup to catch up in a handoff.
constexpr auto handoff_timeout = std::chrono::seconds(10);

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
           std::chrono::steady_clock::now() - t0)
    .count();
}

/// Stops applying pushes for `r` (the install is done): from now on they
/// wait, and the handoff is answered once every forward is applied.
void fence(ps_ptr self, ps_replica& r) {
  auto& st = self->state;
  // A sync round's pushes were summed, not applied: the round closes now
  // with the pushes it has (as on its timeout), so the backup gets them.
  if (st.opts.mode == consistency::sync && !r.round_ids.empty())
    close_round(self, r);
  r.handing_off = true;
  r.fenced_at = std::chrono::steady_clock::now();
  auto number = ++r.handoff_number;
  self->delayed_send(self, handoff_timeout, caf::timeout_atom_v, r.group,
                     number);
}

} // namespace

caf::result<uint64_t> handoff(ps_ptr self, uint32_t g, uint64_t view) {
  auto& st = self->state;
  auto found = serving(st, g, view);
  if (!found)
    return found.error();
  auto& r = **found;
  if (!r.backup)
    return caf::make_error(errc::bad_message, "handoff at ps", st.opts.index,
                           "group", g, "no backup to hand the group to");
  if (r.handing_off || !r.handoff_replies.empty())
    return caf::make_error(errc::bad_message, "handoff at ps", st.opts.index,
                           "group", g, "a handoff is in progress");
  if (!r.installing) {
    fence(self, r);
    if (r.forwards.empty())
      return r.stats.clock;
  }
  auto rp = self->make_response_promise<uint64_t>();
  r.handoff_replies.push_back(rp);
  return rp;
}

void handoff_progress(ps_ptr self, ps_replica& r) {
  if (r.handoff_replies.empty() || r.installing)
    return;
  if (!r.handing_off)
    fence(self, r);
  if (!r.forwards.empty())
    return;
  auto replies = std::move(r.handoff_replies);
  r.handoff_replies.clear();
  for (auto& rp : replies)
    rp.deliver(r.stats.clock);
}

void abandon_handoff(ps_ptr self, ps_replica& r, const caf::error& why) {
  if (!r.handing_off && r.handoff_replies.empty())
    return;
  log::warn("ps", static_cast<int>(self->state.opts.index),
            "group {}: handoff abandoned ({}); {} held push(es) apply here",
            r.group, self->system().render(why), r.held_pushes.size());
  r.handing_off = false;
  auto replies = std::move(r.handoff_replies);
  r.handoff_replies.clear();
  for (auto& rp : replies)
    rp.deliver(why);
  // Sent to this server again, behind what its mailbox holds: each is
  // checked and applied (or found a duplicate) as if it came now.
  auto held = std::move(r.held_pushes);
  r.held_pushes.clear();
  auto me = caf::actor_cast<ps_actor>(self);
  for (auto& h : held) {
    auto rp = h.promise;
    self->request(me, caf::infinite, push_atom_v, std::move(h.req))
      .then([rp](uint64_t clock) mutable { rp.deliver(clock); },
            [rp](caf::error& err) mutable { rp.deliver(err); });
  }
}

void handoff_expired(ps_ptr self, uint32_t g, uint64_t number) {
  auto i = self->state.groups.find(g);
  if (i == self->state.groups.end())
    return;
  auto& r = i->second;
  if (!r.handing_off || r.handoff_number != number)
    return;
  abandon_handoff(self, r,
                  caf::make_error(errc::cancelled, "handoff of group", g,
                                  "not completed in",
                                  static_cast<uint64_t>(
                                    handoff_timeout.count()),
                                  "s"));
}

caf::result<uint64_t> hold_push(ps_ptr self, ps_replica& r,
                                push_request& req) {
  auto rp = self->make_response_promise<uint64_t>();
  r.held_pushes.push_back(ps_replica::held_push{std::move(req), rp});
  return rp;
}

void end_handoff(ps_replica& r, const caf::error& err) {
  for (auto& rp : r.handoff_replies)
    rp.deliver(err);
  r.handoff_replies.clear();
  for (auto& h : r.held_pushes)
    h.promise.deliver(err);
  r.held_pushes.clear();
  r.handing_off = false;
}

caf::result<bool> drop_group(ps_ptr self, uint32_t g, uint64_t view) {
  auto& st = self->state;
  auto found = find_group(st, g);
  if (!found)
    return found.error();
  auto& r = **found;
  if (view < r.view)
    return caf::make_error(errc::stale_view, "ps", st.opts.index, "group", g,
                           "drop", r.view, view);
  auto fenced = r.handing_off;
  auto held_ms = fenced ? ms_since(r.fenced_at) : 0.0;
  auto held = r.held_pushes.size();
  auto floats = r.dense.size();
  auto rows = replica_stats(r).table_rows;
  // Everything waiting here is answered stale_view ("moved"): the workers
  // get the new route and send it there.
  end_handoff(r, caf::make_error(errc::stale_view, "ps", st.opts.index,
                                 "group", g, "moved at view", view));
  r.view = view;
  step_down(r, st.opts.index);
  st.groups.erase(g);
  st.moved[g] = view;
  if (fenced)
    log::info("ps", static_cast<int>(st.opts.index),
              "group {} moved away (view {}; {} floats, {} table rows): its "
              "pushes waited {:.1f} ms here, {} held",
              g, view, floats, rows, held_ms, held);
  else
    log::info("ps", static_cast<int>(st.opts.index),
              "group {} dropped here (view {}; {} floats, {} table rows): "
              "served elsewhere",
              g, view, floats, rows);
  return true;
}

} // namespace actorps
