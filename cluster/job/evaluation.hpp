#pragma once

// Reading a model's variables back from the parameter servers, and test
// metrics computed on them (cluster/ only: blocking calls).

#include <cstdint>
#include <functional>
#include <vector>

#include "caf/fwd.hpp"

#include "actors/ps_actor.hpp"
#include "core/dataset.hpp"
#include "core/metrics.hpp"
#include "core/placement.hpp"
#include "core/table_lookup.hpp"

namespace actorps {

class model;

/// Pulls the dense region of every replica group (from the server `routes`
/// names, at its view) into one flat model buffer (the
/// dense variables, layout.model_size floats). Watches each server while it
/// waits, so a lost server fails the pull at once.
/// @throws runtime_failure naming the server that failed.
std::vector<float> pull_dense(caf::actor_system& sys, const placement& layout,
                              const std::vector<server_route>& routes);

/// Fills each lookup's `rows` with the current rows of its unique `keys`
/// (deduplicate() called), read-only: a row a server does not hold reads as
/// its initial value and is not created.
/// @throws runtime_failure naming the server that failed or refused (e.g. a
///         key outside a table's vocabulary).
void pull_rows(caf::actor_system& sys, const placement& layout,
               const std::vector<server_route>& routes,
               std::vector<table_lookup>& tables);

/// Evaluates `net` on `data` with the values the servers hold now: the dense
/// variables and the rows of every key the test set uses are read once, then
/// batches of 256 examples are evaluated by up to one thread per core.
/// @returns net.metrics() of the whole set.
/// @throws runtime_failure as pull_dense / pull_rows.
metric_list evaluate_on_servers(caf::actor_system& sys,
                                const placement& layout,
                                const std::vector<server_route>& routes,
                                const model& net, const dataset& data);

/// Asks group `g`'s server for `req` (group, worker, dense, tables and
/// create set; the puller sets the view) and returns its reply.
/// @throws runtime_failure naming the server if it fails or refuses.
using group_puller = std::function<pull_reply(uint32_t g, pull_request req)>;

/// The blocking puller of the functions above: asks the server `routes`
/// names, at its view, and watches it while it waits.
group_puller blocking_puller(caf::actor_system& sys,
                             const std::vector<server_route>& routes);

/// pull_dense, pull_rows and evaluate_on_servers with another way to ask
/// the servers (the simulator's, which runs its scheduler while it waits).
std::vector<float> pull_dense(const placement& layout,
                              const group_puller& pull);
void pull_rows(const placement& layout, const group_puller& pull,
               std::vector<table_lookup>& tables);
metric_list evaluate_on_servers(const placement& layout,
                                const group_puller& pull, const model& net,
                                const dataset& data);

} // namespace actorps
