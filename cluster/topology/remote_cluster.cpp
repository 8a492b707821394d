#include "cluster/topology/remote_cluster.hpp"

#include <map>
#include <random>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"
#include "caf/blocking_actor.hpp"
#include "caf/stateful_actor.hpp"

#include "cluster/topology/node_actor.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/net/tls.hpp"
#include "cluster/services/checkpointer.hpp"
#include "cluster/net/handshake.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/seconds.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

constexpr auto hello_timeout = std::chrono::seconds(10);

/// Watches every node of the cluster for the coordinator: pings each one
/// every `interval`; a node silent for half of `timeout` is *suspected*
/// (a warning naming it and how long it has been silent), one silent for
/// `timeout`, or reported down by CAF, is *lost*. CAF's own heartbeats alone
/// took about 3 s to report a stopped node while data was flowing to it (1 s
/// when idle); the pings answer within the timeout either way. A lost worker
/// leaves service (its closure is re-queued); a lost ps is recovered (see
/// remote_cluster). The watcher is also the actor the nodes watch to notice a
/// lost coordinator.
///
/// When the coordinator itself did not run for longer than `timeout` (its
/// process was paused or swapped out), the silence it sees is its own: the
/// clocks of its peers start again instead of counting against them.
///
/// A lost worker is asked to join again (e.g. `actorps launch` restarted its
/// process, or it was only paused): every 0.5 s a detached helper dials its
/// address and says hello; once it answers, the dispatcher takes it back,
/// told whether it is a new incarnation (restarted: its data position is
/// gone).
struct watched_node {
  caf::actor node;
  std::string name;
  std::string role;
  uint32_t index = 0;
  steady_clock::time_point last_answer;
  bool suspected = false;
  bool lost = false;
};

struct watcher_state {
  std::vector<watched_node> nodes;
  dispatcher_actor dispatcher;
  steady_clock::time_point last_tick;
  bool closing = false;
  static constexpr const char* name = "watcher";
};

/// Tries once (for up to `timeout`) to join member `m` again; tells `chief`
/// (the watcher) the outcome as (dialed, slot, node, role actor,
/// incarnation) or (dialed, slot, error text).
void rejoin(caf::blocking_actor* self, cluster_member m, handshake mine,
            caf::actor chief, std::chrono::milliseconds timeout,
            uint64_t slot) {
  try {
    auto joined = join_members(self->system(), {m}, mine, chief, timeout);
    self->send(chief, dialed_atom_v, slot, joined[0].node,
               joined[0].welcome.role_actor,
               joined[0].welcome.node.incarnation);
  } catch (const std::exception& e) {
    self->send(chief, dialed_atom_v, slot, std::string{e.what()});
  }
}

using watcher_actor = caf::stateful_actor<watcher_state>;

void declare_lost(watcher_actor* self, watched_node& n, const std::string& why) {
  auto& st = self->state;
  if (n.lost || st.closing)
    return;
  n.lost = true;
  n.suspected = false;
  log::error("coordinator", -1, "lost {}: {}", n.name, why);
  if (!st.dispatcher)
    return;
  if (n.role == "worker")
    self->send(st.dispatcher, lost_atom_v, n.index);
  else
    self->send(st.dispatcher, ps_lost_atom_v, n.index);
}

caf::behavior watcher(watcher_actor* self, std::chrono::milliseconds interval,
                      std::chrono::milliseconds timeout,
                      std::vector<cluster_member> members, handshake mine,
                      std::shared_ptr<node_table> table) {
  auto try_rejoin = [=](uint64_t slot) {
    if (self->state.closing || slot >= members.size())
      return;
    self->spawn<caf::detached>(rejoin, members[slot], mine,
                               caf::actor{self}, std::chrono::seconds(2), slot);
  };
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (size_t i = 0; i < st.nodes.size(); ++i) {
      auto& n = st.nodes[i];
      if (n.node.address() != dm.source || n.lost)
        continue;
      declare_lost(self, n, self->system().render(dm.reason));
      if (n.role == "worker")
        try_rejoin(i);
    }
  });
  if (interval.count() > 0)
    self->delayed_send(self, interval, caf::tick_atom_v);
  return {
    [=](caf::actor& node, std::string& name, std::string& role,
        uint32_t index) {
      self->monitor(node);
      watched_node n;
      n.node = std::move(node);
      n.name = std::move(name);
      n.role = std::move(role);
      n.index = index;
      n.last_answer = steady_clock::now();
      self->state.nodes.push_back(std::move(n));
    },
    [=](dispatcher_actor& dispatcher) {
      self->state.dispatcher = std::move(dispatcher);
    },
    [=](caf::tick_atom) {
      auto& st = self->state;
      if (st.closing)
        return;
      auto now = steady_clock::now();
      if (st.last_tick != steady_clock::time_point{}
          && now - st.last_tick > timeout) {
        log::warn("coordinator", -1,
                  "the coordinator did not run for {:.1f} s (paused?); the "
                  "silence of its peers is not counted against them",
                  seconds(now - st.last_tick));
        for (auto& n : st.nodes)
          n.last_answer = now;
      }
      st.last_tick = now;
      for (size_t i = 0; i < st.nodes.size(); ++i) {
        auto& n = st.nodes[i];
        if (n.lost)
          continue;
        auto silent = now - n.last_answer;
        if (silent > timeout) {
          declare_lost(self, n,
                       fmt::format("no answer for {:.1f} s", seconds(silent)));
          if (n.role == "worker")
            try_rejoin(i);
          continue;
        }
        if (silent > timeout / 2 && !n.suspected) {
          n.suspected = true;
          log::warn("coordinator", -1,
                    "{} silent for {:.1f} s: suspected (lost after {:.1f} s)",
                    n.name, seconds(silent), seconds(timeout));
        }
        self->request(n.node, timeout, ping_atom_v)
          .then(
            [=](uint32_t) {
              auto& n = self->state.nodes[i];
              auto now = steady_clock::now();
              if (n.suspected && !n.lost)
                log::info("coordinator", -1, "{} answers again after {:.1f} s",
                          n.name, seconds(now - n.last_answer));
              n.suspected = false;
              n.last_answer = now;
            },
            [](caf::error&) {});
      }
      self->delayed_send(self, interval, caf::tick_atom_v);
    },
    [=](dialed_atom, uint64_t slot, caf::actor& node,
        caf::strong_actor_ptr& role_actor, uint64_t incarnation) {
      auto& st = self->state;
      if (st.closing || slot >= st.nodes.size() || !st.nodes[slot].lost)
        return;
      auto& n = st.nodes[slot];
      n.node = node;
      n.lost = false;
      n.suspected = false;
      n.last_answer = steady_clock::now();
      self->monitor(node);
      bool restarted = false;
      {
        std::lock_guard<std::mutex> guard{table->mtx};
        table->nodes.at(slot) = node;
        restarted = table->incarnations.at(slot) != incarnation;
        table->incarnations.at(slot) = incarnation;
      }
      log::info("coordinator", -1, "{} joined again ({})", n.name,
                restarted ? "restarted: a new incarnation"
                          : "the same incarnation: it was paused or cut off");
      // A ps goes back to the dispatcher from the recovery that joined it.
      if (st.dispatcher && n.role == "worker")
        self->send(st.dispatcher, replace_atom_v, n.index,
                   caf::actor_cast<worker_actor>(role_actor), restarted);
    },
    [=](dialed_atom, uint64_t slot, std::string& error) {
      if (self->state.closing)
        return;
      log::debug("coordinator", -1, "{} not back yet: {}",
                 members.at(slot).name(), error);
      self->delayed_send(self, std::chrono::milliseconds(500), rejoin_atom_v,
                         slot);
    },
    [=](rejoin_atom, uint64_t slot) { try_rejoin(slot); },
    [=](shutdown_atom) { self->state.closing = true; },
    [=](ps_drain_atom, uint64_t slot) { // a drained server: it exits 0
      if (slot >= self->state.nodes.size())
        return;
      auto& n = self->state.nodes[slot];
      n.lost = true; // no longer watched
      self->demonitor(n.node);
      self->request(n.node, std::chrono::seconds(5), shutdown_atom_v,
                    int32_t{0}).then([](uint32_t) {}, [](caf::error&) {});
    },
  };
}

} // namespace

std::string cluster_member::name() const {
  return role + std::to_string(index);
}

std::vector<joined_member> join_members(caf::actor_system& sys,
                                        const std::vector<cluster_member>& members,
                                        const handshake& mine,
                                        const caf::actor& chief,
                                        std::chrono::milliseconds timeout) {
  std::vector<joined_member> result(members.size());
  std::vector<bool> joined(members.size(), false);
  std::vector<std::string> last_error(members.size());
  auto deadline = steady_clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(50);
  size_t missing = members.size();
  bool logged_wait = false;
  // How log lines name this process.
  auto who = mine.role == "chief" ? std::string{"coordinator"} : mine.role;
  auto who_index = mine.role == "chief" ? -1 : static_cast<int>(mine.index);
  caf::scoped_actor self{sys};
  auto tls = node_tls();
  for (;;) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (joined[i])
        continue;
      auto& m = members[i];
      auto where = fmt::format("{} at {}", m.name(), to_string(m.address));
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - steady_clock::now());
      node_identity expect{m.role, m.index};
      auto r = dial(sys, m.address,
                    std::max(std::chrono::milliseconds(100),
                             std::min(left, std::chrono::milliseconds(2000))),
                    tls.get(), &expect);
      if (!r.actor) {
        if (!r.retryable)
          throw runtime_failure(fmt::format("{}: {}", where, r.error));
        last_error[i] = r.error;
        continue;
      }
      auto node = caf::actor_cast<node_actor>(r.actor);
      caf::error failure;
      node_welcome welcome;
      auto hello = mine;
      hello.ticket = r.ticket; // binds the hello to this TLS connection
      self->request(node, hello_timeout, hello_atom_v, hello, chief)
        .receive([&](node_welcome& w) { welcome = std::move(w); },
                 [&](caf::error& err) { failure = std::move(err); });
      if (failure == errc::handshake_refused) {
        auto ctx = failure.context();
        auto text = ctx.match_elements<std::string>() ? ctx.get_as<std::string>(0)
                                                      : sys.render(failure);
        throw runtime_failure(fmt::format("{} refused this {}: {}", where,
                                          mine.role, text));
      }
      if (failure) {
        last_error[i] = "handshake failed: " + sys.render(failure);
        continue;
      }
      if (auto diffs = handshake_differences(mine, welcome.node);
          !diffs.empty())
        throw runtime_failure(fmt::format("refusing {}: {}", where,
                                          join_lines(diffs)));
      if (welcome.node.role != m.role || welcome.node.index != m.index)
        throw runtime_failure(fmt::format("{} answers as {}{}: check the "
                                          "cluster spec",
                                          where, welcome.node.role,
                                          welcome.node.index));
      if (!welcome.role_actor)
        throw runtime_failure(fmt::format("{} has no {} actor", where,
                                          m.role));
      result[i].node = caf::actor_cast<caf::actor>(node);
      result[i].welcome = std::move(welcome);
      joined[i] = true;
      --missing;
      log::debug(who, who_index, "joined {}", where);
    }
    if (missing == 0)
      return result;
    if (steady_clock::now() >= deadline) {
      std::string names;
      for (size_t i = 0; i < members.size(); ++i)
        if (!joined[i])
          names += fmt::format("{}{} at {} ({})", names.empty() ? "" : ", ",
                               members[i].name(),
                               to_string(members[i].address), last_error[i]);
      throw runtime_failure(fmt::format("could not reach within {} s: {}",
                                        timeout.count() / 1000.0, names));
    }
    if (!logged_wait && backoff >= std::chrono::milliseconds(800)) {
      logged_wait = true;
      std::string names;
      for (size_t i = 0; i < members.size(); ++i)
        if (!joined[i])
          names += (names.empty() ? "" : ", ") + members[i].name();
      log::info(who, who_index, "waiting for {} (up to {} s)", names,
                timeout.count() / 1000.0);
    }
    std::this_thread::sleep_for(
      std::min(backoff, std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - steady_clock::now())
                          + std::chrono::milliseconds(1)));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

remote_cluster::remote_cluster(caf::actor_system& sys, const job_config& cfg,
                               const cluster_spec& spec,
                               std::shared_ptr<const model> net,
                               std::chrono::milliseconds connect_timeout)
  : sys_(sys),
    shutdown_timeout_(std::max<uint64_t>(cfg.heartbeat_timeout_ms, 200)) {
  layout_ = std::make_shared<const placement>(job_placement(cfg, *net));
  for (uint32_t p = 0; p < spec.ps.size(); ++p)
    members_.push_back({"ps", p, spec.ps[p]});
  for (uint32_t w = 0; w < spec.worker.size(); ++w)
    members_.push_back({"worker", w, spec.worker[w]});
  auto mine = make_handshake(cfg, *layout_, "chief", 0);
  log::info("coordinator", -1, "job {}: joining {} ps and {} workers",
            fingerprint_id(mine.job), spec.ps.size(), spec.worker.size());
  watcher_ = sys.spawn(watcher,
                       std::chrono::milliseconds(cfg.heartbeat_interval_ms),
                       std::chrono::milliseconds(cfg.heartbeat_timeout_ms),
                       members_, mine, table_);
  // The servers as joined; afterwards table_->servers is the current list (a
  // recovered server replaces a lost one there).
  std::vector<ps_actor> servers;
  try {
    auto joined = join_members(sys, members_, mine, watcher_,
                               connect_timeout);
    for (size_t i = 0; i < members_.size(); ++i) {
      auto& role_actor = joined[i].welcome.role_actor;
      {
        std::lock_guard<std::mutex> guard{table_->mtx};
        table_->nodes.push_back(joined[i].node);
        table_->incarnations.push_back(joined[i].welcome.node.incarnation);
      }
      caf::anon_send(watcher_, joined[i].node, members_[i].name(),
                     members_[i].role, members_[i].index);
      if (members_[i].role == "ps") {
        // Servers after the job's own join later (join:ps): idle till then.
        auto ps = caf::actor_cast<ps_actor>(role_actor);
        if (members_[i].index < cfg.ps)
          servers.push_back(ps);
        std::lock_guard<std::mutex> guard{table_->mtx};
        table_->servers.push_back(ps);
      } else {
        workers_.push_back(caf::actor_cast<worker_actor>(role_actor));
      }
    }
    // A ps that already holds its shards kept them from a coordinator
    // before this one (which died; this one was started with --resume or
    // joins a running job): they stay as they are.
    auto n = static_cast<uint32_t>(servers.size());
    std::vector<bool> held_backup(n, false);
    uint64_t newest_view = 0;
    bool any_held = false;
    for (uint32_t p = 0; p < n; ++p) {
      auto held = groups_held(sys, servers[p], n, &newest_view);
      any_held = any_held || !held.empty();
      auto has = [&](uint32_t g) {
        return std::find(held.begin(), held.end(), g) != held.end();
      };
      if (cfg.replicas > 0 && n > 1)
        held_backup[(p + n - 1) % n] = has((p + n - 1) % n);
      if (!has(p)) {
        create_shards(sys, *layout_, servers[p], p, cfg, *net);
        continue;
      }
      auto stats = group_stats(sys, servers[p], p);
      if (stats.floats != layout_->ps_sizes[p]
          || stats.shards != layout_->shards_of(p).size())
        throw runtime_failure(fmt::format(
          "ps{} holds {} shards with {} floats, this job places {} with {}",
          p, stats.shards, stats.floats, layout_->shards_of(p).size(),
          layout_->ps_sizes[p]));
      log::info("coordinator", -1,
                "ps{} already holds its {} shards (clock {}): kept", p,
                stats.shards, stats.clock);
    }
    // Views of a restarted coordinator start above its predecessor's newest
    // (which may have failed groups over), so that its role changes are not
    // taken for stale ones; workers, too, take its routes as newer.
    view0_ = any_held ? newest_view + 1 : 0;
    setup_groups(sys, *layout_, servers, cfg, *net, held_backup, view0_);
  } catch (...) {
    caf::anon_send_exit(watcher_, caf::exit_reason::user_shutdown);
    throw;
  }
  log::info("coordinator", -1, "every node joined; variables created");
  // Lost workers may come back (launch restarts them): with none left, the
  // queue waits for one as long as nodes may take to join.
  // A lost ps is brought back when its node is back: joined again (waiting
  // up to connect_timeout). The same incarnation (it was paused or cut off)
  // still holds its replicas; a new one (its process restarted) is empty.
  // The dispatcher then fails over, rebuilds backups and restores what has
  // no copy (see dispatcher_actor.hpp). These run in helper threads.
  auto timeout = std::chrono::milliseconds(cfg.connect_timeout_ms);
  auto layout = layout_;
  auto table = table_;
  auto watcher = watcher_;
  auto members = members_;
  auto groups = static_cast<uint32_t>(servers.size());
  groups_ = groups;
  ps_recovery recovery;
  recovery.replicas = cfg.replicas;
  recovery.initial_view = view0_;
  recovery.bring_back = [&sys, table, watcher, members, mine, timeout,
                         groups](uint32_t p) {
    uint64_t slot = 0;
    while (slot < members.size()
           && !(members[slot].role == "ps" && members[slot].index == p))
      ++slot;
    log::info("coordinator", -1, "waiting for ps{} to come back", p);
    auto joined = join_members(sys, {members.at(slot)}, mine, watcher,
                               timeout);
    auto incarnation = joined[0].welcome.node.incarnation;
    uint64_t known = 0;
    {
      std::lock_guard<std::mutex> guard{table->mtx};
      known = table->incarnations.at(slot);
    }
    auto ps = caf::actor_cast<ps_actor>(joined[0].welcome.role_actor);
    caf::anon_send(watcher, dialed_atom_v, slot, joined[0].node,
                   joined[0].welcome.role_actor, incarnation);
    // A restarted process holds nothing; a paused one what it had.
    std::vector<uint32_t> held;
    if (incarnation == known)
      held = groups_held(sys, ps, groups);
    std::lock_guard<std::mutex> guard{table->mtx};
    table->servers.at(p) = ps;
    return std::make_pair(ps, held);
  };
  recovery.create_group = [&sys, cfg, net, layout](const ps_actor& ps,
                                                   uint32_t g) {
    create_shards(sys, *layout, ps, g, cfg, *net);
  };
  recovery.restore_group = [&sys, cfg, layout](const ps_actor& ps,
                                               uint32_t g) {
    restore_ps_from_latest(sys, *layout, cfg, ps, g);
  };
  // A drained server (leave:ps:N): the watcher lets its node go (exit 0).
  recovery.retire = [watcher, members](uint32_t p, const ps_actor&) {
    for (uint64_t slot = 0; slot < members.size(); ++slot)
      if (members[slot].role == "ps" && members[slot].index == p)
        caf::anon_send(watcher, ps_drain_atom_v, slot);
  };
  dispatcher_ = spawn_dispatcher(
    sys, workers_, nullptr, 0, timeout, servers, std::move(recovery),
    cfg.closures_per_worker == 0 ? 2 : cfg.closures_per_worker);
  caf::anon_send(watcher_, dispatcher_);
  // Closure ids start at a random multiple of 2^40: a coordinator restarted
  // against running servers must not repeat the ids its predecessor used
  // (the servers would discard those pushes as duplicates).
  std::random_device rd;
  auto base = (uint64_t{rd()} % ((uint64_t{1} << 23) - 1) + 1) << 40;
  coordinator_ = std::make_unique<cluster_coordinator>(sys, dispatcher_,
                                                       cfg.max_queued,
                                                       base + 1);
}

remote_cluster::~remote_cluster() {
  int status = std::uncaught_exceptions() > 0 ? 1 : 0;
  coordinator_.reset();
  caf::anon_send_exit(dispatcher_, caf::exit_reason::user_shutdown);
  caf::anon_send(watcher_, shutdown_atom_v);
  // The workers (and any other node) first, the servers once they answered:
  // a worker that saw its servers go first would report them lost at the
  // end of a job that succeeded (a node ends its role's actor before it
  // answers). A live node answers within milliseconds, a stopped or lost
  // one is not waited for long.
  std::vector<caf::actor> nodes;
  {
    std::lock_guard<std::mutex> guard{table_->mtx};
    nodes = table_->nodes;
  }
  caf::scoped_actor self{sys_};
  for (bool servers : {false, true}) {
    size_t told = 0;
    for (size_t i = 0; i < nodes.size(); ++i)
      if (i < members_.size() && (members_[i].role == "ps") == servers) {
        self->send(nodes[i], shutdown_atom_v, static_cast<int32_t>(status));
        ++told;
      }
    size_t answered = 0;
    bool waiting = true;
    self->receive_while([&] { return waiting && answered < told; })(
      [&](uint32_t) { ++answered; }, [&](caf::error&) { ++answered; },
      caf::after(shutdown_timeout_) >> [&] { waiting = false; });
    if (answered < told)
      log::debug("coordinator", -1,
                 "{} of {} {} did not confirm the shutdown", told - answered,
                 told, servers ? "servers" : "other nodes");
  }
  caf::anon_send_exit(watcher_, caf::exit_reason::user_shutdown);
}

void remote_cluster::inject(const fault_spec& f) {
  if (changes_servers(f)) {
    log::warn("coordinator", -1, "planned change of the parameter servers: {}",
              to_string(f));
    if (f.action == fault_spec::kind::move) {
      caf::anon_send(dispatcher_, move_atom_v, f.index, f.to);
    } else if (f.action == fault_spec::kind::leave) {
      caf::anon_send(dispatcher_, ps_drain_atom_v, f.index);
    } else {
      // The next server of the spec, running idle since the start.
      std::lock_guard<std::mutex> guard{table_->mtx};
      auto p = static_cast<uint32_t>(groups_ + joins_++);
      if (p < table_->servers.size())
        caf::anon_send(dispatcher_, ps_join_atom_v, p, table_->servers[p]);
    }
    return;
  }
  // Sent by an actor of this process, not anonymously: a node handles a
  // fault only from the coordinator that joined it (node_actor.hpp).
  caf::scoped_actor self{sys_};
  std::lock_guard<std::mutex> guard{table_->mtx};
  if (f.action == fault_spec::kind::drop
      || f.action == fault_spec::kind::delay) {
    // Messages to the servers: every ps node's proxy holds them back.
    log::warn("coordinator", -1, "fault injection: {}", to_string(f));
    bool drop = f.action == fault_spec::kind::drop;
    for (size_t i = 0; i < members_.size(); ++i)
      if (members_[i].role == "ps")
        self->send(table_->nodes.at(i), chaos_atom_v,
                       drop ? f.share : -1.0, drop ? -1.0 : f.share,
                       static_cast<uint64_t>(f.seconds * 1000));
    return;
  }
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].role != f.role || members_[i].index != f.index)
      continue;
    log::warn("coordinator", -1, "fault injection: {} ({})", to_string(f),
              members_[i].name());
    if (f.action == fault_spec::kind::kill)
      self->send(table_->nodes.at(i), kill_atom_v);
    else if (f.action == fault_spec::kind::error)
      self->send(table_->nodes.at(i), fail_atom_v);
    else
      self->send(table_->nodes.at(i), freeze_atom_v,
                     static_cast<uint64_t>(f.seconds * 1000));
    return;
  }
}

std::vector<server_route> remote_cluster::routes() const {
  return routes_of(sys_, dispatcher_, layout_->ps_sizes.size());
}

void remote_cluster::resync_replicas() {
  caf::anon_send(dispatcher_, install_atom_v);
}

std::vector<ps_stats> remote_cluster::stats() {
  return ps_stats_of(sys_, dispatcher_, layout_->ps_sizes.size());
}

} // namespace actorps
