#pragma once

// Socket helpers the gate and dial() share (cluster/gate.cpp,
// cluster/dial.cpp). Internal.

#include <array>
#include <string>

#include <netdb.h>

#include "caf/actor.hpp"
#include "caf/fwd.hpp"

#include "cluster/cluster_spec.hpp"
#include "cluster/gate.hpp"

namespace actorps::detail {

/// This node's preamble: magic, protocol_version, status 0.
std::array<char, preamble_size> make_preamble();

void set_nonblocking(int fd, bool on);

void set_nodelay(int fd);

/// getaddrinfo for `hp`; the caller frees the list. Null with `error` set
/// if the name does not resolve.
addrinfo* resolve(const host_port& hp, bool passive, std::string& error);

/// CAF's BASP broker of `sys`, which takes the admitted connections.
caf::actor basp_broker(caf::actor_system& sys);

} // namespace actorps::detail
