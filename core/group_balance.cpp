#include "core/group_balance.hpp"

#include <algorithm>

namespace actorps {

uint32_t group_home(uint32_t g, uint32_t servers) {
  return servers == 0 ? 0 : g % servers;
}

uint32_t group_backup_home(uint32_t g, uint32_t servers) {
  return servers == 0 ? 0 : (g % servers + 1) % servers;
}

std::vector<group_move>
rebalance_moves(const std::vector<std::vector<uint32_t>>& primaries,
                const std::vector<bool>& may_give, uint32_t to) {
  std::vector<group_move> out;
  if (to >= primaries.size())
    return out;
  auto held = primaries;
  for (auto& h : held)
    std::sort(h.begin(), h.end());
  for (;;) {
    int64_t from = -1;
    for (uint32_t p = 0; p < held.size(); ++p) {
      if (p == to || p >= may_give.size() || !may_give[p])
        continue;
      if (from < 0 || held[p].size() > held[from].size())
        from = p;
    }
    if (from < 0 || held[from].size() < held[to].size() + 2)
      return out;
    auto g = held[from].back();
    held[from].pop_back();
    held[to].push_back(g);
    out.push_back(group_move{g, static_cast<uint32_t>(from), to});
  }
}

} // namespace actorps
