#pragma once

// Chain replication at a parameter server (van Renesse and
// Schneider, OSDI 2004): a primary forwards every applied update to its
// group's backup and acknowledges it once the backup applied it (or, with
// async replication, within a lag); a backup applies what is forwarded;
// the coordinator changes roles (configure). Used by actors/ps_actor.cpp.

#include <cstdint>
#include <string>
#include <vector>

#include "caf/make_message.hpp"
#include "caf/result.hpp"

#include "actors/messages.hpp"
#include "actors/ps_state.hpp"

namespace actorps {

/// Sends one applied update (its ids, the scale it was applied with) to the
/// group's backup; `acks` are answered with the clock once the backup has
/// applied it, or at once should the backup be lost; a refusal for a newer
/// view deposes this server (the acks get stale_view). A forward without an
/// answer for 15 s drops the backup as if lost.
void forward(ps_ptr self, ps_replica& r, std::vector<update_id> ids,
             float scale, push_request update, std::vector<ack_promise> acks);

/// Async replication: where acknowledgements wait while the backup is more
/// than `lag` forwards behind (on the forward `lag` places before the
/// newest: answered, the backlog is `lag` again); nullptr when it is not.
std::vector<ack_promise>* backlog_wait(ps_replica& r, uint32_t lag);

/// Applies the sync round's mean gradient and acknowledges every push of it
/// (after the backup applied it too).
void close_round(ps_ptr self, ps_replica& r);

/// The group's backup is gone (`why`, for the log; `planned`: the
/// coordinator replaced it, logged as such): pending forwards are
/// acknowledged and updates apply here alone until a new backup.
void backup_lost(ps_ptr self, ps_replica& r, const std::string& why,
                 bool planned = false);

/// Makes this server a backup of `r`'s group (or a deposed primary): what
/// waits for an answer as a primary is refused with stale_view.
void step_down(ps_replica& r, uint32_t ps_index);

/// The coordinator's role change for a group: primary (with its backup, to
/// be installed or not) or backup, at a view not older than this one's.
/// @returns true, or stale_view / unknown_group / no_shards.
caf::result<bool> configure(ps_ptr self, replica_config& cfg);

/// A backup applies a forwarded update once (its ids), checked as a push
/// (shape_mismatch, key errors); stale_view unless it is this group's
/// backup at the forward's view. @returns the group's clock.
caf::result<uint64_t> replicate(ps_ptr self, replicate_request& req);

} // namespace actorps
