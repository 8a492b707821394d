#include "cluster/topology/local_cluster.hpp"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/after.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "core/error.hpp"
#include "core/wire_plan.hpp"
#include "cluster/job/ask.hpp"
#include "cluster/services/checkpointer.hpp"
#include "cluster/job/evaluation.hpp"
#include "cluster/topology/local_faults.hpp"
#include "cluster/topology/local_watcher.hpp"
#include "core/checkpoint.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

/// A worker's options in one process (no views or redial: the dispatcher
/// sends routes, and every server is an actor here), its wire settings from
/// `wire` (wire_options_of). `servers`: the job's first `first_ps` servers
/// (later ones joined), of which group g starts on g % first_ps.
worker_options worker_options_of(uint32_t index, uint32_t incarnation,
                                 std::shared_ptr<const model> net,
                                 std::shared_ptr<batch_source> data,
                                 std::shared_ptr<const placement> layout,
                                 std::vector<ps_actor> servers,
                                 uint32_t first_ps,
                                 const worker_options& wire) {
  auto opts = wire;
  auto groups = static_cast<uint32_t>(layout->ps_sizes.size());
  servers.resize(std::min<size_t>(servers.size(), first_ps));
  opts.index = index;
  opts.incarnation = incarnation;
  opts.net = std::move(net);
  opts.data = std::move(data);
  opts.layout = std::move(layout);
  opts.server_index = group_server_indices(
    groups, static_cast<uint32_t>(servers.size()));
  opts.servers = group_servers(servers, groups);
  return opts;
}

} // namespace

local_cluster::local_cluster(caf::actor_system& sys, const job_config& cfg,
                             std::shared_ptr<const model> net,
                             const dataset_fn& fn,
                             std::shared_ptr<range_reader> ranges)
  : sys_(sys),
    fn_(fn),
    net_(net),
    first_workers_(cfg.workers),
    cfg_(cfg),
    faults_(std::make_shared<local_faults>(
      cfg.faults, servers_ever(cfg.faults, cfg.ps), cfg.workers)) {
  layout_ = std::make_shared<const placement>(job_placement(cfg, *net));
  // Build the datasets first: their errors are the user's to fix.
  std::vector<std::shared_ptr<batch_source>> data;
  for (uint32_t w = 0; w < cfg.workers; ++w)
    data.push_back(fn(input_context{cfg.workers, w}));
  auto faults = faults_;
  auto wire = wire_options_of(cfg, *layout_);
  if (ranges)
    wire.ranges = std::move(ranges);
  wire_ = wire;
  for (uint32_t p = 0; p < cfg.ps; ++p)
    servers_.push_back(
      faults->wrap_ps(sys, p, spawn_ps(sys, ps_options_of(cfg, p))));
  try {
    create_variables(sys, *layout_, servers_, cfg, *net);
    setup_groups(sys, *layout_, servers_, cfg, *net, {}, 0);
  } catch (...) {
    // ~local_cluster does not run for a constructor that throws, and
    // ~actor_system would wait for these servers forever.
    for (auto& p : servers_)
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    throw;
  }
  for (uint32_t w = 0; w < cfg.workers; ++w)
    workers_.push_back(faults->wrap_worker(
      sys, w,
      spawn_worker(sys, worker_options_of(w, 0, faults->model_for(w, net),
                                          data[w], layout_, servers_,
                                          cfg.ps, wire))));
  shared_->workers = workers_;
  shared_->servers = servers_;
  // Supervision: a lost worker comes back as a new actor over the same data
  // iterator, which goes on where the lost one stopped.
  auto layout = layout_;
  auto shared = shared_;
  // (It starts with group g on server g % ps; the dispatcher sends it the
  // current routes before its first closure.)
  worker_respawn respawn = [&sys, net, data, layout, shared, faults, wire,
                            ps = cfg.ps](uint32_t w, uint32_t incarnation) {
    std::lock_guard<std::mutex> guard{shared->mtx};
    auto source = w < data.size() ? data[w]
                                  : shared->joined_data.at(w - data.size());
    auto worker = faults->wrap_worker(
      sys, w,
      spawn_worker(sys, worker_options_of(w, incarnation,
                                          faults->model_for(w, net), source,
                                          layout, shared->servers, ps,
                                          wire)));
    shared->spawned.push_back(caf::actor_cast<caf::actor>(worker));
    shared->workers.at(w) = worker;
    return worker;
  };
  // A lost ps comes back as a new, empty actor. The dispatcher fails its
  // groups over to their backups (with replicas), makes it the backup of
  // groups without one, and restores groups without any copy on it from the
  // newest checkpoint (with none, the job fails unless cluster.reset_lost_ps
  // allows starting them again from the initial values). These run in
  // helper threads of the dispatcher's.
  ps_recovery recovery;
  recovery.replicas = cfg.replicas;
  recovery.groups = groups_of(cfg);
  recovery.bring_back = [&sys, cfg, shared, faults](uint32_t p) {
    auto ps = faults->wrap_ps(sys, p, spawn_ps(sys, ps_options_of(cfg, p)));
    std::lock_guard<std::mutex> guard{shared->mtx};
    shared->spawned.push_back(caf::actor_cast<caf::actor>(ps));
    shared->servers.at(p) = ps;
    return std::make_pair(ps, std::vector<uint32_t>{});
  };
  recovery.create_group = [&sys, cfg, net, layout](const ps_actor& ps,
                                                   uint32_t g) {
    create_shards(sys, *layout, ps, g, cfg, *net);
  };
  recovery.restore_group = [&sys, cfg, layout](const ps_actor& ps,
                                               uint32_t g) {
    restore_ps_from_latest(sys, *layout, cfg, ps, g);
  };
  // A drained server (leave:ps:N) ends; it is no longer watched.
  recovery.retire = [shared](uint32_t p, const ps_actor& ps) {
    {
      std::lock_guard<std::mutex> guard{shared->mtx};
      if (p < shared->servers.size())
        shared->servers[p] = ps_actor{};
    }
    caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
  };
  // With every worker lost and none restarting, queued closures wait
  // connect_timeout_ms for one (as across processes) before they fail.
  dispatcher_ = spawn_dispatcher(
    sys, workers_, std::move(respawn), cfg.restart_budget,
    std::chrono::milliseconds(cfg.connect_timeout_ms), servers_,
    std::move(recovery),
    cfg.closures_per_worker == 0 ? 1 : cfg.closures_per_worker);
  coordinator_ = std::make_unique<cluster_coordinator>(sys, dispatcher_,
                                                       cfg.max_queued);
  if (cfg.heartbeat_interval_ms > 0)
    watcher_ = spawn_local_watcher(
      sys,
      [shared] {
        std::vector<std::pair<std::string, caf::actor>> roles;
        std::lock_guard<std::mutex> guard{shared->mtx};
        for (uint32_t p = 0; p < shared->servers.size(); ++p)
          if (shared->servers[p]) // (not a server that left)
            roles.emplace_back("ps" + std::to_string(p),
                               caf::actor_cast<caf::actor>(
                                 shared->servers[p]));
        for (uint32_t w = 0; w < shared->workers.size(); ++w)
          if (shared->workers[w]) // not one that left
            roles.emplace_back("worker" + std::to_string(w),
                               caf::actor_cast<caf::actor>(shared->workers[w]));
        return roles;
      },
      std::chrono::milliseconds(cfg.heartbeat_interval_ms),
      std::chrono::milliseconds(cfg.heartbeat_timeout_ms));
}

local_cluster::~local_cluster() {
  if (watcher_)
    caf::anon_send_exit(watcher_, caf::exit_reason::user_shutdown);
  coordinator_.reset();
  {
    // Wait for the dispatcher to end: it may be restarting a worker.
    caf::scoped_actor self{sys_};
    self->monitor(dispatcher_);
    caf::anon_send_exit(dispatcher_, caf::exit_reason::user_shutdown);
    self->receive([](caf::down_msg&) {});
  }
  for (auto& w : workers_)
    caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  for (auto& p : servers_)
    caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  std::lock_guard<std::mutex> guard{shared_->mtx};
  for (auto& a : shared_->spawned)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

std::vector<server_route> local_cluster::routes() const {
  return routes_of(sys_, dispatcher_, layout_->ps_sizes.size());
}

void local_cluster::resync_replicas() {
  caf::anon_send(dispatcher_, install_atom_v);
}

void local_cluster::join_worker() {
  uint32_t w = 0;
  std::shared_ptr<batch_source> data;
  {
    std::lock_guard<std::mutex> guard{shared_->mtx};
    w = static_cast<uint32_t>(shared_->workers.size());
  }
  // With dynamic shards every source is the same empty one (the closures
  // carry their examples); the input context is the new worker's.
  data = fn_(input_context{w + 1, w});
  worker_actor worker;
  {
    std::lock_guard<std::mutex> guard{shared_->mtx};
    worker = spawn_worker(sys_, worker_options_of(w, 0, net_, data, layout_,
                                                  shared_->servers, cfg_.ps,
                                                  wire_));
    shared_->spawned.push_back(caf::actor_cast<caf::actor>(worker));
    shared_->workers.push_back(worker);
    shared_->joined_data.push_back(data);
  }
  auto in_service = detail::ask<uint32_t>(sys_, dispatcher_,
                                          "worker " + std::to_string(w)
                                            + " joining",
                                          std::chrono::seconds(10),
                                          enlist_atom_v, w, worker);
  log::info("coordinator", -1, "worker {} joined the running job; {} in "
            "service",
            w, in_service);
}

void local_cluster::leave_worker(uint32_t w) {
  worker_actor worker;
  {
    std::lock_guard<std::mutex> guard{shared_->mtx};
    if (w < shared_->workers.size())
      worker = shared_->workers[w];
  }
  if (!worker) {
    log::warn("coordinator", -1, "worker {} cannot leave: it is not in this "
              "job",
              w);
    return;
  }
  caf::scoped_actor self{sys_};
  caf::error failure;
  self->request(dispatcher_, caf::infinite, leave_atom_v, w)
    .receive([](uint32_t) {}, [&](caf::error& err) { failure = err; });
  if (failure) {
    log::warn("coordinator", -1, "worker {} did not leave: {}", w,
              sys_.render(failure));
    return;
  }
  std::lock_guard<std::mutex> guard{shared_->mtx};
  shared_->workers[w] = worker_actor{};
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

void local_cluster::change_servers(const fault_spec& f) {
  if (!send_server_change(dispatcher_, f)) {
    // A join: a new, empty server with the next index; the dispatcher
    // learns it.
    log::warn("coordinator", -1, "planned change of the parameter servers: "
              "{}", to_string(f));
    std::lock_guard<std::mutex> guard{shared_->mtx};
    auto p = static_cast<uint32_t>(shared_->servers.size());
    auto ps = faults_->wrap_ps(sys_, p, spawn_ps(sys_, ps_options_of(cfg_, p)));
    shared_->spawned.push_back(caf::actor_cast<caf::actor>(ps));
    shared_->servers.push_back(ps);
    caf::anon_send(dispatcher_, ps_join_atom_v, p, ps);
  }
}

void local_cluster::inject(const fault_spec& f) {
  if (changes_servers(f))
    return change_servers(f);
  if (f.action == fault_spec::kind::join) {
    log::warn("coordinator", -1, "event: {}", to_string(f));
    join_worker();
    return;
  }
  if (f.action == fault_spec::kind::leave) {
    log::warn("coordinator", -1, "event: {}", to_string(f));
    leave_worker(f.index);
    return;
  }
  caf::actor target;
  {
    std::lock_guard<std::mutex> guard{shared_->mtx};
    if (f.role == "ps" && f.index < shared_->servers.size())
      target = caf::actor_cast<caf::actor>(shared_->servers[f.index]);
    else if (f.role == "worker" && f.index < shared_->workers.size())
      target = caf::actor_cast<caf::actor>(shared_->workers[f.index]);
  }
  log::warn("coordinator", -1, "fault injection: {}", to_string(f));
  faults_->inject(f, target);
}

std::vector<ps_stats> local_cluster::stats() {
  return ps_stats_of(sys_, dispatcher_, layout_->ps_sizes.size());
}

fit_history fit(const job_config& cfg, std::shared_ptr<const model> net,
                const dataset_fn& fn, const fit_options& opts) {
  validate(cfg);
  if (!net)
    throw input_error("fit: no model");
  system_config sys_cfg{cfg.threads};
  caf::actor_system sys{sys_cfg};
  local_cluster cl{sys, cfg, net, fn};
  return fit(cl, *net, opts);
}

} // namespace actorps
