#include "cluster/job/job_setup.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"

#include "cluster/job/ask.hpp"
#include "core/error.hpp"
#include "core/group_balance.hpp"
#include "core/stream_ranges.hpp"
#include "core/table_overrides.hpp"
#include "core/table_store.hpp"
#include "core/update_rule.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/wire_plan.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

constexpr auto setup_timeout = std::chrono::seconds(30);

} // namespace

std::vector<server_route> routes_of(caf::actor_system& sys,
                                    const dispatcher_actor& dispatcher,
                                    size_t groups, bool require_live) {
  caf::scoped_actor self{sys};
  // A group changing hands (a failover's or a planned move's new primary
  // confirming its role, a few ms) has no route for a moment: asked again
  // for up to a second before it counts as without a live copy.
  constexpr int tries = 50;
  for (int attempt = 1;; ++attempt) {
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
      throw runtime_failure("asking the dispatcher for the routes: "
                            + failure);
    size_t g = 0;
    while (g < groups && (!require_live || out[g].ps))
      ++g;
    if (g == groups)
      return out;
    if (attempt == tries)
      throw runtime_failure(fmt::format("parameter-server group {} has no "
                                        "live copy",
                                        g));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void setup_groups(caf::actor_system& sys, const placement& layout,
                  const std::vector<ps_actor>& servers, const job_config& cfg,
                  const model& net, const std::vector<bool>& held_backup,
                  uint64_t view) {
  auto n = static_cast<uint32_t>(servers.size());
  auto groups = static_cast<uint32_t>(layout.ps_sizes.size());
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
  for (uint32_t g = 0; g < groups; ++g) {
    auto home = group_home(g, n);
    if (!replicated) {
      configure(g, home, replica_config{g, view, true, nullptr, false});
      continue;
    }
    auto b = group_backup_home(g, n);
    bool held = g < held_backup.size() && held_backup[g];
    if (!held)
      create_shards(sys, layout, servers[b], g, cfg, net);
    configure(g, b, replica_config{g, view, false, nullptr, false});
    // Both copies start from the same initial values; a backup kept from an
    // earlier coordinator gets the primary's state. Across processes the
    // primary dials its backup (backup_ps): its forwards then come from a
    // peer the backup admitted (cluster/net/authorization.hpp), not through
    // the coordinator's node.
    configure(g, home,
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
  opts.tables = table_policies_of(cfg);
  opts.sweep_rows = cfg.table_sweep_rows;
  return opts;
}

namespace {

/// "a, b, c" of up to `most` names, then "and N more".
std::string some_names(const std::vector<std::string>& names, size_t most) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i)
    out += (i == 0 ? "" : ", ") + names[i];
  if (names.size() > most)
    out += fmt::format(" and {} more", names.size() - most);
  return out;
}

} // namespace

std::string check_table_policy(const job_config& cfg,
                               const placement& layout) {
  std::vector<std::string> names; // the model's tables, in its order
  for (auto v : layout.tables)
    names.push_back(layout.variables[v].name);
  for (auto& [table, fields] : cfg.table_overrides)
    if (std::find(names.begin(), names.end(), table) == names.end())
      throw input_error(fmt::format(
        "{}: tables.per_table.{}: model {} has no table \"{}\" ({})",
        cfg.source, table, cfg.model, table,
        names.empty() ? std::string{"it has no tables"}
                      : "its tables: " + some_names(names, names.size())));
  if (layout.tables.empty())
    return {};
  auto policies = table_policies_of(cfg);
  auto slots = make_update_rule(cfg.table_optimizer, "table_optimizer")
                 ->slot_count();
  for (auto v : layout.tables) {
    table_shard_def def;
    def.variable = layout.variables[v].name;
    def.dim = layout.variables[v].cols;
    validate_table_policy(policies.for_table(def.variable), def, slots);
  }
  // The estimate: each server's table shards with a budget at their row
  // limits; those without one grow with the keys they see.
  std::vector<double> rows(cfg.ps, 0), bytes(cfg.ps, 0); // per server
  double row_bytes_max = 0;
  std::vector<std::string> unbounded;
  bool admission = false;
  for (auto v : layout.tables) {
    auto& policy = policies.for_table(layout.variables[v].name);
    admission = admission || policy.filters();
    if (!policy.has_budget()) {
      unbounded.push_back(layout.variables[v].name);
      auto dim = layout.variables[v].cols;
      row_bytes_max = std::max(row_bytes_max,
                               double(table_row_bytes(policy, dim, slots)));
    }
  }
  for (auto& sh : layout.shards) {
    if (sh.kind != variable_kind::table)
      continue;
    auto& policy = policies.for_table(layout.variables[sh.variable].name);
    if (!policy.has_budget())
      continue;
    auto dim = layout.variables[sh.variable].cols;
    auto limit = double(table_row_limit(policy, dim, slots));
    auto server = group_home(sh.ps, cfg.ps); // (sh.ps: its group)
    rows[server] += limit;
    bytes[server] += limit * double(table_row_bytes(policy, dim, slots))
                    + double(table_filter_bytes(policy));
  }
  auto growing = fmt::format("they grow with the keys seen{}, up to {:.0f} "
                             "bytes a row",
                             admission ? " often enough to be admitted" : "",
                             row_bytes_max);
  if (unbounded.size() == layout.tables.size())
    return "tables without a budget: " + growing;
  auto most = std::max_element(bytes.begin(), bytes.end()) - bytes.begin();
  auto note = fmt::format("tables within their budget: at most {:.0f} rows "
                          "and {:.1f} MB of table shards on one server (ps "
                          "{})",
                          rows[most], bytes[most] / 1e6, most);
  if (!unbounded.empty())
    note += fmt::format("; {} tables without a budget ({}): {}",
                        unbounded.size(), some_names(unbounded, 4), growing);
  return note;
}

placement job_placement(const job_config& cfg, const model& net) {
  auto pcfg = cfg.partitioner;
  auto groups = groups_of(cfg);
  if (pcfg.type == partitioner_config::kind::fixed_shards
      && pcfg.num_shards == 0)
    pcfg.num_shards = groups;
  // Placed over the groups: shard_info::ps names a shard's group.
  return place_variables(net.variables(), pcfg, groups,
                         cfg.table_partition_strategy);
}

void create_variables(caf::actor_system& sys, const placement& layout,
                      const std::vector<ps_actor>& servers,
                      const job_config& cfg, const model& net) {
  auto n = static_cast<uint32_t>(servers.size());
  for (uint32_t g = 0; g < layout.ps_sizes.size(); ++g)
    create_shards(sys, layout, servers[group_home(g, n)], g, cfg, net);
}

std::vector<ps_actor> group_servers(const std::vector<ps_actor>& servers,
                                    uint32_t groups) {
  std::vector<ps_actor> out;
  auto n = static_cast<uint32_t>(servers.size());
  for (uint32_t g = 0; g < groups && n > 0; ++g) {
    auto p = group_home(g, n);
    // A server that left (null): any live one; the routes correct it.
    for (uint32_t k = 0; k < n && !servers[p]; ++k)
      p = (p + 1) % n;
    out.push_back(servers[p]);
  }
  return out;
}

std::vector<uint32_t> group_server_indices(uint32_t groups,
                                           uint32_t servers) {
  std::vector<uint32_t> out;
  for (uint32_t g = 0; g < groups; ++g)
    out.push_back(group_home(g, servers));
  return out;
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
  // A stream's closures carry their examples: the workers of this process
  // read them through one reader (a part parsed once per process).
  if (!cfg.stream_dir.empty())
    opts.ranges = std::make_shared<part_reader>(stream_config_of(cfg));
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

} // namespace actorps
