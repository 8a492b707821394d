#pragma once

// The behaviour of an actor in front of a parameter server (the fault
// injection proxy, actors/fault_injection.cpp; the simulator's network,
// cluster/sim/sim_link.cpp): every request of the ps protocol but pull and push
// is delegated to the server, which answers the sender directly; pull, push
// and the wrapper's own messages are the wrapper's handlers.

#include <utility>

#include "actors/ps_actor.hpp"

namespace actorps {

/// `Interface` extends ps_actor; `server()` returns the ps_actor to forward
/// to; `handlers` are those of pull_atom, push_atom and every message the
/// wrapper adds.
template <class Interface, class Self, class Server, class... Handlers>
typename Interface::behavior_type
ps_forwarding_behavior(Self self, Server server, Handlers... handlers) {
  return {
    [=](create_atom a, create_shard& x) {
      return self->delegate(server(), a, std::move(x));
    },
    [=](replicate_atom a, replicate_request& x) {
      return self->delegate(server(), a, std::move(x));
    },
    [=](configure_atom a, replica_config& x) {
      return self->delegate(server(), a, std::move(x));
    },
    [=](install_atom a, uint32_t g, uint64_t view, ps_snapshot& x) {
      return self->delegate(server(), a, g, view, std::move(x));
    },
    [=](stats_atom a, uint32_t g) { return self->delegate(server(), a, g); },
    [=](save_atom a, uint32_t g) { return self->delegate(server(), a, g); },
    [=](save_atom a, uint32_t g, uint64_t base, uint64_t mark) {
      return self->delegate(server(), a, g, base, mark);
    },
    [=](restore_atom a, uint32_t g, ps_snapshot& x) {
      return self->delegate(server(), a, g, std::move(x));
    },
    [=](prune_atom a, uint64_t first, uint64_t watermark) {
      return self->delegate(server(), a, first, watermark);
    },
    [=](ping_atom a) { return self->delegate(server(), a); },
    [=](caf::flush_atom a, uint32_t g, uint64_t round) {
      return self->delegate(server(), a, g, round);
    },
    [=](handoff_atom a, uint32_t g, uint64_t view) {
      return self->delegate(server(), a, g, view);
    },
    [=](drop_atom a, uint32_t g, uint64_t view) {
      return self->delegate(server(), a, g, view);
    },
    [=](caf::timeout_atom a, uint32_t g, uint64_t n) {
      return self->delegate(server(), a, g, n);
    },
    std::move(handlers)...,
  };
}

} // namespace actorps
