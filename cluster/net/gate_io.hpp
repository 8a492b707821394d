#pragma once

// Socket helpers the gate and dial() share (cluster/net/gate.cpp,
// cluster/net/dial.cpp). Internal.

#include <array>
#include <chrono>
#include <memory>
#include <string>

#include <netdb.h>

#include "caf/actor.hpp"
#include "caf/fwd.hpp"

#include "cluster/spec/cluster_spec.hpp"
#include "cluster/net/gate.hpp"

namespace actorps {
class channel;
}

namespace actorps::detail {

/// This node's preamble: magic, protocol_version, status 0.
std::array<char, preamble_size> make_preamble();

void set_nonblocking(int fd, bool on);

void set_nodelay(int fd);

/// getaddrinfo for `hp`; the caller frees the list. Null with `error` set
/// if the name does not resolve.
addrinfo* resolve(const host_port& hp, bool passive, std::string& error);

/// Connects to the gate at `peer` as dial() does (TCP, TLS with the peer's
/// certificate naming `expect`, the preamble both ways, with `secret` the
/// proofs of the job's secret), saying channel `kind`
/// (cluster/net/tls_channel.hpp) in its preamble, and returns the open
/// channel; null with `out.error` and `out.retryable` set on failure.
/// `secret` defaults to the process's (node_secret()).
std::unique_ptr<channel> open_channel(
  const host_port& peer, std::chrono::steady_clock::time_point deadline,
  const tls_context* tls, const node_identity* expect, char kind,
  dial_result& out,
  const std::shared_ptr<const job_secret>& secret = node_secret());

/// CAF's BASP broker of `sys`, which takes the admitted connections.
caf::actor basp_broker(caf::actor_system& sys);

} // namespace actorps::detail
