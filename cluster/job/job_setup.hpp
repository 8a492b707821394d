#pragma once

// Setting up a job on its parameter servers, the same in one process and
// in many: where the variables live (job_placement), each server's options,
// creating the shards, the replica groups and their routes, the wire
// formats of the workers, and the servers' counters.

#include <cstdint>
#include <memory>
#include <vector>

#include "caf/fwd.hpp"

#include "actors/dispatcher_actor.hpp"
#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "actors/worker_actor.hpp"
#include "core/placement.hpp"

namespace actorps {

class model;
class wire_format;
struct job_config;

/// Where the variables of `net` live in the job `cfg`: split by
/// cfg.partitioner (fixed_shards with num_shards 0: one shard per ps; tables
/// by cfg.table_partition_strategy) and placed round-robin over the job's
/// groups_of(cfg) replica groups (shard_info::ps names the group; group g
/// starts on server group_home(g, cfg.ps)). Every node of a cluster computes
/// the same placement from the same config.
/// @throws input_error as place_variables.
placement job_placement(const job_config& cfg, const model& net);

/// The options of parameter server `index` of job `cfg` (rules, mode,
/// workers, staleness).
ps_options ps_options_of(const job_config& cfg, uint32_t index);

/// Sends every shard of `layout` to the server its group starts on
/// (group_home over `servers`): dense shards with
/// their initial values (the model initialised from cfg.init_seed), table
/// shards with their definition (rows are created on first use).
/// @throws runtime_failure if a server refuses a shard or does not answer.
void create_variables(caf::actor_system& sys, const placement& layout,
                      const std::vector<ps_actor>& servers,
                      const job_config& cfg, const model& net);

/// Where each replica group is served now, asked of `dispatcher` (`groups`
/// groups). With `require_live` false, a group without a live copy keeps a
/// null route instead of failing the call.
/// @throws runtime_failure if it does not answer, or (require_live) a group
///         has no copy.
std::vector<server_route> routes_of(caf::actor_system& sys,
                                    const dispatcher_actor& dispatcher,
                                    size_t groups, bool require_live = true);

/// Tells every server its role in its groups at view `view`: server
/// group_home(g, n) is the primary of group g (of layout's groups); with
/// cfg.replicas 1, server group_backup_home(g, n) is its backup, whose
/// shards are created here (unless held_backup[g]: it holds them already,
/// and then gets the primary's state).
/// @throws runtime_failure if a server refuses.
void setup_groups(caf::actor_system& sys, const placement& layout,
                  const std::vector<ps_actor>& servers, const job_config& cfg,
                  const model& net, const std::vector<bool>& held_backup,
                  uint64_t view);

/// A worker's first server of each of `groups` groups (worker_options::
/// servers): servers[group_home(g, n)], or the next that is not null (a
/// server that left; the dispatcher's routes say where the group is).
std::vector<ps_actor> group_servers(const std::vector<ps_actor>& servers,
                                    uint32_t groups);

/// The index of the server each of `groups` groups starts on among
/// `servers` (worker_options::server_index).
std::vector<uint32_t> group_server_indices(uint32_t groups, uint32_t servers);

/// The counters of group `g` on `ps`.
/// @throws runtime_failure if it does not answer or holds no such group.
ps_stats group_stats(caf::actor_system& sys, const ps_actor& ps, uint32_t g);

/// The groups (of 0 .. groups - 1) `ps` holds a replica of. With
/// `newest_view`, raises it to the newest view among them.
std::vector<uint32_t> groups_held(caf::actor_system& sys, const ps_actor& ps,
                                  uint32_t groups,
                                  uint64_t* newest_view = nullptr);

/// The push format of job `cfg` (cluster.push_format) for the workers,
/// null for plain floats (fp32), and for "auto" (the workers start in fp32
/// and choose by measurement: worker_options::choose_push_format).
/// @throws input_error naming cluster.push_format if it cannot carry a
///         group's dense region (a topk count larger than the region).
std::shared_ptr<const wire_format> push_format_of(const job_config& cfg,
                                                  const placement& layout);

/// A worker's wire settings of job `cfg`: push_format, variable_formats,
/// pull_format, overlap and the formats chosen by measurement; the rest
/// default.
/// @throws input_error naming the setting if a format cannot carry what it
///         is given (a variable the model lacks, a topk count above a run).
worker_options wire_options_of(const job_config& cfg, const placement& layout);

/// Checks the job's table policies (table_policies_of(cfg): each table's
/// own or the job-wide one) against each table of `layout` (its row size
/// with the table rule's slots), before any server is asked to hold one.
/// Returns what the tables may take, for the log: with budgets, the most
/// rows and bytes of budgeted table shards on one server, and the tables
/// without a budget; without any, the bytes a row costs at most ("" for a
/// job without tables).
/// @throws input_error "SOURCE: tables.per_table.NAME: model M has no table
///         ..." (listing the model's tables) for an override of a table the
///         model lacks; "table NAME: FIELD ..." for a policy a table cannot
///         take (e.g. a max_bytes below one row).
std::string check_table_policy(const job_config& cfg,
                               const placement& layout);

/// The pull format of job `cfg` (cluster.pull_format), null for fp32 and
/// "auto" (as push_format_of).
std::shared_ptr<const wire_format> pull_format_of(const job_config& cfg);

/// The create requests of the shards `layout` places on parameter server
/// `ps`, in layout order: dense ones with their initial values (the model
/// initialised from cfg.init_seed), table shards with their definition.
std::vector<create_shard> shard_requests(const placement& layout, uint32_t ps,
                                         const job_config& cfg,
                                         const model& net);

/// Creates the shards `layout` places on parameter server `ps` (index) on
/// `server` (dense ones with their initial values).
/// @throws runtime_failure as create_variables.
void create_shards(caf::actor_system& sys, const placement& layout,
                   const ps_actor& server, uint32_t ps, const job_config& cfg,
                   const model& net);

/// Counters of every replica group (`groups` of them) from the server that
/// serves it now, as `dispatcher` routes them: zeros for a group without a
/// live copy (a lost server without a replica), one that does not answer in
/// time, or every group if the dispatcher does not answer. Never throws: a
/// read of counters must not fail a job that lost a server.
std::vector<ps_stats> ps_stats_of(caf::actor_system& sys,
                                  const dispatcher_actor& dispatcher,
                                  size_t groups);

} // namespace actorps
