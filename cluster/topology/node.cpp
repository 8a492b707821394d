#include "cluster/topology/node.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>
#include <optional>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

#include "caf/actor_cast.hpp"
#include "caf/after.hpp"
#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/fault_injection.hpp"
#include "cluster/net/authorization.hpp"
#include "cluster/topology/node_actor.hpp"
#include "cluster/net/data_link.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/net/tls_channel.hpp"
#include "cluster/net/handshake.hpp"
#include "cluster/topology/evaluator.hpp"
#include "cluster/services/scale_input.hpp"
#include "cluster/services/metrics_endpoint.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/topology/remote_cluster.hpp"
#include "cluster/job/stop_request.hpp"
#include "cluster/net/tls.hpp"
#include "core/data_registry.hpp"
#include "core/dataset.hpp"
#include "core/stream_ranges.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/seconds.hpp"
#include "models/registry.hpp"

namespace actorps {

namespace {

/// Waits until `node` stops. After a stop request (SIGTERM: Slurm sends it
/// to every task of a step at once) a worker leaves the job gracefully
/// (node_actor's leave_atom: it finishes its closures, the coordinator lets
/// it go, it exits 0); a ps, or a worker the coordinator did not let go,
/// keeps serving, so that the coordinator can finish, checkpoint and end
/// the job, but at most `grace`.
/// Returns whether the node stopped by itself (false: the grace ran out).
bool wait_for_node(caf::actor_system& sys, const caf::actor& node,
                   const std::string& role, int index,
                   std::chrono::milliseconds grace) {
  using clock = std::chrono::steady_clock;
  caf::scoped_actor self{sys};
  self->monitor(node);
  bool down = false;
  bool asked = false;
  clock::time_point deadline;
  while (!down) {
    self->receive([&](caf::down_msg&) { down = true; },
                  caf::after(std::chrono::milliseconds(200)) >> [&] {
                    if (!asked && stop_requested()) {
                      asked = true;
                      deadline = clock::now() + grace;
                      // A worker leaves at once, gracefully (nothing is
                      // re-executed; the job goes on without it).
                      if (role == "worker") {
                        bool left = false;
                        self->request(node, grace, leave_atom_v)
                          .receive([&](uint32_t) { left = true; },
                                   [&](caf::error&) {});
                        if (left)
                          return; // the node stops itself with status 0
                      }
                      log::info(role, index,
                                "stop requested (SIGTERM or SIGUSR1): serving until the "
                                "coordinator ends the job, at most {} ms",
                                grace.count());
                    }
                  });
    if (!down && asked && clock::now() >= deadline) {
      log::warn(role, index,
                   "the coordinator did not end the job within {} ms of the "
                   "stop request; stopping",
                   grace.count());
      return false;
    }
  }
  return true;
}

/// Bytes of the job's dense variables (every server's region).
uint64_t dense_bytes_of(const placement& layout) {
  uint64_t floats = 0;
  for (auto n : layout.ps_sizes)
    floats += n;
  return floats * sizeof(float);
}

/// Publishes `role_actor` behind a node actor and a gate at `address`, then
/// waits until the node actor stops (see wait_for_node). Stops `role_actor`
/// in every case.
int serve(caf::actor_system& sys, const job_config& cfg, handshake me,
          caf::actor role_actor, const host_port& address,
          std::shared_ptr<peer_registry> peers, uint64_t dense_bytes,
          node_options::fault_hooks faults = {}, ps_actor data_server = {}) {
  auto label = fmt::format("{} {}", me.role, me.index);
  auto index = static_cast<int>(me.index);
  auto role = me.role;
  auto fp = fingerprint_id(me.job);
  node_options opts;
  opts.self = std::move(me);
  opts.role_actor = caf::actor_cast<caf::strong_actor_ptr>(role_actor);
  opts.join_timeout = std::chrono::milliseconds(cfg.connect_timeout_ms);
  opts.exit_status = std::make_shared<std::atomic<int>>(1);
  opts.peers = std::move(peers);
  opts.faults = std::move(faults);
  // Kills and stops only where the job's plan names them for this node.
  for (auto& f : cfg.faults)
    if (f.role == opts.self.role && f.index == opts.self.index) {
      opts.faults.kill |= f.action == fault_spec::kind::kill;
      opts.faults.freeze |= f.action == fault_spec::kind::stop;
    }
  auto tls = node_tls();
  if (tls)
    opts.authorize = [tls](const handshake& peer) {
      return tls->redeem(peer.ticket, node_identity{peer.role, peer.index});
    };
  auto node = spawn_node(sys, opts);
  auto stop_all = [&] {
    caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(role_actor, caf::exit_reason::user_shutdown);
  };
  // A ps answers the workers' data channels (cluster/net/data_link.hpp).
  gate::data_handler on_data;
  if (data_server)
    on_data = [&sys, data_server, label,
               opts = data_session_options{
                 cfg.transport != "tcp", true, frame_limits_for(dense_bytes),
                 size_t{cfg.ps} + 1,
                 std::chrono::milliseconds(cfg.data_idle_timeout_ms)}](
                std::unique_ptr<channel> ch, const std::string& peer) {
      serve_data_channel(sys, data_server, std::move(ch),
                         fmt::format("{} <- {}", label, peer), opts);
    };
  std::unique_ptr<gate> door;
  try {
    door = std::make_unique<gate>(
      sys, address, caf::actor_cast<caf::strong_actor_ptr>(node),
      sys.message_types(node), label, tls, std::move(on_data),
      [dense_bytes](const std::optional<node_identity>& peer) {
        return basp_limits_for(peer, dense_bytes);
      });
  } catch (...) {
    stop_all();
    throw;
  }
  log::info(role, index, "listening on {} (port {}), job {}",
            to_string(address), door->port(), fp);
  auto by_itself = wait_for_node(
    sys, caf::actor_cast<caf::actor>(node), role, index,
    std::chrono::milliseconds(cfg.connect_timeout_ms));
  door.reset();
  stop_all();
  return by_itself ? opts.exit_status->load() : exit_stopped;
}

/// A worker that joins a running job (`--join`): nobody dials it, so it
/// has no gate; it dials the coordinator's join desk at `where` (with TLS
/// the desk's certificate must name the chief), enlists with its handshake,
/// its node actor and `role_actor`, and then serves the closures the
/// coordinator sends over that connection until the coordinator ends the
/// job or it leaves (see wait_for_node).
/// @throws input_error naming `where` when there is no job there (nothing
///         listens within a few seconds) or it refuses this worker (another
///         job, a certificate of another node, an index in service): a
///         command to fix, not to retry.
int join_running_job(caf::actor_system& sys, const job_config& cfg,
                     handshake me, caf::actor role_actor,
                     const host_port& where) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto index = static_cast<int>(me.index);
  node_options opts;
  opts.self = me;
  opts.role_actor = caf::actor_cast<caf::strong_actor_ptr>(role_actor);
  opts.join_timeout = std::chrono::milliseconds(cfg.connect_timeout_ms);
  opts.exit_status = std::make_shared<std::atomic<int>>(1);
  opts.peers = std::make_shared<peer_registry>();
  auto node = spawn_node(sys, opts);
  auto stop_all = [&] {
    caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(role_actor, caf::exit_reason::user_shutdown);
  };
  auto tls = node_tls();
  node_identity expect{"chief", 0};
  auto name = to_string(where);
  dial_result r;
  auto deadline = clock::now() + std::chrono::seconds(5);
  for (;;) {
    r = dial(sys, where, std::chrono::seconds(2), tls.get(),
             tls ? &expect : nullptr);
    if (r.actor)
      break;
    if (!r.retryable || clock::now() >= deadline) {
      stop_all();
      throw input_error(fmt::format("--join {}: {}{}", name,
                                    r.retryable ? "no running job there: "
                                                : "",
                                    r.error));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  auto hello = me;
  hello.ticket = r.ticket; // binds the hello to this TLS connection
  caf::scoped_actor self{sys};
  caf::actor chief;
  caf::error failure;
  self
    ->request(caf::actor_cast<caf::actor>(r.actor), std::chrono::seconds(30),
              enlist_atom_v, hello, caf::actor_cast<caf::actor>(node),
              role_actor)
    .receive([&](caf::actor& watcher) { chief = std::move(watcher); },
             [&](caf::error& err) { failure = std::move(err); });
  if (failure || !chief) {
    stop_all();
    auto& ctx = failure.context();
    throw input_error(fmt::format(
      "--join {}: the coordinator refused worker {}: {}", name, index,
      ctx.match_elements<std::string>() ? ctx.get_as<std::string>(0)
                                        : sys.render(failure)));
  }
  self->send(node, enlist_atom_v, chief);
  log::info("worker", index,
            "joined the running job through the coordinator at {} ({:.2f} s "
            "after the start of this process's join)",
            name, seconds(clock::now() - t0));
  auto by_itself = wait_for_node(
    sys, caf::actor_cast<caf::actor>(node), "worker", index,
    std::chrono::milliseconds(cfg.connect_timeout_ms));
  stop_all();
  return by_itself ? opts.exit_status->load() : exit_stopped;
}

/// The dense floats a data channel to server `p` (of the job's `first_ps`)
/// carries at most: its group's region with one group per server, else
/// (a server that joined later, holding whatever moves to it, or one of
/// several groups per server) the largest.
uint64_t region_floats(const placement& layout, uint32_t p,
                       uint32_t first_ps) {
  if (p < layout.ps_sizes.size() && layout.ps_sizes.size() == first_ps)
    return layout.ps_sizes[p];
  return *std::max_element(layout.ps_sizes.begin(), layout.ps_sizes.end());
}

int run_ps(const job_config& cfg, const cluster_spec& spec, uint32_t index) {
  // A ps needs the placement, so the model, so the data's schema (for
  // MovieLens the vocabularies, read from the export; no examples are kept).
  auto net = make_model(cfg, open_dataset(cfg)->schema());
  auto layout = job_placement(cfg, *net);
  system_config sys_cfg{cfg.threads, network_of(cfg)};
  caf::actor_system sys{sys_cfg};
  auto me = make_handshake(cfg, layout, "ps", index);
  auto opts = ps_options_of(cfg, index);
  // Who may send the server what: the peers whose hellos the node admits.
  auto peers = std::make_shared<peer_registry>();
  opts.authorize = authorize_ps_requests(peers, sys.node());
  std::vector<cluster_member> servers;
  for (uint32_t p = 0; p < spec.ps.size(); ++p)
    servers.push_back({"ps", p, spec.ps[p]});
  opts.dial = [&sys, servers, me](uint32_t p) {
    auto j = join_members(sys, {servers.at(p)}, me, caf::actor{},
                          std::chrono::seconds(2));
    return caf::actor_cast<caf::actor>(j[0].welcome.role_actor);
  };
  auto ps = spawn_ps(sys, std::move(opts));
  // Dropped or delayed messages (fault injection) need a proxy in front.
  node_options::fault_hooks hooks;
  if (std::any_of(cfg.faults.begin(), cfg.faults.end(), [](const auto& f) {
        return f.action == fault_spec::kind::drop
               || f.action == fault_spec::kind::delay;
      })) {
    auto proxy = spawn_ps_proxy(sys, ps, index);
    hooks.ps_proxy = caf::actor_cast<caf::actor>(proxy);
    ps = proxy;
  }
  return serve(sys, cfg, std::move(me), caf::actor_cast<caf::actor>(ps),
               spec.ps[index], std::move(peers), dense_bytes_of(layout),
               std::move(hooks), ps);
}

/// The servers of the spec for a worker that joins a running job: the
/// job's first `ps` (one per group, in `slots`) and those that joined it
/// since (in `others`). A server not reached within a few seconds may have
/// left the job (its groups moved): its slot stays empty (no node, no
/// actor) and the coordinator's routes name the servers of those groups
/// when the worker is admitted. The worker dials every server it can
/// before that, because CAF routes its first messages to a server it
/// learns of from a route, but has no connection to, through the
/// coordinator, whose gate refuses routed messages from workers. A server
/// of `slots` that refuses the worker fails the join as in join_members.
/// @throws transient_failure if no server was reached.
struct servers_reached {
  std::vector<joined_member> slots;
  std::vector<joined_member> others;
};

servers_reached join_servers_in_service(caf::actor_system& sys,
                                        const std::vector<cluster_member>& servers,
                                        uint32_t ps, const handshake& me,
                                        uint32_t index) {
  std::vector<std::string> missed;
  auto all = join_each(sys, servers, me, caf::actor{}, std::chrono::seconds(3),
                       ps, missed);
  servers_reached out;
  bool any = false;
  for (uint32_t p = 0; p < all.size(); ++p) {
    any = any || bool{all[p].node};
    if (p < ps)
      out.slots.push_back(std::move(all[p]));
    else if (all[p].node)
      out.others.push_back(std::move(all[p]));
  }
  missed.erase(std::remove(missed.begin(), missed.end(), std::string{}),
               missed.end());
  if (!any)
    throw transient_failure(fmt::format("no parameter server reached: {}",
                                        fmt::join(missed, "; ")));
  for (auto& why : missed)
    log::info("worker", static_cast<int>(index),
              "{} (a server that left the job or is not in it; the "
              "coordinator's routes say where its groups are)",
              why);
  return out;
}

int run_worker(const job_config& given, const cluster_spec& spec,
               uint32_t index, const std::optional<host_port>& join) {
  auto cfg = given; // prefetch "auto" is on between processes
  resolve_prefetch(cfg, true);
  auto provider = open_dataset(cfg);
  auto net = make_model(cfg, provider->schema());
  auto layout = std::make_shared<const placement>(job_placement(cfg, *net));
  // Dynamic data shards: every closure carries its examples, read from the
  // whole training split (this process holds all of it, not a slice).
  auto dynamic = cfg.stream_dir.empty() && cfg.sharding == "dynamic";
  std::shared_ptr<range_reader> ranges;
  std::shared_ptr<batch_source> data;
  if (dynamic) {
    ranges = dynamic_ranges(cfg, *provider);
    data = std::make_shared<ranges_only_source>(provider->schema(),
                                                cfg.batch_size);
  } else {
    data = provider->train_source(input_context{cfg.workers, index},
                                  cfg.batch_size, cfg.shuffle_seed);
  }
  system_config sys_cfg{cfg.threads, network_of(cfg)};
  caf::actor_system sys{sys_cfg};
  auto me = make_handshake(cfg, *layout, "worker", index);
  std::vector<cluster_member> servers;
  for (uint32_t p = 0; p < spec.ps.size(); ++p)
    servers.push_back({"ps", p, spec.ps[p]});
  // The job's own servers; one that joins later (join:ps) is dialled by
  // its route.
  std::vector<joined_member> joined;
  servers_reached reached; // (its `others` stay joined while it runs)
  try {
    if (join) {
      reached = join_servers_in_service(sys, servers, cfg.ps, me, index);
      joined = reached.slots;
    } else
      joined = join_members(sys,
                            std::vector<cluster_member>(
                              servers.begin(), servers.begin() + cfg.ps),
                            me, caf::actor{},
                            std::chrono::milliseconds(cfg.connect_timeout_ms));
  } catch (const transient_failure&) {
    throw;
  } catch (const runtime_failure& e) {
    if (!join)
      throw;
    // A worker joining a running job that its servers refuse: the command
    // is wrong (certificate, job), not the job.
    throw input_error(fmt::format("--join: {}", e.what()));
  }
  auto opts = wire_options_of(cfg, *layout);
  if (ranges)
    opts.ranges = ranges;
  opts.index = index;
  opts.net = net;
  // A step error (fault injection) needs a failing model around the real one.
  node_options::fault_hooks hooks;
  if (std::any_of(cfg.faults.begin(), cfg.faults.end(), [&](const auto& f) {
        return f.action == fault_spec::kind::error && f.role == "worker"
               && f.index == index;
      })) {
    auto sw = std::make_shared<step_error_switch>();
    opts.net = failing_model(net, sw, index);
    hooks.arm_step_error = [sw] { sw->armed = true; };
  }
  opts.data = data;
  opts.layout = layout;
  // Pulls and pushes over a data channel to each ps, unless off or
  // refused (then over BASP, as everything else).
  auto tls = node_tls();
  // With transport shm, a ps that declines shared memory stops the worker
  // at start (input_error: exit 2); later, when the worker dials a
  // restarted ps again, it is logged and the pulls and pushes go over BASP.
  // Every link opened, stopped when the worker ends: a link lives as long
  // as its server, so a worker that left a running job would not exit.
  struct opened_links {
    std::mutex mtx;
    std::vector<ps_actor> all;
  };
  auto links = std::make_shared<opened_links>();
  auto over_data = [&sys, &spec, tls, index, layout, links, first_ps = cfg.ps,
                    on = cfg.data_channel,
                    transport = parse_link_transport(cfg.transport),
                    idle = cfg.data_idle_timeout_ms](ps_actor ps, uint32_t p,
                                                     bool at_start) {
    if (!on || !ps)
      return ps;
    node_identity expect{"ps", p};
    auto keep = [&](ps_actor link) {
      std::lock_guard<std::mutex> guard{links->mtx};
      links->all.push_back(link);
      return link;
    };
    try {
      return keep(open_data_link(sys, ps, spec.ps.at(p), tls.get(),
                            tls ? &expect : nullptr, std::chrono::seconds(5),
                            fmt::format("worker {} -> ps {}", index, p),
                            {transport,
                             region_floats(*layout, p, first_ps) * sizeof(float),
                             std::chrono::milliseconds(idle / 2)}));
    } catch (const input_error& e) {
      if (at_start)
        throw;
      log::error("worker", static_cast<int>(index),
                 "{}; its pulls and pushes go over BASP", e.what());
      return ps;
    } catch (const std::exception& e) {
      log::warn("worker", static_cast<int>(index),
                "{}; its pulls and pushes go over BASP", e.what());
      return ps;
    }
  };
  // Group g starts on server g % ps (cluster.groups; one group per server
  // by default); the dispatcher's routes say where it is later.
  std::vector<ps_actor> by_server;
  for (uint32_t p = 0; p < joined.size(); ++p) {
    auto& j = joined[p];
    by_server.push_back(
      over_data(caf::actor_cast<ps_actor>(j.welcome.role_actor), p, true));
    opts.server_incarnations.push_back(j.welcome.node.incarnation);
  }
  auto groups = static_cast<uint32_t>(layout->ps_sizes.size());
  opts.servers = group_servers(by_server, groups);
  opts.server_index = group_server_indices(
    groups, static_cast<uint32_t>(by_server.size()));
  log::info("worker", static_cast<int>(index), "joined {} ps{}; {}",
            joined.size(),
            cfg.data_channel ? " (pulls and pushes over data channels)" : "",
            dynamic ? fmt::format("the whole training split in memory, "
                                  "examples handed out by the coordinator")
                    : fmt::format("{} training examples in this worker's "
                                  "slice",
                                  data->shard_rows()));
  opts.link_transports = [] {
    auto c = data_link_census();
    return std::make_pair(c.shm, c.tcp);
  };
  opts.redial = [&sys, servers, me, over_data](uint32_t p) {
    auto j = join_members(sys, {servers.at(p)}, me, caf::actor{},
                          std::chrono::seconds(2));
    return std::make_pair(
      over_data(caf::actor_cast<ps_actor>(j[0].welcome.role_actor), p, false),
      j[0].welcome.node.incarnation);
  };
  auto worker = spawn_worker(sys, std::move(opts));
  int status = 0;
  if (join)
    status = join_running_job(sys, cfg, std::move(me),
                              caf::actor_cast<caf::actor>(worker), *join);
  else
    status = serve(sys, cfg, std::move(me),
                   caf::actor_cast<caf::actor>(worker), spec.worker[index],
                   std::make_shared<peer_registry>(), dense_bytes_of(*layout),
                   std::move(hooks));
  std::lock_guard<std::mutex> guard{links->mtx};
  for (auto& link : links->all)
    caf::anon_send_exit(link, caf::exit_reason::user_shutdown);
  return status;
}

} // namespace

int run_node(const job_config& cfg, const cluster_spec& spec,
             const task_id& task, const train_options& opts,
             const std::optional<host_port>& join) {
  // (Servers that join later are in the spec after the job's own.)
  auto servers = servers_ever(cfg.faults, cfg.ps, cfg.max_ps);
  if (cfg.workers != spec.worker.size() || servers != spec.ps.size())
    throw input_error(fmt::format(
      "the cluster spec has {} workers and {} ps, the job config {} and {}",
      spec.worker.size(), spec.ps.size(), cfg.workers, servers));
  // -- watching a job: metrics endpoint, sidecar evaluator -------
  auto port = metrics_port_of(opts.metrics_port, spec, task);
  // A node's endpoint binds its own address, not every interface.
  auto node_opts = opts;
  if (node_opts.metrics_address.empty()) {
    auto& mine = spec.members(task.type);
    node_opts.metrics_address =
      task.index < mine.size() ? mine[task.index].host : "127.0.0.1";
  }
  if (task.type == "evaluator") {
    evaluator_options eval;
    eval.out = opts.out;
    eval.metrics_out = opts.metrics_out;
    eval.metrics_port = port;
    eval.metrics_address = node_opts.metrics_address;
    eval.metrics_auth = node_opts.metrics_auth;
    eval.metrics_token = node_opts.metrics_token;
    eval.metrics_tls = node_opts.metrics_tls;
    return run_evaluator(cfg, eval);
  }
  std::unique_ptr<metrics_endpoint> metrics; // the chief's: in train_chief
  if (task.type == "ps" || task.type == "worker")
    metrics = open_metrics_endpoint(
      port,
      metrics_settings{node_opts.metrics_address, node_opts.metrics_auth,
                       node_opts.metrics_token, node_opts.metrics_tls},
      node_opts.metrics_address, task.type.c_str(),
      static_cast<int>(task.index), cfg.tls,
      node_identity{task.type, task.index});
  // -- end of watching a job -----------------------------------------------------
  if (task.type == "chief") {
    // Under launch, `actorps scale` reaches the coordinator as lines on its
    // stdin (apps/scale_desk.hpp).
    if (auto* v = std::getenv("ACTORPS_SCALE_INPUT");
        v != nullptr && std::string_view{v} == "stdin")
      node_opts.callbacks.push_back(std::make_shared<scale_input>(0));
    train_chief(cfg, spec, node_opts);
    return 0;
  }
  if (task.type == "ps")
    return run_ps(cfg, spec, task.index);
  if (task.type == "worker")
    return run_worker(cfg, spec, task.index, join);
  throw input_error(fmt::format("task.type: \"{}\" nodes are not supported "
                                "(chief, worker, ps, evaluator)",
                                task.type));
}

} // namespace actorps
