#pragma once

// The actor_system_config of every actorps process (in its own
// header; cluster/topology/local_cluster.hpp includes it for its users).

#include <chrono>
#include <cstdint>

#include "caf/actor_system_config.hpp"

namespace actorps {

/// How a process of a multi-process cluster uses the network.
struct network_options {
  /// CAF heartbeats between connected nodes; a peer silent for
  /// `heartbeat_timeout` is reported lost (0 = no heartbeats).
  std::chrono::milliseconds heartbeat_interval{200};
  std::chrono::milliseconds heartbeat_timeout{1000};
};

/// The actor_system_config of every actorps process: registers the message
/// types, renders actorps errors, uses CAF's "sharing" scheduler with the
/// given thread count, and keeps large buffers on glibc's heap (mallopt: a
/// process-wide setting).
class system_config : public caf::actor_system_config {
public:
  /// An in-process system. @param threads scheduler threads; 0 = one per core.
  explicit system_config(uint32_t threads = 0);

  /// A system that talks to other nodes: loads CAF's middleman, turns on
  /// heartbeats as `net` says; `threads` = 0 means one (a node runs one main
  /// actor).
  system_config(uint32_t threads, const network_options& net);
};

} // namespace actorps
