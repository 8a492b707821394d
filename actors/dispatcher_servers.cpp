// The dispatcher's parameter servers and replica groups: who serves each
// group, failover to a backup, bringing lost servers back, rebuilding
// backups, routes for the workers, and pruning the servers' applied ids.

#include <algorithm>

#include "caf/actor_system.hpp"
#include "caf/blocking_actor.hpp"

#include "actors/dispatcher_state.hpp"
#include "actors/telemetry.hpp" // metrics
#include "core/group_balance.hpp"
#include "core/log.hpp"

namespace actorps::detail {

namespace {

using std::chrono::steady_clock;

/// How long a server may take to answer a role change, and one that waits
/// for its new backup to install a copy of its state.
constexpr auto configure_timeout = std::chrono::seconds(10);
constexpr auto install_timeout = std::chrono::minutes(10);

/// Closures completed between two watermarks sent to the servers.
constexpr uint64_t prune_every = 256;

double seconds_since(steady_clock::time_point t0) {
  return std::chrono::duration<double>(steady_clock::now() - t0).count();
}

std::vector<group_route> routes_of(const dispatcher_state& st) {
  std::vector<group_route> out;
  for (uint32_t g = 0; g < st.groups.size(); ++g) {
    auto& gs = st.groups[g];
    if (gs.lost || gs.promoting)
      continue;
    out.push_back(group_route{
      g, gs.primary, gs.view,
      caf::actor_cast<caf::strong_actor_ptr>(st.servers[gs.primary].actor)});
  }
  return out;
}

/// Logs when dispatch pauses and resumes.
void note_pause(dispatcher_ptr self) {
  auto& st = self->state;
  auto paused = dispatch_paused(st);
  if (paused && !st.paused) {
    st.paused = true;
    st.pause_start = steady_clock::now();
    log::warn("dispatcher", -1,
              "dispatch paused: a parameter-server group has no live copy");
  } else if (!paused && st.paused) {
    st.paused = false;
    log::info("dispatcher", -1,
              "dispatch resumed after a pause of {:.2f} s",
              seconds_since(st.pause_start));
  }
}

} // namespace

void configure(dispatcher_ptr self, uint32_t p, replica_config cfg,
               std::function<void(const caf::error&)> done) {
  // An install's answer waits for the backup to take the state.
  auto timeout = cfg.install ? install_timeout : configure_timeout;
  self->request(self->state.servers[p].actor, timeout, configure_atom_v,
                std::move(cfg))
    .then([=](bool) { done(caf::error{}); },
          [=](caf::error& err) { done(err); });
}

void create_on(dispatcher_ptr self, uint32_t p, uint32_t g, bool restore) {
  auto& rec = self->state.recovery;
  auto create = rec.create_group;
  auto restore_fn = rec.restore_group;
  auto ps = self->state.servers[p].actor;
  auto run = [=](auto* sender, const dispatcher_actor& me) {
    try {
      if (create)
        create(ps, g);
      if (restore && restore_fn)
        restore_fn(ps, g);
      sender->send(me, replica_atom_v, g, p, restore, caf::error{});
    } catch (const std::exception& e) {
      sender->send(me, replica_atom_v, g, p, restore,
                   caf::make_error(errc::ps_lost,
                                   fmt::format("ps{} lost and not recovered: "
                                               "{}",
                                               p, e.what())));
    }
  };
  dispatcher_actor me = self;
  if (!rec.blocking) {
    run(self, me);
    return;
  }
  self->spawn<caf::detached>(
    [=](caf::blocking_actor* helper) { run(helper, me); });
}

void add_backup(dispatcher_ptr self, uint32_t g, uint32_t b) {
  auto& gs = self->state.groups[g];
  auto view = gs.view;
  configure(self, b, replica_config{g, view, false, nullptr, false},
            [=](const caf::error& err) {
              auto& st = self->state;
              auto& gs = st.groups[g];
              if (err || gs.view != view || gs.lost || gs.promoting
                  || !st.servers[gs.primary].alive || !st.servers[b].alive) {
                gs.adding = -1;
                if (err)
                  log::warn("dispatcher", -1,
                            "group {}: ps{} not made its backup: {}", g, b,
                            self->system().render(err));
                backup_added(self, g, b, false);
                return;
              }
              auto primary = gs.primary;
              configure(
                self, primary,
                replica_config{g, view, true,
                               caf::actor_cast<caf::strong_actor_ptr>(
                                 st.servers[b].actor),
                               true, b},
                [=](const caf::error& err) {
                  auto& st = self->state;
                  auto& gs = st.groups[g];
                  gs.adding = -1;
                  if (err || !st.servers[b].alive || gs.primary != primary) {
                    if (err)
                      log::warn("dispatcher", -1,
                                "group {}: ps{} could not take ps{} as its "
                                "backup: {}",
                                g, primary, b, self->system().render(err));
                    backup_added(self, g, b, false);
                    return;
                  }
                  gs.backup = b;
                  log::info("dispatcher", -1,
                            "group {}: ps{} is its new backup (a copy of "
                            "ps{})",
                            g, b, primary);
                  backup_added(self, g, b, true);
                });
            });
}

void ensure_backups(dispatcher_ptr self) {
  auto& st = self->state;
  if (st.recovery.replicas == 0 || st.fatal)
    return;
  auto n = static_cast<uint32_t>(st.servers.size());
  auto usable = [&](uint32_t b) {
    auto& s = st.servers[b];
    return s.alive && !s.returning && !s.draining;
  };
  for (uint32_t g = 0; g < st.groups.size(); ++g) {
    auto& gs = st.groups[g];
    if (gs.lost || gs.promoting || gs.backup >= 0 || gs.adding >= 0
        || gs.moving)
      continue;
    // A server that holds a copy already (a backup left behind by a move,
    // or back with its state) first, then the next one after the primary.
    int64_t pick = -1;
    for (uint32_t k = 1; k < n && pick < 0; ++k) {
      auto b = (gs.primary + k) % n;
      if (usable(b) && st.servers[b].holds.count(g) > 0)
        pick = b;
    }
    for (uint32_t k = 1; k < n && pick < 0; ++k) {
      auto b = (gs.primary + k) % n;
      if (usable(b))
        pick = b;
    }
    if (pick < 0)
      continue;
    auto b = static_cast<uint32_t>(pick);
    gs.adding = b;
    if (st.servers[b].holds.count(g) > 0)
      add_backup(self, g, b);
    else
      create_on(self, b, g, false);
  }
}

namespace {

/// Makes backup `b` the primary of group `g` at a new view.
void promote(dispatcher_ptr self, uint32_t g, uint32_t b) {
  auto& gs = self->state.groups[g];
  ++gs.view;
  gs.primary = b;
  gs.backup = -1;
  gs.promoting = true;
  auto view = gs.view;
  auto t0 = steady_clock::now();
  configure(self, b, replica_config{g, view, true, nullptr, false},
            [=](const caf::error& err) {
              auto& gs = self->state.groups[g];
              gs.promoting = false;
              if (err) {
                log::error("dispatcher", -1,
                           "group {}: ps{} could not take over: {}", g, b,
                           self->system().render(err));
                gs.lost = true;
              } else {
                log::info("dispatcher", -1,
                          "group {}: its backup ps{} took over as primary "
                          "(view {}) in {:.3f} s",
                          g, b, view, seconds_since(t0));
              }
              send_routes(self);
              note_pause(self);
              ensure_backups(self);
              dispatch(self);
            });
}

void start_bring_back(dispatcher_ptr self, uint32_t p) {
  auto& st = self->state;
  if (st.servers[p].returning)
    return;
  st.servers[p].returning = true;
  auto fn = st.recovery.bring_back;
  auto run = [fn, p](auto* sender, const dispatcher_actor& me) {
    try {
      auto [ps, held] = fn(p);
      sender->send(me, ps_back_atom_v, p, ps, held);
    } catch (const std::exception& e) {
      sender->send(me, ps_gone_atom_v, p, std::string{e.what()});
    }
  };
  dispatcher_actor me = self;
  if (!st.recovery.blocking) {
    run(self, me);
    return;
  }
  self->spawn<caf::detached>(
    [run, me](caf::blocking_actor* helper) { run(helper, me); });
}

} // namespace

void init_servers(dispatcher_ptr self, std::vector<ps_actor> servers,
                  ps_recovery recovery) {
  auto& st = self->state;
  auto n = static_cast<uint32_t>(servers.size());
  st.servers.resize(n);
  for (uint32_t p = 0; p < n; ++p)
    st.servers[p].actor = std::move(servers[p]);
  st.recovery = std::move(recovery);
  if (!st.recovery.placement.empty()) {
    // Where the servers hold the groups (checked by the caller).
    auto& place = st.recovery.placement;
    st.groups.assign(place.size(), group_state{});
    for (uint32_t g = 0; g < place.size(); ++g) {
      auto& gs = st.groups[g];
      gs.primary = place[g].primary;
      gs.view = st.recovery.initial_view;
      st.servers.at(gs.primary).holds.insert(g);
      if (place[g].backup >= 0 && st.recovery.replicas > 0) {
        gs.backup = place[g].backup;
        st.servers.at(static_cast<size_t>(gs.backup)).holds.insert(g);
      }
    }
    for (auto& s : st.servers) {
      if (s.actor) {
        self->monitor(s.actor);
        continue;
      }
      // A server that left the job before this dispatcher started.
      s.alive = false;
      s.retired = true;
    }
    ensure_backups(self);
    return;
  }
  auto groups = st.recovery.groups == 0 ? n : st.recovery.groups;
  st.groups.assign(groups, group_state{});
  for (uint32_t g = 0; g < groups && n > 0; ++g) {
    auto home = group_home(g, n);
    st.groups[g].primary = home;
    st.groups[g].view = st.recovery.initial_view;
    st.servers[home].holds.insert(g);
    if (st.recovery.replicas > 0 && n > 1) {
      auto b = group_backup_home(g, n);
      st.groups[g].backup = b;
      st.servers[b].holds.insert(g);
    }
  }
  // A remote server's death fails no request: CAF only reports it here.
  for (auto& s : st.servers)
    self->monitor(s.actor);
}

bool dispatch_paused(const dispatcher_state& st) {
  return std::any_of(st.groups.begin(), st.groups.end(),
                     [](const group_state& g) {
                       return g.lost || g.promoting;
                     });
}

void server_lost(dispatcher_ptr self, uint32_t p, const std::string& why) {
  auto& st = self->state;
  if (p >= st.servers.size() || !st.servers[p].alive || st.fatal)
    return;
  st.servers[p].alive = false;
  st.servers[p].holds.clear();
  telemetry::count(telemetry::node_event::ps_lost); // metrics
  log::warn("dispatcher", -1, "ps {} lost ({})", p, why);
  for (uint32_t g = 0; g < st.groups.size(); ++g) {
    auto& gs = st.groups[g];
    if (gs.adding == int64_t{p})
      gs.adding = -1;
    if (gs.backup == int64_t{p}) {
      gs.backup = -1;
      if (!gs.lost && st.servers[gs.primary].alive) {
        log::warn("dispatcher", -1,
                  "group {} runs without a backup until one is rebuilt", g);
        configure(self, gs.primary,
                  replica_config{g, gs.view, true, nullptr, false},
                  [](const caf::error&) {});
      }
    }
  }
  bool orphaned = false;
  for (uint32_t g = 0; g < st.groups.size(); ++g) {
    auto& gs = st.groups[g];
    if (gs.primary != p || gs.lost)
      continue;
    if (gs.backup >= 0 && st.servers[gs.backup].alive) {
      promote(self, g, static_cast<uint32_t>(gs.backup));
    } else {
      gs.lost = true;
      orphaned = true;
      log::warn("dispatcher", -1,
                "group {} has no live copy: it waits for ps{} to come back",
                g, p);
    }
  }
  note_pause(self);
  if (moves_on_server_lost(self, p) && !orphaned) {
    // Leaving anyway, and every group it held is served elsewhere.
    log::info("dispatcher", -1, "ps {} was being removed: not brought back",
              p);
    return;
  }
  if (!st.recovery.bring_back) {
    if (orphaned)
      fail_job(self, caf::make_error(errc::ps_lost,
                                     fmt::format("ps{} lost and not "
                                                 "recovered: {}",
                                                 p, why)));
    return;
  }
  start_bring_back(self, p);
}

void server_back(dispatcher_ptr self, uint32_t p, ps_actor ps,
                 std::vector<uint32_t> held) {
  auto& st = self->state;
  auto& slot = st.servers[p];
  slot.returning = false;
  if (st.fatal)
    return;
  slot.actor = std::move(ps);
  slot.alive = true;
  telemetry::count(telemetry::node_event::ps_back); // metrics
  slot.holds = std::set<uint32_t>(held.begin(), held.end());
  self->monitor(slot.actor);
  log::info("dispatcher", -1, "ps {} is back{}", p,
            held.empty() ? std::string{" (empty)"}
                         : fmt::format(" holding {} group(s)", held.size()));
  for (uint32_t g = 0; g < st.groups.size(); ++g) {
    auto& gs = st.groups[g];
    if (!gs.lost || gs.primary != p)
      continue;
    if (slot.holds.count(g) > 0) {
      // Paused or cut off, not restarted, and nothing was restored in its
      // place: its state is the newest there is.
      gs.lost = false;
      log::info("dispatcher", -1,
                "group {}: ps{} is back with its state: nothing restored, no "
                "update lost",
                g, p);
      configure(self, p, replica_config{g, gs.view, true, nullptr, false},
                [](const caf::error&) {});
    } else {
      create_on(self, p, g, true);
    }
  }
  send_routes(self);
  note_pause(self);
  ensure_backups(self);
  dispatch(self);
}

void server_not_back(dispatcher_ptr self, uint32_t p, const std::string& why) {
  auto& st = self->state;
  st.servers[p].returning = false;
  bool orphaned = std::any_of(st.groups.begin(), st.groups.end(),
                              [&](const group_state& g) {
                                return g.lost && g.primary == p;
                              });
  if (orphaned)
    fail_job(self,
             caf::make_error(errc::ps_lost,
                             fmt::format("ps{} lost and not recovered: {}", p,
                                         why)));
  else
    log::warn("dispatcher", -1,
              "ps{} did not come back ({}); its groups are served elsewhere",
              p, why);
}

void group_created(dispatcher_ptr self, uint32_t g, uint32_t p, bool restored,
                   const caf::error& err) {
  auto& st = self->state;
  auto& gs = st.groups[g];
  if (!restored) {
    if (err || !st.servers[p].alive) {
      gs.adding = -1;
      if (err)
        log::warn("dispatcher", -1, "group {}: no backup on ps{}: {}", g, p,
                  self->system().render(err));
      backup_added(self, g, p, false);
      return;
    }
    st.servers[p].holds.insert(g);
    add_backup(self, g, p);
    return;
  }
  if (err) {
    fail_job(self, err);
    return;
  }
  // Restored from the newest checkpoint onto p, which serves it now at a
  // new view.
  st.servers[p].holds.insert(g);
  gs.primary = p;
  gs.backup = -1;
  ++gs.view;
  configure(self, p, replica_config{g, gs.view, true, nullptr, false},
            [=](const caf::error& err) {
              auto& gs = self->state.groups[g];
              if (err) {
                fail_job(self, err);
                return;
              }
              gs.lost = false;
              log::info("dispatcher", -1,
                        "group {}: ps{} serves it again, restored", g, p);
              send_routes(self);
              note_pause(self);
              ensure_backups(self);
              dispatch(self);
            });
}

void send_routes(dispatcher_ptr self) {
  auto& st = self->state;
  auto routes = routes_of(st);
  for (auto& w : st.workers)
    if (w.alive)
      self->send(w.actor, route_atom_v, routes);
}

void send_routes(dispatcher_ptr self, uint32_t w) {
  self->send(self->state.workers[w].actor, route_atom_v,
             routes_of(self->state));
}

void reinstall_backups(dispatcher_ptr self) {
  auto& st = self->state;
  for (uint32_t g = 0; g < st.groups.size(); ++g) {
    auto& gs = st.groups[g];
    if (gs.backup < 0 || gs.lost || !st.servers[gs.primary].alive)
      continue;
    configure(self, gs.primary,
              replica_config{g, gs.view, true,
                             caf::actor_cast<caf::strong_actor_ptr>(
                               st.servers[gs.backup].actor),
                             true, static_cast<uint32_t>(gs.backup)},
              [](const caf::error&) {});
  }
}

void maybe_prune(dispatcher_ptr self, const detail::closure_state& c) {
  auto& st = self->state;
  if (++st.since_prune < prune_every || !c.tracker)
    return;
  st.since_prune = 0;
  uint64_t first = 0;
  uint64_t watermark = 0;
  {
    std::lock_guard<std::mutex> guard{c.tracker->mtx};
    first = c.tracker->first_id;
    watermark = c.tracker->low_watermark();
  }
  for (uint32_t p = 0; p < st.servers.size(); ++p)
    if (st.servers[p].alive)
      self->send(st.servers[p].actor, prune_atom_v, first, watermark);
}

} // namespace actorps::detail
