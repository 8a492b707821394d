#pragma once

// The TCP front door of an actorps node.
//
// CAF 0.17's BASP trusts the first bytes of a connection: a header that
// announces a 4 GiB handshake makes the node allocate it and stop answering
// (measured: 3 GB resident after 8 s, new peers time out). So a node does not
// let CAF listen on its port. The gate listens instead; a peer first sends a
// 16-byte preamble, the gate answers with its own, and only then is the socket
// handed to CAF's BASP broker, which runs its own handshake and publishes the
// node's actor on it. Anything else is closed within 2 s and counted.
//
// Preamble (16 bytes): "ACTORPS" and a 0 byte, the protocol version as a
// little-endian uint32, a status byte (0: go on, 1: refused, followed by the
// reason; see cluster/net/tls_channel.hpp), the channel kind (a dialer's),
// the job-secret flag (1: the sender holds the job's secret), 1 byte of 0.
//
// With a job secret (cluster/net/job_secret.hpp) both ends then prove they
// hold it (challenge-response, HMAC-SHA256) before anything else; a gate
// with one refuses a dialer without it, and one without refuses a dialer
// that has one.
//
// With TLS (cluster/net/tls.hpp) the gate's port speaks TLS first: the TLS
// handshake with mutual certificate verification, then the preamble inside
// TLS, then BASP inside the same session. The gate admits only roles that
// may dial its node (may_dial) and answers with a ticket for the handshake.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "caf/actor_control_block.hpp"
#include "caf/fwd.hpp"

#include "cluster/net/basp_guard.hpp"
#include "cluster/net/job_secret.hpp"
#include "cluster/spec/cluster_spec.hpp"
#include "cluster/net/tls.hpp"

namespace actorps {

class channel;

/// Bytes in a preamble.
inline constexpr size_t preamble_size = 16;

/// What the first bytes a peer sent on a connection say about it.
struct preamble_check {
  enum class verdict {
    /// Fewer than preamble_size bytes, all matching so far: wait for more.
    incomplete,
    /// An actorps preamble of this node's protocol_version.
    ok,
    /// Not an actorps peer: a byte of the magic differs. (The 4 reserved
    /// bytes at the end are not checked.)
    not_actorps,
    /// An actorps preamble of another protocol version (`version`).
    other_version,
  };
  verdict result = verdict::incomplete;
  /// The version the preamble states (ok, other_version).
  uint32_t version = 0;
  /// Up to 8 of the first bytes in hex, for log lines.
  std::string first_bytes;
};

/// Checks the first `n` bytes a peer sent: `bytes[0..min(n, 16))`. The
/// verdict on a prefix never contradicts the verdict on the whole: a prefix
/// that is `incomplete` is one that a valid preamble starts with.
preamble_check check_preamble(const char* bytes, size_t n);

/// Listens on one address and admits actorps peers to CAF (see above).
class gate {
public:
  /// Takes a data channel (cluster/net/data_link.hpp) that passed TLS and the
  /// preamble, with the peer's name for log lines; runs on the gate's
  /// thread, so it must not block.
  using data_handler =
    std::function<void(std::unique_ptr<channel> ch, const std::string& peer)>;

  /// What a peer may announce in BASP (cluster/net/basp_guard.hpp), by the
  /// identity its certificate names (none without TLS).
  using limits_function =
    std::function<basp_limits(const std::optional<node_identity>& peer)>;

  /// Binds `where` and starts the gate's thread. Connections that pass the
  /// preamble reach `whom` (a published actor with interface `sigs`, as
  /// caf::actor_system::message_types gives it). `label` names the node in
  /// log lines ("ps 0"). With `tls`, connections must pass TLS (see
  /// above) and the gate issues tickets from `tls`; without, plain TCP.
  /// With `secret` (by default the process's, node_secret()), every
  /// dialer must prove it holds the same (cluster/net/job_secret.hpp).
  /// @throws runtime_failure naming the address if it cannot be resolved or
  ///         bound (e.g. the port is in use).
  gate(caf::actor_system& sys, const host_port& where,
       caf::strong_actor_ptr whom, std::set<std::string> sigs,
       std::string label, std::shared_ptr<tls_context> tls = nullptr,
       data_handler on_data = {}, limits_function limits = {},
       std::shared_ptr<const job_secret> secret = node_secret());

  /// Stops listening (connections already handed to CAF stay open).
  ~gate();

  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  /// The port bound.
  uint16_t port() const {
    return port_;
  }

  /// Connections closed without reaching CAF (bad or missing preamble,
  /// another protocol version, a job secret wrong or missing, ...).
  uint64_t rejected() const {
    return rejected_.load();
  }

private:
  void run();

  caf::actor_system& sys_;
  std::shared_ptr<tls_context> tls_;
  std::shared_ptr<const job_secret> secret_;
  caf::strong_actor_ptr whom_;
  data_handler on_data_;
  limits_function limits_;
  std::set<std::string> sigs_;
  std::string label_;
  int listen_fd_ = -1;
  int wake_fd_ = -1; // eventfd: ~gate wakes the thread
  uint16_t port_ = 0;
  std::atomic<uint64_t> rejected_{0};
  /// BASP connections open per peer identity (those the gate handed to
  /// CAF and CAF still holds).
  struct basp_census {
    std::mutex mtx;
    std::map<std::string, int> open;
  };
  std::shared_ptr<basp_census> census_ = std::make_shared<basp_census>();
  std::thread thread_;
};

/// The outcome of dial().
struct dial_result {
  /// The actor published at the peer's gate; null on failure.
  caf::strong_actor_ptr actor;
  /// Why it failed ("connection refused", "not an actorps node (...)").
  std::string error;
  /// Whether trying again later may succeed (the peer may not be up yet).
  bool retryable = false;
  /// With TLS: the ticket the peer's gate issued, for the handshake message.
  std::string ticket;
};

/// Connects to the gate at `peer`: TCP connect, with `tls` the TLS handshake
/// (the peer's certificate must name `expect`, if given), preamble both
/// ways, with `secret` (by default the process's) the proofs of the job's
/// secret both ways, then CAF's BASP handshake, all within `timeout`. A
/// refusal by either side (certificate, role, protocol version, job secret)
/// is not retryable.
dial_result dial(caf::actor_system& sys, const host_port& peer,
                 std::chrono::milliseconds timeout,
                 const tls_context* tls = nullptr,
                 const node_identity* expect = nullptr,
                 std::shared_ptr<const job_secret> secret = node_secret());

} // namespace actorps
