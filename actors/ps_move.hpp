#pragma once

// A planned move of a replica group, at a parameter server. The coordinator
// moves group g from server S to server T by the replication mechanism
// (actors/ps_chain.hpp): T becomes g's backup (S installs its state there and
// forwards every later update), then S hands the group over: it stops
// applying pushes for g (they wait at S) and answers once T has applied
// every update S applied. The coordinator then makes T the primary at a new
// view, sends the workers the new route (they send the waiting pushes again,
// to T) and drops g at S, which answers the pushes it held with stale_view
// and every later request naming g likewise ("moved"). Exactly once: T knows
// every update id S applied (installed with the state, then forwarded), so
// a push that reached S before the handoff is a duplicate at T.
// Used by actors/ps_actor.cpp.

#include <cstdint>

#include "caf/error.hpp"
#include "caf/result.hpp"

#include "actors/ps_state.hpp"

namespace actorps {

/// The coordinator asks this primary of group `g` at view `view` to hand it
/// to its backup (see ps_actor's handoff_atom). While the backup's install
/// is on its way, pushes still apply; then they wait, and the reply (the
/// group's clock) comes once every forward is applied there.
caf::result<uint64_t> handoff(ps_ptr self, uint32_t g, uint64_t view);

/// A forward or the install of `r`'s backup was answered: answers a handoff
/// waiting for it, or starts one that waited for the install.
void handoff_progress(ps_ptr self, ps_replica& r);

/// Abandons `r`'s handoff (the backup was lost, or the timeout passed):
/// the handoff is answered with `why`, and the pushes held apply here.
void abandon_handoff(ps_ptr self, ps_replica& r, const caf::error& why);

/// The timer of handoff `number` of group `g` fired: abandons it if it
/// still waits.
void handoff_expired(ps_ptr self, uint32_t g, uint64_t number);

/// A push for `r` during its handoff: it waits (answered when the group is
/// dropped, or applied if the handoff is abandoned).
caf::result<uint64_t> hold_push(ps_ptr self, ps_replica& r,
                                push_request& req);

/// Answers everything `r`'s handoff holds with `err` (a step down).
void end_handoff(ps_replica& r, const caf::error& err);

/// Group `g` moved away at view `view` (see ps_actor's drop_atom).
caf::result<bool> drop_group(ps_ptr self, uint32_t g, uint64_t view);

} // namespace actorps
