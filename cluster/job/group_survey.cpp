#include "cluster/job/group_survey.hpp"

#include <chrono>
#include <string>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"

#include "cluster/job/job_setup.hpp"
#include "core/error.hpp"
#include "core/group_balance.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/placement.hpp"

namespace actorps {

namespace {

constexpr auto survey_timeout = std::chrono::seconds(30);

/// What server `server` holds of one group.
struct held_copy {
  uint32_t server = 0;
  uint64_t view = 0;
  bool primary = false;
};

/// Tells `ps` its role in group `g`.
/// @throws runtime_failure if it refuses or does not answer.
void configure_at(caf::actor_system& sys, const ps_actor& ps, uint32_t p,
                  replica_config rc) {
  caf::scoped_actor self{sys};
  caf::error failure;
  auto g = rc.group;
  self->request(ps, survey_timeout, configure_atom_v, std::move(rc))
    .receive([](bool) {}, [&](caf::error& err) { failure = err; });
  if (failure)
    throw runtime_failure(fmt::format("setting up group {} on ps {}: {}", g,
                                      p, sys.render(failure)));
}

} // namespace

bool group_survey::at_home(uint32_t servers) const {
  for (uint32_t g = 0; g < groups.size(); ++g)
    if (groups[g].primary >= 0
        && groups[g].primary != int64_t(group_home(g, servers)))
      return false;
  return true;
}

uint32_t group_survey::servers_used() const {
  int64_t most = -1;
  for (auto& f : groups)
    most = std::max({most, f.primary, f.backup});
  return static_cast<uint32_t>(most + 1);
}

group_survey survey_groups(caf::actor_system& sys,
                           const std::vector<ps_actor>& servers,
                           uint32_t groups) {
  std::vector<std::vector<held_copy>> copies(groups);
  group_survey out;
  caf::scoped_actor self{sys};
  for (uint32_t p = 0; p < servers.size(); ++p) {
    if (!servers[p])
      continue;
    for (uint32_t g = 0; g < groups; ++g) {
      // An error is a group not held (never created, or moved away).
      self->request(servers[p], survey_timeout, stats_atom_v, g)
        .receive(
          [&](ps_stats& s) {
            copies[g].push_back(held_copy{p, s.view, s.primary});
            out.newest_view = std::max(out.newest_view, s.view);
            out.any_held = true;
          },
          [](caf::error&) {});
    }
  }
  out.groups.resize(groups);
  for (uint32_t g = 0; g < groups; ++g) {
    auto& found = out.groups[g];
    // The primary at the newest view; else the newest copy.
    const held_copy* best = nullptr;
    for (auto& c : copies[g])
      if (!best || c.view > best->view
          || (c.view == best->view && c.primary && !best->primary))
        best = &c;
    if (!best)
      continue;
    found.primary = best->server;
    for (auto& c : copies[g])
      if (&c != best && !c.primary && c.view == best->view)
        found.backup = c.server;
  }
  return out;
}

std::vector<group_place>
setup_surveyed_groups(caf::actor_system& sys, const placement& layout,
                      const std::vector<ps_actor>& servers,
                      const job_config& cfg, const model& net,
                      const group_survey& survey, uint64_t view) {
  auto groups = static_cast<uint32_t>(survey.groups.size());
  std::vector<group_place> out(groups);
  bool replicated = cfg.replicas > 0 && servers.size() > 1;
  for (uint32_t g = 0; g < groups; ++g) {
    auto& found = survey.groups[g];
    if (found.primary < 0) {
      // Nobody holds it: created at home (or, if that server left, on the
      // first that did not); the resume restores it.
      uint32_t home = group_home(g, std::max<uint32_t>(cfg.ps, 1));
      while (home < servers.size() && !servers[home])
        ++home;
      if (home == servers.size())
        home = 0;
      while (home < servers.size() && !servers[home])
        ++home;
      if (home == servers.size())
        throw runtime_failure(fmt::format("group {}: no server to hold it",
                                          g));
      create_shards(sys, layout, servers[home], g, cfg, net);
      configure_at(sys, servers[home], home,
                   replica_config{g, view, true, nullptr, false});
      out[g].primary = home;
      log::info("coordinator", -1,
                "group {} is held by no server: created on ps{}", g, home);
      continue;
    }
    auto p = static_cast<uint32_t>(found.primary);
    auto stats = group_stats(sys, servers.at(p), g);
    if (stats.floats != layout.ps_sizes[g]
        || stats.shards != layout.shards_of(g).size())
      throw runtime_failure(fmt::format(
        "ps{} holds group {} with {} shards and {} floats, this job places "
        "{} with {}",
        p, g, stats.shards, stats.floats, layout.shards_of(g).size(),
        layout.ps_sizes[g]));
    out[g].primary = p;
    if (replicated && found.backup >= 0) {
      auto b = static_cast<uint32_t>(found.backup);
      configure_at(sys, servers.at(b), b,
                   replica_config{g, view, false, nullptr, false});
      // The backup gets the primary's state (install), as after a move.
      configure_at(sys, servers[p], p,
                   replica_config{g, view, true,
                                  caf::actor_cast<caf::strong_actor_ptr>(
                                    servers[b]),
                                  true, b});
      out[g].backup = b;
    } else {
      configure_at(sys, servers[p], p,
                   replica_config{g, view, true, nullptr, false});
    }
    log::info("coordinator", -1,
              "group {}: ps{} already holds it (clock {}){}: kept there", g,
              p, stats.clock,
              out[g].backup >= 0 ? fmt::format(", its backup ps{}",
                                               out[g].backup)
                                 : std::string{});
  }
  return out;
}

} // namespace actorps
