#include "cluster/topology/local_cluster.hpp"

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

constexpr auto setup_timeout = std::chrono::seconds(30);

/// A worker's options in one process (no views or redial: the dispatcher
/// sends routes, and every server is an actor here), its wire settings from
/// `wire` (wire_options_of).
worker_options worker_options_of(uint32_t index, uint32_t incarnation,
                                 std::shared_ptr<const model> net,
                                 std::shared_ptr<batch_source> data,
                                 std::shared_ptr<const placement> layout,
                                 std::vector<ps_actor> servers,
                                 const worker_options& wire) {
  auto opts = wire;
  opts.index = index;
  opts.incarnation = incarnation;
  opts.net = std::move(net);
  opts.data = std::move(data);
  opts.layout = std::move(layout);
  opts.servers = std::move(servers);
  return opts;
}

} // namespace

cluster::~cluster() = default;

std::vector<float> cluster::pull_dense() {
  return actorps::pull_dense(system(), layout(), routes());
}

metric_list cluster::evaluate(const model& net, const dataset& data) {
  return evaluate_on_servers(system(), layout(), routes(), net, data);
}

std::vector<ps_actor> cluster::servers() const {
  std::vector<ps_actor> out;
  for (auto& r : routes())
    out.push_back(r.ps);
  return out;
}

std::vector<server_route> routes_of(caf::actor_system& sys,
                                    const dispatcher_actor& dispatcher,
                                    size_t groups, bool require_live) {
  caf::scoped_actor self{sys};
  std::vector<server_route> out(groups);
  std::string failure;
  self->request(dispatcher, setup_timeout, route_atom_v)
    .receive(
      [&](std::vector<group_route>& routes) {
        for (auto& r : routes)
          if (r.group < groups)
            out[r.group] = server_route{caf::actor_cast<ps_actor>(r.actor),
                                        r.view, r.ps};
      },
      [&](caf::error& err) { failure = sys.render(err); });
  if (!failure.empty())
    throw runtime_failure("asking the dispatcher for the routes: " + failure);
  for (size_t g = 0; g < groups && require_live; ++g)
    if (!out[g].ps)
      throw runtime_failure(fmt::format("parameter-server group {} has no "
                                        "live copy",
                                        g));
  return out;
}

void setup_groups(caf::actor_system& sys, const placement& layout,
                  const std::vector<ps_actor>& servers, const job_config& cfg,
                  const model& net, const std::vector<bool>& held_backup,
                  uint64_t view) {
  auto n = static_cast<uint32_t>(servers.size());
  bool replicated = cfg.replicas > 0 && n > 1;
  if (replicated)
    log::info("coordinator", -1, "{}",
              cfg.replication == "async"
                ? fmt::format("replicated shards: async replication, a "
                              "backup at most {} updates behind its primary",
                              cfg.replication_lag)
                : std::string{"replicated shards: chain replication, an "
                              "update acknowledged once on both copies"});
  caf::scoped_actor self{sys};
  auto configure = [&](uint32_t g, uint32_t p, replica_config rc) {
    caf::error failure;
    self->request(servers[p], setup_timeout, configure_atom_v, std::move(rc))
      .receive([](bool) {}, [&](caf::error& err) { failure = err; });
    if (failure)
      throw runtime_failure(fmt::format("setting up group {} on ps {}: {}", g,
                                        p, sys.render(failure)));
  };
  for (uint32_t g = 0; g < n; ++g) {
    if (!replicated) {
      configure(g, g, replica_config{g, view, true, nullptr, false});
      continue;
    }
    auto b = (g + 1) % n;
    bool held = g < held_backup.size() && held_backup[g];
    if (!held)
      create_shards(sys, layout, servers[b], g, cfg, net);
    configure(g, b, replica_config{g, view, false, nullptr, false});
    // Both copies start from the same initial values; a backup kept from an
    // earlier coordinator gets the primary's state. Across processes the
    // primary dials its backup (backup_ps): its forwards then come from a
    // peer the backup admitted (cluster/net/authorization.hpp), not through
    // the coordinator's node.
    configure(g, g,
              replica_config{g, view, true,
                             caf::actor_cast<caf::strong_actor_ptr>(
                               servers[b]),
                             held, b});
  }
}

ps_stats group_stats(caf::actor_system& sys, const ps_actor& ps, uint32_t g) {
  return detail::ask<ps_stats>(sys, ps,
                               fmt::format("counters of group {}", g),
                               setup_timeout, stats_atom_v, g);
}

std::vector<uint32_t> groups_held(caf::actor_system& sys, const ps_actor& ps,
                                  uint32_t groups, uint64_t* newest_view) {
  std::vector<uint32_t> held;
  caf::scoped_actor self{sys};
  for (uint32_t g = 0; g < groups; ++g) {
    bool has = false;
    self->request(ps, setup_timeout, stats_atom_v, g)
      .receive(
        [&](ps_stats& s) {
          has = true;
          if (newest_view != nullptr)
            *newest_view = std::max(*newest_view, s.view);
        },
        [](caf::error&) {});
    if (has)
      held.push_back(g);
  }
  return held;
}

ps_options ps_options_of(const job_config& cfg, uint32_t index) {
  ps_options opts;
  opts.index = index;
  opts.optimizer = cfg.optimizer;
  opts.table_optimizer = cfg.table_optimizer;
  opts.mode = parse_consistency(cfg.mode);
  opts.workers = cfg.workers;
  opts.staleness = cfg.staleness;
  opts.round_timeout = std::chrono::milliseconds(cfg.sync_round_timeout_ms);
  opts.replication_lag = cfg.replication == "async" ? cfg.replication_lag : 0;
  return opts;
}

placement job_placement(const job_config& cfg, const model& net) {
  auto pcfg = cfg.partitioner;
  if (pcfg.type == partitioner_config::kind::fixed_shards
      && pcfg.num_shards == 0)
    pcfg.num_shards = cfg.ps;
  return place_variables(net.variables(), pcfg, cfg.ps,
                         cfg.table_partition_strategy);
}

void create_variables(caf::actor_system& sys, const placement& layout,
                      const std::vector<ps_actor>& servers,
                      const job_config& cfg, const model& net) {
  for (uint32_t p = 0; p < servers.size(); ++p)
    create_shards(sys, layout, servers[p], p, cfg, net);
}

namespace {

/// The shards `layout` places on server `ps`, in layout order (the order of
/// shard_requests).
std::vector<const shard_info*> layout_shards_of(const placement& layout,
                                                uint32_t ps) {
  std::vector<const shard_info*> result;
  for (auto& s : layout.shards)
    if (s.ps == ps)
      result.push_back(&s);
  return result;
}

} // namespace

std::shared_ptr<const wire_format> push_format_of(const job_config& cfg,
                                                  const placement& layout) {
  if (cfg.push_format == "fp32" || cfg.push_format == "auto")
    return nullptr;
  auto f = make_wire_format(cfg.push_format);
  for (uint32_t p = 0; p < layout.ps_sizes.size(); ++p) {
    if (layout.ps_sizes[p] == 0)
      continue;
    try {
      f->encoded_bytes(layout.ps_sizes[p]);
    } catch (const input_error& e) {
      throw input_error(fmt::format("cluster.push_format: group {} holds {} "
                                    "dense floats: {}",
                                    p, layout.ps_sizes[p], e.what()));
    }
  }
  return f;
}

worker_options wire_options_of(const job_config& cfg, const placement& layout) {
  worker_options opts;
  opts.push_format = push_format_of(cfg, layout);
  opts.pull_format = pull_format_of(cfg);
  for (auto& [name, spec] : cfg.variable_formats)
    opts.variable_formats[name] = make_wire_format(spec);
  // Checks the formats against the model: variables, run sizes.
  make_push_plan(layout, opts.push_format, opts.variable_formats);
  opts.overlap = cfg.overlap;
  opts.prefetch = cfg.prefetch;
  opts.layer_pushes = cfg.layer_pushes;
  opts.priority_pulls = cfg.priority_pulls;
  opts.choose_push_format = cfg.push_format == "auto";
  opts.choose_pull_format = cfg.pull_format == "auto";
  return opts;
}

std::shared_ptr<const wire_format> pull_format_of(const job_config& cfg) {
  if (cfg.pull_format == "fp32" || cfg.pull_format == "auto")
    return nullptr;
  return make_wire_format(cfg.pull_format);
}

std::vector<create_shard> shard_requests(const placement& layout, uint32_t ps,
                                         const job_config& cfg,
                                         const model& net) {
  std::vector<float> init(layout.model_size);
  net.initialize(init.data(), cfg.init_seed);
  std::vector<create_shard> result;
  for (auto& s : layout.shards) {
    if (s.ps != ps)
      continue;
    auto& var = layout.variables[s.variable];
    create_shard req;
    req.group = ps;
    req.variable = var.name;
    req.cols = var.cols;
    if (s.kind == variable_kind::dense) {
      req.shard = s.index;
      req.row_begin = s.row_begin;
      req.row_end = s.row_end;
      req.values.values.assign(init.begin() + s.model_offset,
                               init.begin() + s.model_offset + s.size);
    } else {
      req.shard = layout.variable_shards[s.variable][s.index];
      req.table = true;
      req.vocabulary = var.rows;
      req.init_scale = var.init_scale;
      req.seed = cfg.init_seed;
    }
    result.push_back(std::move(req));
  }
  return result;
}

void create_shards(caf::actor_system& sys, const placement& layout,
                   const ps_actor& server, uint32_t ps, const job_config& cfg,
                   const model& net) {
  caf::scoped_actor self{sys};
  auto shards = layout_shards_of(layout, ps);
  auto reqs = shard_requests(layout, ps, cfg, net);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto& s = *shards[i];
    auto& var = layout.variables[s.variable];
    caf::error failure;
    self->request(server, setup_timeout, create_atom_v, std::move(reqs[i]))
      .receive(
        [&](uint64_t offset) {
          if (s.kind == variable_kind::dense && offset != s.ps_offset)
            failure = caf::make_error(errc::shape_mismatch, "shard offset",
                                      s.ps_offset, offset);
        },
        [&](caf::error& err) { failure = std::move(err); });
    if (failure)
      throw runtime_failure("creating " + var.name + " on ps "
                            + std::to_string(s.ps) + ": "
                            + sys.render(failure));
  }
}

std::vector<ps_stats> ps_stats_of(caf::actor_system& sys,
                                  const dispatcher_actor& dispatcher,
                                  size_t groups) {
  std::vector<ps_stats> result(groups);
  std::vector<server_route> routes;
  try {
    routes = routes_of(sys, dispatcher, groups, false);
  } catch (const runtime_failure&) {
    return result; // the dispatcher did not answer: nothing to read
  }
  caf::scoped_actor self{sys};
  for (uint32_t g = 0; g < routes.size(); ++g) {
    if (!routes[g].ps)
      continue; // no live copy of the group: zeros
    self->request(routes[g].ps, std::chrono::seconds(5), stats_atom_v, g)
      .receive([&](ps_stats& x) { result[g] = x; }, [&](caf::error&) {});
  }
  return result;
}

local_cluster::local_cluster(caf::actor_system& sys, const job_config& cfg,
                             std::shared_ptr<const model> net,
                             const dataset_fn& fn)
  : sys_(sys),
    faults_(std::make_shared<local_faults>(cfg.faults, cfg.ps, cfg.workers)) {
  layout_ = std::make_shared<const placement>(job_placement(cfg, *net));
  // Build the datasets first: their errors are the user's to fix.
  std::vector<std::shared_ptr<batch_source>> data;
  for (uint32_t w = 0; w < cfg.workers; ++w)
    data.push_back(fn(input_context{cfg.workers, w}));
  auto faults = faults_;
  auto wire = wire_options_of(cfg, *layout_);
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
                                          wire))));
  shared_->workers = workers_;
  shared_->servers = servers_;
  // Supervision: a lost worker comes back as a new actor over the same data
  // iterator, which goes on where the lost one stopped.
  auto layout = layout_;
  auto shared = shared_;
  // (It starts with group g on server g; the dispatcher sends it the
  // current routes before its first closure.)
  worker_respawn respawn = [&sys, net, data, layout, shared, faults,
                            wire](uint32_t w, uint32_t incarnation) {
    std::lock_guard<std::mutex> guard{shared->mtx};
    auto worker = faults->wrap_worker(
      sys, w,
      spawn_worker(sys, worker_options_of(w, incarnation,
                                          faults->model_for(w, net), data[w],
                                          layout, shared->servers, wire)));
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
          roles.emplace_back("ps" + std::to_string(p),
                             caf::actor_cast<caf::actor>(shared->servers[p]));
        for (uint32_t w = 0; w < shared->workers.size(); ++w)
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

void local_cluster::inject(const fault_spec& f) {
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

} // namespace actorps
