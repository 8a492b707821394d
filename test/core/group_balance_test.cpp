// Where replica groups start (group_home, group_backup_home) and the moves
// that level a server that joins (rebalance_moves).

#include <catch2/catch.hpp>

#include <algorithm>

#include "core/group_balance.hpp"

using namespace actorps;

namespace {

/// Group g on server g % n, as a job of `groups` groups starts.
std::vector<std::vector<uint32_t>> started(uint32_t groups, uint32_t n) {
  std::vector<std::vector<uint32_t>> out(n);
  for (uint32_t g = 0; g < groups; ++g)
    out[group_home(g, n)].push_back(g);
  return out;
}

/// The primaries per server after `moves`, checking each moves a group its
/// source serves.
std::vector<std::vector<uint32_t>>
after_moves(std::vector<std::vector<uint32_t>> held,
      const std::vector<group_move>& moves) {
  for (auto& m : moves) {
    auto& from = held.at(m.from);
    auto i = std::find(from.begin(), from.end(), m.group);
    REQUIRE(i != from.end());
    from.erase(i);
    held.at(m.to).push_back(m.group);
  }
  return held;
}

} // namespace

TEST_CASE("groups start spread over the servers, each backup on another "
          "server than its primary",
          "[core][groups]") {
  for (uint32_t n = 1; n <= 5; ++n)
    for (uint32_t groups = n; groups <= 4 * n; ++groups) {
      INFO(groups << " groups on " << n << " servers");
      auto held = started(groups, n);
      auto [lo, hi] = std::minmax_element(
        held.begin(), held.end(), [](auto& a, auto& b) {
          return a.size() < b.size();
        });
      CHECK(hi->size() - lo->size() <= 1);
      for (uint32_t g = 0; g < groups; ++g) {
        CHECK(group_home(g, n) < n);
        CHECK(group_backup_home(g, n) < n);
        if (n >= 2)
          CHECK(group_backup_home(g, n) != group_home(g, n));
      }
    }
  // One group per server: server p serves group p, its backup on the next.
  CHECK(group_home(2, 3) == 2);
  CHECK(group_backup_home(2, 3) == 0);
}

TEST_CASE("a server that joins takes groups from the busiest servers until "
          "the primaries differ by at most one",
          "[core][groups]") {
  auto held = started(6, 2);
  held.emplace_back(); // ps2 joins, empty
  auto moves = rebalance_moves(held, {true, true, true}, 2);
  REQUIRE(moves.size() == 2);
  // The highest-numbered group of the busiest (lowest index among equals).
  CHECK(moves[0].group == 4);
  CHECK(moves[0].from == 0);
  CHECK(moves[1].group == 5);
  CHECK(moves[1].from == 1);
  for (auto& m : moves)
    CHECK(m.to == 2);
  for (uint32_t n = 1; n <= 6; ++n)
    for (uint32_t groups = n; groups <= 5 * n; ++groups) {
      INFO(groups << " groups on " << n << " servers, one joins");
      auto before = started(groups, n);
      before.emplace_back();
      auto after = after_moves(before, rebalance_moves(
                                   before, std::vector<bool>(n + 1, true), n));
      size_t lo = groups, hi = 0;
      for (uint32_t p = 0; p <= n; ++p) {
        lo = std::min(lo, after[p].size());
        hi = std::max(hi, after[p].size());
        CHECK(after[p].size() <= before[p].size() + (p == n ? groups : 0));
      }
      CHECK(hi - lo <= 1);
    }
}

TEST_CASE("with one group per server a join moves nothing, and a server "
          "that may not give keeps its groups",
          "[core][groups]") {
  auto held = started(3, 3);
  held.emplace_back();
  CHECK(rebalance_moves(held, {true, true, true, true}, 3).empty());
  // 4 groups on 2 servers, ps1 leaving (may not give): only ps0 gives, one
  // group (then 1 and 1).
  held = started(4, 2);
  held.emplace_back();
  auto moves = rebalance_moves(held, {true, false, true}, 2);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].from == 0);
  // A target out of range plans nothing.
  CHECK(rebalance_moves(held, {true, true, true}, 7).empty());
}
