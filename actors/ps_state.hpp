#pragma once

// What a parameter server actor keeps (actors/ps_actor.cpp) and what its
// request handlers and its replication (actors/ps_chain.cpp) share. Private
// to actors/: a program built on the library uses ps_actor.hpp.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "caf/expected.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/ps_actor.hpp"
#include "actors/ps_replica.hpp"
#include "core/error.hpp"
#include "core/update_rule.hpp"

namespace actorps {

struct ps_state {
  ps_options opts;
  /// The wire formats pushes arrived in, by name (a few at most).
  std::map<std::string, std::shared_ptr<const wire_format>> formats;
  std::shared_ptr<const update_rule> dense_rule;
  std::shared_ptr<const update_rule> table_rule;
  /// The replica groups this server holds, by group.
  std::map<uint32_t, ps_replica> groups;
  /// Groups that moved away (a planned move), with the view they moved
  /// at: requests naming them are answered stale_view ("moved").
  std::map<uint32_t, uint64_t> moved;
  /// Requests refused by opts.authorize so far (for the log line).
  uint64_t refused = 0;
  static constexpr const char* name = "parameter-server";
};

using ps_ptr = ps_actor::stateful_pointer<ps_state>;

using ack_promise = caf::typed_response_promise<uint64_t>;

/// The group a request names, or an error (no_shards while the server holds
/// nothing at all yet).
inline caf::expected<ps_replica*> find_group(ps_state& st, uint32_t g) {
  auto i = st.groups.find(g);
  if (i == st.groups.end() && st.moved.count(g) > 0)
    return caf::make_error(errc::stale_view, "ps", st.opts.index, "group", g,
                           "moved at view", st.moved.at(g));
  if (i == st.groups.end() && st.groups.empty())
    return caf::make_error(errc::no_shards, st.opts.index);
  if (i == st.groups.end())
    return caf::make_error(errc::unknown_group, "ps", st.opts.index, "group",
                           g);
  return &i->second;
}

/// The group a worker's request names, if this server is its primary at the
/// view the request knows.
inline caf::expected<ps_replica*> serving(ps_state& st, uint32_t g, uint64_t view) {
  auto r = find_group(st, g);
  if (!r)
    return r;
  if (!(*r)->primary || (*r)->view != view)
    return caf::make_error(errc::stale_view, "ps", st.opts.index, "group", g,
                           (*r)->primary ? "primary" : "backup", (*r)->view,
                           view);
  return r;
}

/// The step scales of a push of `staleness` for the dense region and the
/// table rows: 1 / tau where the rule is staleness-aware (optimizer_config).
inline std::pair<float, float> step_scales(const ps_options& opts,
                                    uint64_t staleness) {
  auto of = [&](const optimizer_config& rule) {
    return rule.staleness_aware ? staleness_step_scale(staleness) : 1.0f;
  };
  return {of(opts.optimizer), of(opts.table_optimizer)};
}

} // namespace actorps
