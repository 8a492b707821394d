#include "cluster/net/authorization.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

#include "caf/actor_control_block.hpp"

namespace actorps {

namespace {

/// The parameter server's column of the table in the header, by role.
struct ps_permissions {
  const char* role;
  std::array<ps_request, 11> may; // the first `count` entries
  size_t count;
};

constexpr std::array<ps_permissions, 3> ps_table{{
  {"chief",
   {ps_request::create, ps_request::pull, ps_request::configure,
    ps_request::install, ps_request::stats, ps_request::save,
    ps_request::restore, ps_request::prune, ps_request::ping,
    ps_request::handoff, ps_request::drop},
   11},
  {"worker",
   {ps_request::pull, ps_request::push, ps_request::ping},
   3},
  {"ps",
   {ps_request::replicate, ps_request::install, ps_request::ping},
   3},
}};

} // namespace

std::string to_string(const peer_identity& id) {
  return fmt::format("{} {} (incarnation {})", id.role, id.index,
                     id.incarnation);
}

std::optional<caf::node_id> peer_registry::admit(const caf::node_id& peer,
                                                 const peer_identity& id) {
  std::lock_guard<std::mutex> guard{mtx_};
  std::optional<caf::node_id> displaced;
  for (auto i = peers_.begin(); i != peers_.end();) {
    if (i->first != peer && i->second.role == id.role
        && i->second.index == id.index) {
      displaced = i->first;
      i = peers_.erase(i);
    } else {
      ++i;
    }
  }
  peers_[peer] = id;
  return displaced;
}

std::optional<peer_identity>
peer_registry::find(const caf::node_id& peer) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = peers_.find(peer);
  if (i == peers_.end())
    return std::nullopt;
  return i->second;
}

basp_limits basp_limits_for(const std::optional<node_identity>& peer,
                            uint64_t dense_bytes) {
  basp_limits out;
  if (!peer || peer->role != "worker")
    return out;
  auto bound = 2 * dense_bytes + (uint64_t{64} << 20);
  out.routed = false;
  out.message_bytes = static_cast<uint32_t>(
    std::min<uint64_t>(bound, out.message_bytes));
  return out;
}

bool may_send(const std::string& role, ps_request kind) {
  for (auto& row : ps_table)
    if (role == row.role) {
      for (size_t i = 0; i < row.count; ++i)
        if (row.may[i] == kind)
          return true;
      return false;
    }
  return false;
}

std::string request_refusal(const std::string& role, uint32_t index,
                            ps_request kind, uint32_t worker) {
  if (!may_send(role, kind))
    return fmt::format("a {} may not send it", role.empty() ? "peer" : role);
  // A pull may also name no worker: a read outside the clocks, never held
  // back and counted for no one.
  bool names_worker = kind == ps_request::push
                      || (kind == ps_request::pull && worker != no_worker);
  if (role == "worker" && names_worker && worker != index)
    return fmt::format("in the name of worker {}",
                       worker == no_worker ? std::string{"none"}
                                           : std::to_string(worker));
  return {};
}

ps_authorizer authorize_ps_requests(std::shared_ptr<const peer_registry> peers,
                                    caf::node_id self) {
  return [peers = std::move(peers), self = std::move(self)](
           const caf::strong_actor_ptr& sender, ps_request kind,
           uint32_t worker) -> std::string {
    if (!sender)
      return fmt::format("an anonymous {} (no sender to authorize)",
                         to_string(kind));
    if (sender->node() == self)
      return {};
    auto who = peers->find(sender->node());
    if (!who)
      return fmt::format("a {} from node {}, which never introduced itself "
                         "(no admitted hello)",
                         to_string(kind), to_string(sender->node()));
    auto why = request_refusal(who->role, who->index, kind, worker);
    if (why.empty())
      return {};
    return fmt::format("a {} from {}: {}", to_string(kind), to_string(*who),
                       why);
  };
}

} // namespace actorps
