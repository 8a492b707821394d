// The dispatcher's planned moves of replica groups while training goes on: a
// parameter server joins (it holds nothing until moves go to it), a group's
// replica moves from one server to another, and a server leaves (drained:
// its replicas move to the others, then it stops).
//
// A move of group g from server S to server T reuses chain replication
// (actors/ps_chain.hpp, actors/ps_move.hpp): T becomes g's backup (its shards
// are created, then S installs its state there and forwards every later
// update: the copy runs in the background while S serves); if S is g's
// primary, S then hands g over (pushes wait at S until T has every update S
// applied), T is made the primary at a new view, the workers get the new
// route and send the waiting pushes to T (a duplicate there is known by its
// update id), and S drops g, answering stale_view ("moved") to late
// requests. Without replicas (cluster.replicas 0) T is g's backup only for
// the move. One move runs at a time.

#include <algorithm>
#include <chrono>

#include "caf/actor_system.hpp"

#include "actors/dispatcher_state.hpp"
#include "core/fault_spec.hpp"
#include "core/group_balance.hpp"
#include "core/log.hpp"

namespace actorps::detail {

namespace {

using std::chrono::steady_clock;

/// How long the dispatcher waits for a handoff (the server gives up after
/// 10 s by itself) and for a server to drop a group.
constexpr auto handoff_wait = std::chrono::seconds(30);
constexpr auto drop_wait = std::chrono::seconds(10);

/// A move whose group is busy (a backup being built, a failover) tries
/// again this often, at most this many times.
constexpr auto busy_retry = std::chrono::milliseconds(50);
constexpr uint32_t busy_tries = 600;

double move_seconds(steady_clock::time_point t0) {
  return std::chrono::duration<double>(steady_clock::now() - t0).count();
}

/// Whether server `p` can take a replica: alive, not leaving.
bool can_take(const dispatcher_state& st, uint32_t p) {
  auto& s = st.servers[p];
  return s.alive && !s.returning && !s.draining && !s.retired;
}

/// Stops drained server `p`: it is forgotten (no longer watched, never
/// brought back) and recovery.retire ends it.
void retire_server(dispatcher_ptr self, uint32_t p) {
  auto& st = self->state;
  auto& s = st.servers[p];
  auto actor = s.actor;
  bool was_alive = s.alive;
  s.alive = false;
  s.retired = true;
  s.draining = false;
  s.holds.clear();
  if (actor)
    self->demonitor(actor.address());
  log::info("dispatcher", -1,
            "ps {} left the job: its replicas are served by the others", p);
  if (was_alive && st.recovery.retire)
    st.recovery.retire(p, actor);
}

/// "ps0 2, ps1 2, ps2 2": the primaries each server in service serves.
std::string primaries_per_server(const dispatcher_state& st) {
  std::vector<uint32_t> count(st.servers.size(), 0);
  for (auto& gs : st.groups)
    if (!gs.lost)
      ++count[gs.primary];
  std::string out;
  for (uint32_t p = 0; p < st.servers.size(); ++p)
    if (!st.servers[p].retired)
      out += fmt::format("{}ps{} {}", out.empty() ? "" : ", ", p, count[p]);
  return out;
}

/// One move of `req` ended: replies once all have.
void finish_request(dispatcher_ptr self, const std::shared_ptr<move_request>& req) {
  if (!req || req->left == 0 || --req->left > 0)
    return;
  auto& st = self->state;
  if (req->rebalance) {
    log::info("dispatcher", -1,
              "rebalanced onto ps{}: {} group(s) moved{}; primaries per "
              "server: {}",
              req->rebalance_to, req->moved,
              req->failures.empty() ? std::string{}
                                    : " (not moved: " + req->failures + ")",
              primaries_per_server(st));
    return;
  }
  if (req->retire >= 0) {
    auto p = static_cast<uint32_t>(req->retire);
    if (st.servers[p].holds.empty()) {
      retire_server(self, p);
    } else {
      st.servers[p].draining = false;
      auto text = fmt::format("ps {} not removed: it still holds {} "
                              "replica(s) ({})",
                              p, st.servers[p].holds.size(), req->failures);
      log::error("dispatcher", -1, "{}", text);
      req->promise.deliver(caf::make_error(errc::bad_message, text));
      return;
    }
  }
  if (!req->failures.empty() && req->retire < 0)
    req->promise.deliver(caf::make_error(errc::bad_message, req->failures));
  else
    req->promise.deliver(req->moved);
}

/// Ends the running move (`why` empty: done) and starts the next.
void end_move(dispatcher_ptr self, const std::string& why) {
  auto& st = self->state;
  auto m = st.move;
  st.moving = false;
  st.move = running_move{};
  auto g = m.plan.group;
  st.groups[g].moving = false;
  if (why.empty()) {
    ++m.plan.request->moved;
    ++st.moves_done;
  } else {
    log::warn("dispatcher", -1, "moving group {} from ps{} to ps{}: {}", g,
              m.plan.from, m.to, why);
    auto& f = m.plan.request->failures;
    f += fmt::format("{}group {}: {}", f.empty() ? "" : "; ", g, why);
  }
  finish_request(self, m.plan.request);
  ensure_backups(self);
  dispatch(self);
  next_move(self);
}

/// Adds what group `g`'s replica on server `t` holds (it just moved there)
/// to the moves' totals, and logs it.
void count_moved(dispatcher_ptr self, uint32_t g, uint32_t t) {
  auto& st = self->state;
  if (!st.servers[t].alive)
    return;
  self->request(st.servers[t].actor, std::chrono::seconds(10), stats_atom_v, g)
    .then(
      [=](ps_stats& s) {
        auto& st = self->state;
        st.moved_floats += s.floats;
        st.moved_table_rows += s.table_rows;
        log::info("dispatcher", -1,
                  "group {} on ps{}: {} floats and {} table rows moved "
                  "(moves so far: {}, {} floats, {} table rows)",
                  g, t, s.floats, s.table_rows, st.moves_done,
                  st.moved_floats, st.moved_table_rows);
      },
      [=](caf::error& err) {
        log::debug("dispatcher", -1, "group {}: no counters from ps{}: {}",
                   g, t, self->system().render(err));
      });
}

/// Whether the move numbered `number` still runs.
bool still_running(dispatcher_ptr self, uint64_t number) {
  return self->state.moving && self->state.move.number == number;
}

/// Server `p` forgets group `g` (it moved away at `view`).
void drop_on(dispatcher_ptr self, uint32_t p, uint32_t g, uint64_t view) {
  auto& st = self->state;
  st.servers[p].holds.erase(g);
  if (!st.servers[p].alive)
    return;
  self->request(st.servers[p].actor, drop_wait, drop_atom_v, g, view)
    .then([](bool) {},
          [=](caf::error& err) {
            log::debug("dispatcher", -1, "ps{} did not drop group {}: {}", p,
                       g, self->system().render(err));
          });
}

/// The server the running move's group goes to when none was named: one
/// that can take replicas and holds none of this group, holding the fewest
/// replicas; else one that holds the group's other copy (-1: none).
int64_t choose_target(const dispatcher_state& st, uint32_t g, uint32_t from) {
  int64_t best = -1;
  for (uint32_t q = 0; q < st.servers.size(); ++q) {
    if (q == from || !can_take(st, q) || st.servers[q].holds.count(g) > 0)
      continue;
    if (best < 0 || st.servers[q].holds.size() < st.servers[best].holds.size())
      best = q;
  }
  for (uint32_t q = 0; q < st.servers.size() && best < 0; ++q)
    if (q != from && can_take(st, q))
      best = q;
  return best;
}

/// The handoff is done: the target takes the group over at a new view, the
/// workers get its route, and the old primary drops the group.
void take_over(dispatcher_ptr self) {
  auto& st = self->state;
  auto& m = st.move;
  auto g = m.plan.group;
  auto s = m.plan.from;
  auto t = m.to;
  auto& gs = st.groups[g];
  if (gs.lost || gs.primary != s || gs.backup != int64_t{t}
      || !st.servers[s].alive || !st.servers[t].alive)
    return end_move(self, "the group changed hands during the handoff");
  auto handed = move_seconds(m.handoff);
  // Until the target confirms, the old primary (fenced, holding every
  // update) counts as the group's backup: were the target lost now, the
  // failover would give the group back to it.
  ++gs.view;
  gs.primary = t;
  gs.backup = s;
  gs.promoting = true;
  m.taking_over = true;
  auto view = gs.view;
  auto number = m.number;
  configure(
    self, t, replica_config{g, view, true, nullptr, false},
    [=](const caf::error& err) {
      if (!still_running(self, number))
        return;
      auto& st = self->state;
      auto& m = st.move;
      auto& gs = st.groups[g];
      gs.promoting = false;
      if (err) {
        // The old primary serves again, at the new view, alone (lost too:
        // the group waits for it to come back).
        gs.primary = s;
        gs.backup = -1;
        if (st.servers[s].alive)
          configure(self, s, replica_config{g, view, true, nullptr, false},
                    [](const caf::error&) {});
        else
          gs.lost = true;
        send_routes(self);
        return end_move(self, fmt::format("ps{} could not take over: {}", t,
                                          self->system().render(err)));
      }
      gs.backup = -1;
      send_routes(self);
      auto stall = move_seconds(m.handoff);
      st.longest_move_stall_s = std::max(st.longest_move_stall_s, stall);
      log::info("dispatcher", -1,
                "group {} moved from ps{} to ps{} (view {}): pushes to it "
                "waited {:.1f} ms (handoff {:.1f} ms); the move took {:.3f} s "
                "(the longest wait of {} group moves so far: {:.1f} ms)",
                g, s, t, view, stall * 1000, handed * 1000,
                move_seconds(m.start), st.moves_done + 1,
                st.longest_move_stall_s * 1000);
      drop_on(self, s, g, view);
      end_move(self, "");
      count_moved(self, g, t);
    });
}

/// The target holds a copy kept up to date: the primary hands over.
void start_handoff(dispatcher_ptr self) {
  auto& st = self->state;
  auto& m = st.move;
  auto g = m.plan.group;
  auto s = m.plan.from;
  auto view = st.groups[g].view;
  auto number = m.number;
  m.handoff = steady_clock::now();
  self->request(st.servers[s].actor, handoff_wait, handoff_atom_v, g, view)
    .then(
      [=](uint64_t) {
        if (still_running(self, number))
          take_over(self);
      },
      [=](caf::error& err) {
        if (!still_running(self, number))
          return;
        auto& st = self->state;
        auto& gs = st.groups[g];
        auto t = st.move.to;
        // Without replication the target was a backup for the move only.
        if (st.recovery.replicas == 0 && gs.primary == s
            && gs.backup == int64_t{t} && st.servers[s].alive) {
          gs.backup = -1;
          configure(self, s, replica_config{g, gs.view, true, nullptr, false},
                    [](const caf::error&) {});
          drop_on(self, t, g, gs.view);
        }
        end_move(self, fmt::format("ps{} did not hand the group over: {}", s,
                                   self->system().render(err)));
      });
}

/// Makes the running move's target the group's backup (ends in
/// backup_added).
void attach_target(dispatcher_ptr self) {
  auto& st = self->state;
  auto& m = st.move;
  auto g = m.plan.group;
  auto& gs = st.groups[g];
  // The old backup (if any) no longer gets the primary's updates once the
  // target replaces it: it cannot take over from now on.
  gs.backup = -1;
  gs.adding = m.to;
  if (st.servers[m.to].holds.count(g) > 0)
    add_backup(self, g, m.to);
  else
    create_on(self, m.to, g, false);
}

void start_move(dispatcher_ptr self) {
  auto& st = self->state;
  auto& m = st.move;
  auto g = m.plan.group;
  auto s = m.plan.from;
  auto& gs = st.groups[g];
  if (st.fatal)
    return end_move(self, "the job is failing");
  if (!st.servers[s].alive || st.servers[s].holds.count(g) == 0)
    return end_move(self, fmt::format("ps{} no longer holds it", s));
  if (gs.lost || gs.promoting || gs.adding >= 0) {
    if (++m.waits > busy_tries)
      return end_move(self, "the group stayed busy (a failover or a backup "
                            "being built)");
    self->delayed_send(self, busy_retry, move_atom_v, m.number);
    return;
  }
  auto to = m.plan.to >= 0 ? m.plan.to : choose_target(st, g, s);
  if (to < 0 || !can_take(st, static_cast<uint32_t>(to)))
    return end_move(self, "no server can take it");
  m.to = static_cast<uint32_t>(to);
  m.old_backup = gs.backup;
  gs.moving = true;
  auto t = m.to;
  if (gs.primary == s) {
    log::info("dispatcher", -1,
              "moving group {} (its primary) from ps{} to ps{} (view {})", g,
              s, t, gs.view);
    if (gs.backup == int64_t{t})
      return start_handoff(self); // already an up-to-date copy
    return attach_target(self);
  }
  // `s` holds a backup copy (or a stale one a move left behind).
  if (gs.backup != int64_t{s}) {
    drop_on(self, s, g, gs.view);
    return end_move(self, "");
  }
  if (st.servers[t].holds.count(g) > 0) {
    // The target holds the group's other copy: this one goes, and the
    // group runs without a backup until one is built elsewhere.
    gs.backup = -1;
    configure(self, gs.primary,
              replica_config{g, gs.view, true, nullptr, false},
              [](const caf::error&) {});
    drop_on(self, s, g, gs.view);
    return end_move(self, "");
  }
  log::info("dispatcher", -1, "moving group {}'s backup from ps{} to ps{}",
            g, s, t);
  attach_target(self);
}

} // namespace

caf::error check_move(const dispatcher_state& st, uint32_t from, uint32_t to) {
  auto n = st.servers.size();
  auto refuse = [&](const std::string& why) {
    return caf::make_error(errc::bad_message,
                           fmt::format("move from ps{} to ps{} refused: {}",
                                       from, to, why));
  };
  if (from >= n || to >= n)
    return refuse(fmt::format("the job has {} parameter servers (0 to {})", n,
                              n - 1));
  if (from == to)
    return refuse("the same server");
  if (!st.servers[from].alive)
    return refuse(fmt::format("ps{} is not serving (lost or left)", from));
  if (!can_take(st, to))
    return refuse(fmt::format("ps{} cannot take replicas (lost, leaving or "
                              "left)",
                              to));
  if (st.servers[from].holds.empty())
    return refuse(fmt::format("ps{} holds no replica", from));
  return {};
}

caf::error check_drain(const dispatcher_state& st, uint32_t p) {
  auto n = st.servers.size();
  auto refuse = [&](const std::string& why) {
    return caf::make_error(errc::bad_message,
                           fmt::format("removing ps{} refused: {}", p, why));
  };
  if (p >= n)
    return refuse(fmt::format("the job has {} parameter servers (0 to {})", n,
                              n - 1));
  if (st.servers[p].retired)
    return refuse("it left the job already");
  if (st.servers[p].draining)
    return refuse("it is being removed already");
  if (!st.servers[p].alive)
    return refuse("it is lost (it is recovered, not removed)");
  auto others = std::count_if(st.servers.begin(), st.servers.end(),
                              [&](const ps_slot& s) {
                                return &s != &st.servers[p] && s.alive
                                       && !s.draining && !s.retired;
                              });
  if (others == 0)
    return refuse("it is the last parameter server: its replicas would be "
                  "the last copy of their groups, with nowhere to go");
  return {};
}

void plan_moves(dispatcher_ptr self, uint32_t from, uint32_t to,
                std::shared_ptr<move_request> req) {
  auto& st = self->state;
  log::info("dispatcher", -1, "moving the {} replica(s) of ps{} to ps{}",
            st.servers[from].holds.size(), from, to);
  for (auto g : st.servers[from].holds) {
    ++req->left;
    st.moves.push_back(planned_move{g, from, int64_t{to}, req});
  }
  next_move(self);
}

void plan_drain(dispatcher_ptr self, uint32_t p,
                std::shared_ptr<move_request> req) {
  auto& st = self->state;
  auto& s = st.servers[p];
  s.draining = true;
  req->retire = p;
  log::info("dispatcher", -1,
            "removing ps{}: its {} replica(s) move to the other servers", p,
            s.holds.size());
  for (auto g : s.holds) {
    ++req->left;
    st.moves.push_back(planned_move{g, p, -1, req});
  }
  if (req->left == 0) {
    req->left = 1;
    finish_request(self, req);
    return;
  }
  next_move(self);
}

namespace {

/// Queues the moves of primaries that level server `to` (just joined)
/// with the others (rebalance_moves); logs them, or why there are none.
void rebalance_to(dispatcher_ptr self, uint32_t to) {
  auto& st = self->state;
  auto n = static_cast<uint32_t>(st.servers.size());
  std::vector<std::vector<uint32_t>> primaries(n);
  for (uint32_t g = 0; g < st.groups.size(); ++g)
    if (!st.groups[g].lost)
      primaries[st.groups[g].primary].push_back(g);
  std::vector<bool> may_give(n);
  for (uint32_t p = 0; p < n; ++p)
    may_give[p] = can_take(st, p);
  auto plan = rebalance_moves(primaries, may_give, to);
  if (plan.empty()) {
    log::info("dispatcher", -1,
              "ps {}: no group to spare: cluster.groups is {} (primaries per "
              "server: {})",
              to, st.groups.size(), primaries_per_server(st));
    return;
  }
  auto req = std::make_shared<move_request>();
  req->rebalance = true;
  req->rebalance_to = to;
  std::string list;
  for (auto& m : plan) {
    list += fmt::format("{}group {} from ps{}", list.empty() ? "" : ", ",
                        m.group, m.from);
    ++req->left;
    st.moves.push_back(planned_move{m.group, m.from, int64_t{m.to}, req});
  }
  log::info("dispatcher", -1, "rebalancing onto ps{}: {} ({} of {} groups)",
            to, list, plan.size(), st.groups.size());
  next_move(self);
}

} // namespace

caf::error join_server(dispatcher_ptr self, uint32_t index, ps_actor ps) {
  auto& st = self->state;
  if (index != st.servers.size() || !ps)
    return caf::make_error(errc::bad_message,
                           fmt::format("ps{} cannot join: the next parameter "
                                       "server index is {}",
                                       index, st.servers.size()));
  st.servers.emplace_back();
  st.servers.back().actor = std::move(ps);
  self->monitor(st.servers.back().actor);
  log::info("dispatcher", -1,
            "ps {} joined the job (it holds nothing until replicas move to "
            "it)",
            index);
  ensure_backups(self);
  rebalance_to(self, index);
  return {};
}

void next_move(dispatcher_ptr self) {
  auto& st = self->state;
  if (st.moving || st.moves.empty())
    return;
  st.moving = true;
  st.move = running_move{};
  st.move.plan = std::move(st.moves.front());
  st.moves.pop_front();
  st.move.number = ++st.move_number;
  st.move.start = steady_clock::now();
  start_move(self);
}

void retry_move(dispatcher_ptr self, uint64_t number) {
  if (still_running(self, number))
    start_move(self);
}

void backup_added(dispatcher_ptr self, uint32_t g, uint32_t b, bool ok) {
  auto& st = self->state;
  if (!st.moving || st.move.plan.group != g || st.move.to != b
      || !st.groups[g].moving)
    return;
  auto& m = st.move;
  if (!ok)
    return end_move(self, fmt::format("ps{} could not take a copy", b));
  auto& gs = st.groups[g];
  if (gs.primary == m.plan.from)
    return start_handoff(self);
  // A backup moved: the copy on the source goes.
  drop_on(self, m.plan.from, g, gs.view);
  log::info("dispatcher", -1,
            "group {}'s backup moved from ps{} to ps{} in {:.3f} s", g,
            m.plan.from, b, move_seconds(m.start));
  end_move(self, "");
  count_moved(self, g, b);
}

bool moves_on_server_lost(dispatcher_ptr self, uint32_t p) {
  auto& st = self->state;
  auto& m = st.move;
  // (The source lost while the target takes over: the take-over goes on,
  // the target has every update.)
  if (st.moving && (m.plan.from == p || m.to == p)
      && !(m.taking_over && m.plan.from == p))
    end_move(self, fmt::format("ps{} was lost during the move", p));
  return st.servers[p].draining;
}

} // namespace actorps::detail

namespace actorps {

bool send_server_change(const dispatcher_actor& dispatcher,
                        const fault_spec& f) {
  if (f.role != "ps"
      || (f.action != fault_spec::kind::move
          && f.action != fault_spec::kind::leave))
    return false;
  log::warn("coordinator", -1, "planned change of the parameter servers: {}",
            to_string(f));
  if (f.action == fault_spec::kind::move)
    caf::anon_send(dispatcher, move_atom_v, f.index, f.to);
  else
    caf::anon_send(dispatcher, ps_drain_atom_v, f.index);
  return true;
}

} // namespace actorps
