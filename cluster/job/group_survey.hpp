#pragma once

// Where the replica groups are, as the running parameter servers hold them.
// A coordinator that joins servers which already hold shards (it was
// restarted with --resume, its predecessor having died) asks each server
// which groups it holds, as primary or backup and at which view, instead of
// assuming group g on server g: moves (join:ps, move:ps, leave:ps) put
// groups elsewhere, and only the servers remember where.

#include <cstdint>
#include <vector>

#include "caf/fwd.hpp"

#include "actors/dispatcher_actor.hpp"
#include "actors/ps_actor.hpp"

namespace actorps {

class model;
struct job_config;
struct placement;

/// The answers of the servers, and the placement made of them.
struct group_survey {
  /// One per group: where it is served (primary -1: no server holds it).
  struct found {
    int64_t primary = -1;
    int64_t backup = -1;
  };
  std::vector<found> groups;
  /// The newest view any server named (0: none held anything).
  uint64_t newest_view = 0;
  /// Whether any server holds any group.
  bool any_held = false;

  /// Whether every group is where a new job of `servers` servers puts it:
  /// its primary on server group_home(g, servers) (core/group_balance.hpp;
  /// then the usual setup applies).
  bool at_home(uint32_t servers) const;

  /// The highest server index holding a group, plus one (0: none).
  uint32_t servers_used() const;
};

/// Asks each of `servers` (index p is server p; a null handle is skipped)
/// for its counters of groups 0 .. groups - 1. A group's primary is the
/// server that calls itself primary at the newest view; without one, a
/// server holding a copy (it is made the primary); its backup, a server
/// holding a copy at that view as a backup.
/// @throws runtime_failure if a server does not answer.
group_survey survey_groups(caf::actor_system& sys,
                           const std::vector<ps_actor>& servers,
                           uint32_t groups);

/// Sets up the groups where `survey` found them, at view `view` (newer than
/// any a server holds): each group's primary, with cfg.replicas 1 and a
/// backup found, that backup (it gets the primary's state); a group no
/// server holds is created on its home among the job's own cfg.ps servers
/// (group_home), or the next one there (a null handle in `servers` is a
/// server that left), and is then
/// restored from the checkpoint like every group of a resumed job. Returns the
/// placement to start the dispatcher with (recovery.placement).
/// @throws runtime_failure if a server refuses, or holds a group whose size
///         differs from this job's.
std::vector<group_place>
setup_surveyed_groups(caf::actor_system& sys, const placement& layout,
                      const std::vector<ps_actor>& servers,
                      const job_config& cfg, const model& net,
                      const group_survey& survey, uint64_t view);

} // namespace actorps
