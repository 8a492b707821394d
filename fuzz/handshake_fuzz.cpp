// Fuzz target: the handshake messages two nodes exchange after the gate
// (cluster/net/handshake.hpp): a peer's `handshake` (hello_atom, as a node
// receives it from the coordinator) or its `node_welcome` (the answer the
// coordinator receives), deserialised as BASP does, then compared with this
// node's own handshake as node_actor and join_members do.
//
// Input: one byte (even: a handshake; odd: a node_welcome), then the
// serialised message.
//
// Properties: deserialising returns a value or an error; comparing never
// crashes; the differences are empty exactly when protocol, build and every
// job field agree, are as many in both directions, and are empty when a
// handshake is compared with itself; the fingerprint id is 8 hex digits.

#include <cstddef>
#include <cstdint>

#include "caf/binary_deserializer.hpp"

#include "actors/messages.hpp"
#include "cluster/net/handshake.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "fuzz/fuzz_system.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

/// This node's handshake: ps 0 of the default job.
const handshake& mine() {
  static const handshake hs = make_handshake(job_config{}, placement{}, "ps",
                                             0);
  return hs;
}

bool same_job(const job_fingerprint& x, const job_fingerprint& y) {
  return x.model == y.model && x.variables == y.variables
         && x.partitioning == y.partitioning && x.optimizer == y.optimizer
         && x.consistency == y.consistency && x.cluster == y.cluster
         && x.data == y.data;
}

void compare(const handshake& peer) {
  auto diffs = handshake_differences(mine(), peer);
  auto back = handshake_differences(peer, mine());
  bool agree = mine().protocol == peer.protocol && mine().build == peer.build
               && same_job(mine().job, peer.job);
  fuzz::check(diffs.empty() == agree,
              "handshake_differences disagrees with the fields");
  fuzz::check(diffs.size() == back.size(),
              "handshake_differences is not symmetric");
  fuzz::check(handshake_differences(peer, peer).empty(),
              "a handshake differs from itself");
  (void) join_lines(diffs);
  auto id = fingerprint_id(peer.job);
  fuzz::check(id.size() == 8
                && id.find_first_not_of("0123456789abcdef")
                     == std::string::npos,
              "fingerprint_id is not 8 hex digits");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  bool welcome = (in.u8() & 1) != 0;
  auto bytes = in.rest();
  auto& sys = fuzz::fuzz_system();
  caf::binary_deserializer src{sys, bytes.data(), bytes.size()};
  if (welcome) {
    node_welcome w;
    if (auto err = src(w))
      return 0;
    compare(w.node);
  } else {
    handshake hs;
    if (auto err = src(hs))
      return 0;
    compare(hs);
  }
  return 0;
}
