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
#include "cluster/topology/remote_watcher.hpp"
#include "cluster/job/group_survey.hpp"
#include "cluster/net/authorization.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/net/tls.hpp"
#include "cluster/services/checkpointer.hpp"
#include "cluster/net/handshake.hpp"
#include "core/error.hpp"
#include "core/group_balance.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/seconds.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

constexpr auto hello_timeout = std::chrono::seconds(10);

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
      throw transient_failure(fmt::format("could not reach within {} s: {}",
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

std::vector<joined_member> join_each(caf::actor_system& sys,
                                     const std::vector<cluster_member>& members,
                                     const handshake& mine,
                                     const caf::actor& chief,
                                     std::chrono::milliseconds timeout,
                                     size_t must_accept,
                                     std::vector<std::string>& missed) {
  std::vector<joined_member> out(members.size());
  missed.assign(members.size(), std::string{});
  for (size_t i = 0; i < members.size(); ++i) {
    try {
      out[i] = std::move(join_members(sys, {members[i]}, mine, chief,
                                      timeout)[0]);
    } catch (const transient_failure& e) {
      missed[i] = e.what();
    } catch (const runtime_failure& e) {
      if (i < must_accept)
        throw;
      missed[i] = e.what();
    }
  }
  return out;
}

namespace {

/// join_members; with `resume`, a parameter server may have left the job
/// before this coordinator started (drained by the plan or by `actorps
/// scale`): every server is tried for a few seconds, and one that does not
/// answer while the others hold every one of the `groups` groups is not
/// expected (its entry has no node). Otherwise (a group only it can hold,
/// or a job whose servers hold nothing) it is waited for as usual.
std::vector<joined_member>
join_all(caf::actor_system& sys, const std::vector<cluster_member>& members,
         const handshake& mine, const caf::actor& chief,
         std::chrono::milliseconds timeout, bool resume, uint32_t groups) {
  if (!resume)
    return join_members(sys, members, mine, chief, timeout);
  std::vector<size_t> others;
  std::vector<size_t> servers;
  for (size_t i = 0; i < members.size(); ++i)
    (members[i].role == "ps" ? servers : others).push_back(i);
  std::vector<joined_member> out(members.size());
  std::vector<cluster_member> some;
  for (auto i : others)
    some.push_back(members[i]);
  auto got = join_members(sys, some, mine, chief, timeout);
  for (size_t k = 0; k < others.size(); ++k)
    out[others[k]] = std::move(got[k]);
  auto brief = std::min(timeout, std::chrono::milliseconds(3000));
  std::vector<cluster_member> ps;
  for (auto i : servers)
    ps.push_back(members[i]);
  std::vector<std::string> missed;
  auto reached = join_each(sys, ps, mine, chief, brief, ps.size(), missed);
  std::vector<size_t> missing;
  std::vector<ps_actor> by_index;
  for (size_t k = 0; k < servers.size(); ++k) {
    auto i = servers[k];
    if (!missed[k].empty()) {
      missing.push_back(i);
      continue;
    }
    out[i] = std::move(reached[k]);
    auto p = members[i].index;
    if (by_index.size() <= p)
      by_index.resize(p + 1);
    by_index[p] = caf::actor_cast<ps_actor>(out[i].welcome.role_actor);
  }
  if (missing.empty())
    return out;
  auto survey = survey_groups(sys, by_index, groups);
  bool all_held = survey.any_held
                  && std::all_of(survey.groups.begin(), survey.groups.end(),
                                 [](const group_survey::found& f) {
                                   return f.primary >= 0;
                                 });
  for (auto i : missing) {
    if (all_held) {
      log::info("coordinator", -1,
                "{} does not answer within {} s, and the other servers hold "
                "every group: it left the job, and is not expected",
                members[i].name(), brief.count() / 1000.0);
      continue;
    }
    out[i] = std::move(join_members(sys, {members[i]}, mine, chief,
                                    timeout)[0]);
  }
  return out;
}

} // namespace

remote_cluster::remote_cluster(caf::actor_system& sys, const job_config& cfg,
                               const cluster_spec& spec,
                               std::shared_ptr<const model> net,
                               std::chrono::milliseconds connect_timeout,
                               bool resume)
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
  watcher_ = spawn_remote_watcher(
    sys, std::chrono::milliseconds(cfg.heartbeat_interval_ms),
    std::chrono::milliseconds(cfg.heartbeat_timeout_ms), members_, mine,
    table_);
  // The servers as joined; afterwards table_->servers is the current list (a
  // recovered server replaces a lost one there).
  std::vector<ps_actor> servers;
  // Where the groups start when an earlier coordinator moved them (empty:
  // group g on server g).
  std::vector<group_place> moved_placement;
  try {
    auto joined = join_all(sys, members_, mine, watcher_, connect_timeout,
                           resume,
                           static_cast<uint32_t>(layout_->ps_sizes.size()));
    for (size_t i = 0; i < members_.size(); ++i) {
      auto& role_actor = joined[i].welcome.role_actor;
      {
        std::lock_guard<std::mutex> guard{table_->mtx};
        table_->nodes.push_back(joined[i].node);
        table_->incarnations.push_back(joined[i].welcome.node.incarnation);
      }
      if (joined[i].node) // (not a server that left)
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
    // Group g starts on server g % n (its backup on the next one).
    auto n = static_cast<uint32_t>(servers.size());
    // Where the servers hold the groups: moves of the predecessor may have
    // put them elsewhere than group g on server g % n (also on servers that
    // joined the job), which only the servers know.
    std::vector<ps_actor> spec_servers;
    {
      std::lock_guard<std::mutex> guard{table_->mtx};
      spec_servers = table_->servers;
    }
    auto groups = static_cast<uint32_t>(layout_->ps_sizes.size());
    auto survey = survey_groups(sys, spec_servers, groups);
    bool all_there = std::all_of(servers.begin(), servers.end(),
                                 [](const ps_actor& ps) { return bool(ps); });
    if (survey.any_held && (!survey.at_home(n) || !all_there)) {
      view0_ = survey.newest_view + 1;
      auto used = std::max(n, survey.servers_used());
      servers.assign(spec_servers.begin(), spec_servers.begin() + used);
      moved_placement = setup_surveyed_groups(sys, *layout_, servers, cfg,
                                              *net, survey, view0_);
      // (The servers past the job's own that hold groups joined already:
      // the next join is the server after them, first_ps_ below.)
      log::info("coordinator", -1,
                "the groups stay where an earlier coordinator moved them "
                "(view {})",
                view0_);
    } else {
      for (uint32_t p = 0; p < n; ++p)
        if (!servers[p])
          throw transient_failure(fmt::format(
            "ps{} does not answer, and no server holds the job's shards: "
            "this is not a job whose servers moved its groups away",
            p));
      std::vector<bool> held_backup(groups, false);
      uint64_t newest_view = 0;
      bool any_held = false;
      for (uint32_t p = 0; p < n; ++p) {
        auto held = groups_held(sys, servers[p], groups, &newest_view);
        any_held = any_held || !held.empty();
        auto has = [&](uint32_t g) {
          return std::find(held.begin(), held.end(), g) != held.end();
        };
        for (uint32_t g = 0; g < groups; ++g) {
          if (cfg.replicas > 0 && n > 1 && group_backup_home(g, n) == p)
            held_backup[g] = has(g);
          if (group_home(g, n) != p)
            continue;
          if (!has(g)) {
            create_shards(sys, *layout_, servers[p], g, cfg, *net);
            continue;
          }
          auto stats = group_stats(sys, servers[p], g);
          if (stats.floats != layout_->ps_sizes[g]
              || stats.shards != layout_->shards_of(g).size())
            throw runtime_failure(fmt::format(
              "ps{} holds {} shards of group {} with {} floats, this job "
              "places {} with {}",
              p, stats.shards, g, stats.floats, layout_->shards_of(g).size(),
              layout_->ps_sizes[g]));
          if (groups == n)
            log::info("coordinator", -1,
                      "ps{} already holds its {} shards (clock {}): kept", p,
                      stats.shards, stats.clock);
          else
            log::info("coordinator", -1,
                      "ps{} already holds group {}'s {} shards (clock {}): "
                      "kept",
                      p, g, stats.shards, stats.clock);
        }
      }
      // Views of a restarted coordinator start above its predecessor's
      // newest (which may have failed groups over), so that its role
      // changes are not taken for stale ones; workers, too, take its routes
      // as newer.
      view0_ = any_held ? newest_view + 1 : 0;
      setup_groups(sys, *layout_, servers, cfg, *net, held_backup, view0_);
    }
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
  auto groups = static_cast<uint32_t>(layout_->ps_sizes.size());
  groups_ = groups;
  first_ps_ = static_cast<uint32_t>(servers.size());
  ps_recovery recovery;
  recovery.replicas = cfg.replicas;
  recovery.groups = groups;
  recovery.initial_view = view0_;
  recovery.placement = std::move(moved_placement);
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
  // Workers may join a job whose examples the coordinator hands out: its
  // join desk listens at the coordinator's address (only then: a job of
  // static slices binds nothing new). Not fatal if it cannot.
  if (cfg.sharding == "dynamic" && cfg.stream_dir.empty()
      && !spec.chief.empty()) {
    desk_ = spawn_join_desk(sys, mine, watcher_);
    uint64_t dense_bytes = 0;
    for (auto n : layout_->ps_sizes)
      dense_bytes += n * sizeof(float);
    try {
      door_ = std::make_unique<gate>(
        sys, spec.chief[0], caf::actor_cast<caf::strong_actor_ptr>(desk_),
        std::set<std::string>{}, "coordinator", node_tls(),
        gate::data_handler{},
        [dense_bytes](const std::optional<node_identity>& peer) {
          return basp_limits_for(peer, dense_bytes);
        });
      log::info("coordinator", -1, "workers may join this job at {} "
                "(actorps node --role worker --join {})",
                to_string(spec.chief[0]), to_string(spec.chief[0]));
    } catch (const std::exception& e) {
      log::warn("coordinator", -1, "no worker can join this job: {}",
                e.what());
    }
  }
}

remote_cluster::~remote_cluster() {
  int status = std::uncaught_exceptions() > 0 ? 1 : 0;
  door_.reset(); // no more joins
  if (desk_)
    caf::anon_send_exit(desk_, caf::exit_reason::user_shutdown);
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
    for (size_t i = 0; i < nodes.size(); ++i) {
      // Past the members: workers that joined the running job.
      bool ps = i < members_.size() && members_[i].role == "ps";
      if (ps == servers && nodes[i]) { // a worker that left is gone
        self->send(nodes[i], shutdown_atom_v, static_cast<int32_t>(status));
        ++told;
      }
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
    if (!send_server_change(dispatcher_, f)) {
      // A join: the next server of the spec, running idle since the start.
      log::warn("coordinator", -1, "planned change of the parameter "
                "servers: {}", to_string(f));
      std::lock_guard<std::mutex> guard{table_->mtx};
      auto p = static_cast<uint32_t>(first_ps_ + joins_++);
      if (p < table_->servers.size())
        caf::anon_send(dispatcher_, ps_join_atom_v, p, table_->servers[p]);
    }
    return;
  }
  // Sent by an actor of this process, not anonymously: a node handles a
  // fault only from the coordinator that joined it (node_actor.hpp).
  caf::scoped_actor self{sys_};
  if (f.action == fault_spec::kind::join) {
    log::warn("coordinator", -1, "fault {}: a worker joins a job of "
              "processes as a process of its own (actorps node --role "
              "worker --join ADDRESS); nothing done",
              to_string(f));
    return;
  }
  if (f.action == fault_spec::kind::leave) {
    // As a SIGTERM of its process would: it finishes its closures, leaves
    // and exits 0 (the watcher tells its node).
    log::warn("coordinator", -1, "fault injection: {}", to_string(f));
    self->request(watcher_, std::chrono::minutes(1), leave_atom_v, f.index)
      .receive([](uint32_t) {},
               [&](caf::error& err) {
                 log::warn("coordinator", -1, "{}: {}", to_string(f),
                           sys_.render(err));
               });
    return;
  }
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
