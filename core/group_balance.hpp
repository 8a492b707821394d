#pragma once

// Where replica groups start and how they are spread again when a parameter
// server joins: a job places its variables over cluster.groups groups
// (core/placement.hpp; shard_info::ps names the group), which start on
// fewer servers and move between them whole (actors/dispatcher_moves.cpp).

#include <cstdint>
#include <vector>

namespace actorps {

/// The server group `g` starts on as primary among `servers` (>= 1):
/// g % servers, so that the servers' counts differ by at most one.
uint32_t group_home(uint32_t g, uint32_t servers);

/// The server group `g`'s backup starts on (with replicas): the one after
/// its home, (g % servers + 1) % servers; another server for servers >= 2.
uint32_t group_backup_home(uint32_t g, uint32_t servers);

/// One move of a group's primary from server `from` to server `to`.
struct group_move {
  uint32_t group = 0;
  uint32_t from = 0;
  uint32_t to = 0;
};

/// The moves that bring server `to` (one that just joined) level with the
/// others: while a server that may give (`may_give[p]`, not `to`) serves
/// at least two primaries more than `to`, its highest-numbered group moves
/// to `to`, taken from the server holding the most (the lowest index among
/// equals). Afterwards `to` serves at most one primary fewer than any
/// giver, and no giver more than before. `primaries[p]`: the groups server
/// p serves as primary. Empty when `to` is out of range or nothing can be
/// spared (e.g. as many groups as servers before the join).
std::vector<group_move>
rebalance_moves(const std::vector<std::vector<uint32_t>>& primaries,
                const std::vector<bool>& may_give, uint32_t to);

} // namespace actorps
