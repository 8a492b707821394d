#include "cluster/sim/sim_cluster.hpp"

#include <utility>

#include <fmt/format.h>

#include "caf/send.hpp"

#include "cluster/topology/local_cluster.hpp"
#include "cluster/sim/sim_env.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

/// Refuses a fault that names a node the job does not have (before the
/// simulation starts, not when it fires).
void check_fault(const fault_spec& f, uint32_t workers, uint32_t ps) {
  if (changes_servers(f))
    throw input_error(fmt::format("fault {}: moves, adds and removes of "
                                  "parameter servers are not simulated; "
                                  "run them with actorps train or launch",
                                  to_string(f)));
  auto n = f.role == "ps" ? ps : workers;
  if (f.index >= n)
    throw input_error(fmt::format("fault {}: the job has {} {}{}",
                                  to_string(f), n, f.role,
                                  n == 1 ? "" : "s"));
  if (f.action == fault_spec::kind::error && f.role != "worker")
    throw input_error(fmt::format("fault {}: only a worker's step can "
                                  "throw",
                                  to_string(f)));
  if (f.action == fault_spec::kind::join
      || f.action == fault_spec::kind::leave)
    throw input_error(fmt::format("fault {}: workers join and leave in "
                                  "`actorps train` and under `launch`, not "
                                  "in the simulator",
                                  to_string(f)));
}

} // namespace

sim_cluster::sim_cluster(sim_env& env, const job_config& cfg,
                         std::shared_ptr<const model> net,
                         std::shared_ptr<const placement> layout,
                         std::vector<std::shared_ptr<batch_source>> data,
                         std::shared_ptr<sim_world> world)
  : env_(env),
    cfg_(cfg),
    net_(std::move(net)),
    layout_(std::move(layout)),
    data_(std::move(data)),
    world_(std::move(world)),
    wire_(wire_options_of(cfg, *layout_)),
    servers_(cfg.ps),
    links_(cfg.ps),
    workers_(cfg.workers),
    step_errors_(cfg.workers),
    snapshots_(cfg.ps) {
  for (auto& f : cfg.faults) {
    check_fault(f, cfg.workers, cfg.ps);
    if (f.action == fault_spec::kind::error && !step_errors_[f.index])
      step_errors_[f.index] = std::make_shared<step_error_switch>();
  }
  for (uint32_t p = 0; p < cfg.ps; ++p) {
    links_[p] = spawn_server(p);
    for (auto& req : shard_requests(*layout_, p, cfg_, *net_))
      env_.ask<uint64_t>(servers_[p],
                         fmt::format("creating {} on ps {}", req.variable, p),
                         create_atom_v, std::move(req));
  }
  if (cfg.replicas > 0 && cfg.ps > 1)
    setup_replicas();
  std::vector<worker_actor> workers;
  for (uint32_t w = 0; w < cfg.workers; ++w)
    workers.push_back(spawn_worker_at(w, 0));
  worker_respawn respawn = [this](uint32_t w, uint32_t incarnation) {
    return spawn_worker_at(w, incarnation);
  };
  // With every worker lost, queued closures wait connect_timeout_ms of
  // virtual time for one, as in one process.
  dispatcher_ = env_.keep(spawn_dispatcher(
    env_.sys, std::move(workers), std::move(respawn), cfg.restart_budget,
    std::chrono::milliseconds(cfg.connect_timeout_ms), links_, recovery(),
    cfg.closures_per_worker == 0 ? 1 : cfg.closures_per_worker));
}

ps_actor sim_cluster::spawn_server(uint32_t p) {
  auto ps = env_.keep(spawn_ps(env_.sys, ps_options_of(cfg_, p)));
  servers_[p] = ps;
  return env_.keep(spawn_sim_link(env_.sys, ps, p, world_));
}

worker_actor sim_cluster::spawn_worker_at(uint32_t w, uint32_t incarnation) {
  auto wo = wire_;
  wo.index = w;
  wo.incarnation = incarnation;
  wo.net = step_errors_[w] ? failing_model(net_, step_errors_[w], w) : net_;
  wo.data = data_[w];
  wo.layout = layout_;
  wo.servers = links_;
  wo.lean = true; // a thousand workers in one process
  auto worker = env_.keep(spawn_worker(env_.sys, std::move(wo)));
  workers_[w] = worker;
  return worker;
}

void sim_cluster::setup_replicas() {
  auto n = cfg_.ps;
  auto configure = [&](uint32_t g, uint32_t p, replica_config rc) {
    env_.ask<bool>(links_[p], fmt::format("setting up group {} on ps {}", g,
                                          p),
                   configure_atom_v, std::move(rc));
  };
  for (uint32_t g = 0; g < n; ++g) {
    auto b = (g + 1) % n;
    for (auto& req : shard_requests(*layout_, g, cfg_, *net_))
      env_.ask<uint64_t>(links_[b],
                         fmt::format("creating {} on ps {} (backup of group "
                                     "{})",
                                     req.variable, b, g),
                         create_atom_v, std::move(req));
    configure(g, b, replica_config{g, 0, false, nullptr, false});
    configure(g, g,
              replica_config{g, 0, true,
                             caf::actor_cast<caf::strong_actor_ptr>(
                               links_[b]),
                             false});
  }
}

ps_recovery sim_cluster::recovery() {
  // Called by the dispatcher in its own handlers (blocking = false): they
  // only spawn and send, and the dispatcher's next messages to the server
  // come after these.
  ps_recovery rec;
  rec.replicas = cfg_.replicas;
  rec.blocking = false;
  rec.bring_back = [this](uint32_t p) {
    links_[p] = spawn_server(p);
    return std::make_pair(links_[p], std::vector<uint32_t>{});
  };
  rec.create_group = [this](const ps_actor& ps, uint32_t g) {
    for (auto& req : shard_requests(*layout_, g, cfg_, *net_))
      caf::anon_send(ps, create_atom_v, std::move(req));
  };
  rec.restore_group = [this](const ps_actor& ps, uint32_t g) {
    if (snapshots_[g]) {
      caf::anon_send(ps, restore_atom_v, g, *snapshots_[g]);
      log::info("simulate", -1,
                "group {} restored from the newest checkpoint (in memory)", g);
      return;
    }
    if (!cfg_.reset_lost_ps)
      throw runtime_failure(fmt::format(
        "the shards of group {} were lost (no live copy) and cannot be "
        "restored: no checkpoint yet (set checkpoint_dir to keep them, in "
        "memory under simulation, or cluster.reset_lost_ps to start lost "
        "shards again from the initial values)",
        g));
    log::warn("simulate", -1,
              "no checkpoint to restore group {} from: it starts again from "
              "the initial values (cluster.reset_lost_ps)",
              g);
  };
  return rec;
}

void sim_cluster::inject(const fault_spec& f) {
  auto& w = *world_;
  auto now = w.now(env_.sys);
  log::warn("simulate", -1, "fault injection at {:.3f} s virtual: {}",
            static_cast<double>(now) / 1e9, to_string(f));
  bool is_ps = f.role == "ps";
  auto node = is_ps ? w.workers + f.index : f.index;
  switch (f.action) {
    case fault_spec::kind::kill:
      if (is_ps) {
        caf::anon_send_exit(servers_[f.index], caf::exit_reason::kill);
      } else {
        ++w.lives[f.index];
        caf::anon_send_exit(workers_[f.index], caf::exit_reason::kill);
      }
      return;
    case fault_spec::kind::stop:
      w.stopped[node] = {now, now + static_cast<sim_time>(f.seconds * 1e9)};
      return;
    case fault_spec::kind::drop:
      w.drop = f.share;
      return;
    case fault_spec::kind::delay:
      w.delay = f.share;
      w.delay_ns = static_cast<sim_time>(f.seconds * 1e9);
      return;
    case fault_spec::kind::error:
      step_errors_[f.index]->armed = true;
      return;
    case fault_spec::kind::move:
    case fault_spec::kind::join:
    case fault_spec::kind::leave:
      return; // refused before the simulation (check_fault)
  }
}

std::vector<group_route> sim_cluster::routes() {
  auto routes = env_.ask<std::vector<group_route>>(dispatcher_, "the routes",
                                                   route_atom_v);
  std::vector<group_route> out(cfg_.ps);
  for (auto& r : routes)
    if (r.group < out.size())
      out[r.group] = r;
  for (uint32_t g = 0; g < out.size(); ++g)
    if (!out[g].actor)
      throw runtime_failure(fmt::format("simulate: parameter-server group {} "
                                        "has no live copy",
                                        g));
  return out;
}

std::vector<ps_stats> sim_cluster::stats() {
  std::vector<ps_stats> out;
  auto rs = routes();
  for (auto& r : rs)
    out.push_back(env_.ask<ps_stats>(caf::actor_cast<ps_actor>(r.actor),
                                     fmt::format("counters of group {}",
                                                 r.group),
                                     stats_atom_v, r.group));
  return out;
}

void sim_cluster::checkpoint() {
  auto rs = routes();
  for (auto& r : rs)
    snapshots_[r.group] = env_.ask<ps_snapshot>(
      caf::actor_cast<ps_actor>(r.actor),
      fmt::format("a checkpoint of group {}", r.group), save_atom_v, r.group);
}

} // namespace actorps
