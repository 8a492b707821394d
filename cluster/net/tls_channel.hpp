#pragma once

// One connection of a gate or dial before CAF owns it: plain TCP or TLS,
// read and written without blocking (the caller polls), then handed to
// CAF's multiplexer as a scribe that goes on with the same TLS session.
//
// Why not caf::openssl: CAF 0.17's openssl module does verify peers when
// `openssl.certificate`, `openssl.key` and `openssl.cafile` are set (it sets
// SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT), but its doorman hands
// every TLS connection straight to BASP, past the gate's preamble, and its
// session keeps the SSL object private, so nobody can read the peer's
// certificate to check its role and index. The scribe here is built like
// the module's (CAF's stream_impl<policy> with a policy over SSL_read and
// SSL_write), on a session whose peer the gate or dial has checked.

#include <cstddef>
#include <memory>
#include <string>

#include "caf/fwd.hpp"
#include "caf/io/fwd.hpp"
#include "caf/intrusive_ptr.hpp"

#include "cluster/net/basp_guard.hpp"
#include "cluster/net/tls.hpp"

namespace actorps {

/// A connected socket and, with TLS, its session. Owns both until
/// release_to().
class channel {
public:
  enum class status {
    /// The operation is complete.
    done,
    /// Call again once the socket is readable / writable.
    want_read,
    want_write,
    /// The peer closed the connection.
    closed,
    /// Failed; error() says why.
    failed,
  };

  /// A plain channel (`ssl` null) or a TLS one; takes ownership of both.
  channel(int fd, SSL* ssl);
  ~channel();

  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  int fd() const {
    return fd_;
  }

  bool tls() const {
    return ssl_ != nullptr;
  }

  /// One step of the TLS handshake (done at once for plain TCP).
  status handshake();

  /// Reads up to `n` bytes into `buf`; `got` is what was read (status done).
  status read(char* buf, size_t n, size_t& got);

  /// Writes `n` bytes (a few hundred at most: they fit the socket buffer
  /// of a fresh connection); anything short of all of them is failed.
  status write(const char* buf, size_t n);

  /// Writes up to `n` bytes (any number); `wrote` is how many were written
  /// (status done). For the data channel (cluster/net/frame_pump.hpp), after
  /// allow_partial_writes().
  status write_some(const char* buf, size_t n, size_t& wrote);

  /// Lets a TLS session write part of a buffer, and take the rest from
  /// another address (SSL_MODE_ENABLE_PARTIAL_WRITE and
  /// SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER); nothing for plain TCP.
  void allow_partial_writes();

  /// Why the last operation failed.
  const std::string& error() const {
    return error_;
  }

  /// Whether the last failure was the connection's (reset, closed), not
  /// TLS's (a certificate refused, an alert): trying again may succeed.
  bool transport_failure() const {
    return transport_failure_;
  }

  /// The identity the peer's certificate names (TLS, after the handshake),
  /// and its subject for messages.
  std::optional<node_identity> peer_identity() const;
  std::string peer_subject() const;

  /// Hands the socket (and session) to CAF's multiplexer of `sys`; the
  /// channel owns nothing afterwards. What the peer sends passes through a
  /// basp_guard with `limits` first: a header announcing more closes the
  /// connection, logged with `label` (who the peer is). `hold` is kept
  /// for as long as CAF keeps the connection (the gate counts them with
  /// it).
  caf::intrusive_ptr<caf::io::scribe>
  release_to(caf::actor_system& sys, basp_limits limits = {},
             const std::string& label = {},
             std::shared_ptr<void> hold = nullptr);

private:
  status fail(int ret, const char* what);

  int fd_;
  SSL* ssl_;
  std::string error_;
  bool transport_failure_ = false;
};

// -- what a gate and a dialer tell each other after the preamble -------------
//
// The 16-byte preamble (cluster/net/gate.hpp) has 4 reserved bytes; the first of
// them says whether the sender goes on (0) or refuses the peer (1). A
// refusal is followed by a 2-byte little-endian length and that many bytes
// of text, the reason, and then the sender closes. With TLS, a gate that
// admits a dialer follows its preamble with a 32-character ticket, and with
// a job secret with its nonce (byte 14 and the exchange after the
// preamble: cluster/net/job_secret.hpp).

/// Offset of the status byte in a preamble.
inline constexpr size_t preamble_status_at = 12;
/// Offset of the channel kind in a dialer's preamble: 0 for CAF's BASP (and
/// from peers before the data channel), 1 for a data channel
/// (cluster/net/data_link.hpp). A gate's answer leaves it 0.
inline constexpr size_t preamble_kind_at = 13;
inline constexpr char channel_basp = 0;
inline constexpr char channel_data = 1;
/// Length of a ticket.
inline constexpr size_t ticket_size = 32;
/// The longest reason a refusal carries.
inline constexpr size_t max_reason_size = 512;

/// Appends a refusal with `reason` (cut to max_reason_size) to `preamble`.
std::string refusal_message(std::string preamble, const std::string& reason);

/// How many bytes of a peer's message are still missing from
/// `bytes[0..got)`: the preamble, then either `extra` bytes (status 0) or a
/// refusal's length and reason. Never more, so that nothing after it (BASP)
/// is read.
size_t missing_bytes(const char* bytes, size_t got, size_t extra);

/// Reads a refusal's reason from `bytes` (after the preamble); false while
/// incomplete.
bool parse_refusal(const char* bytes, size_t n, std::string& reason);

} // namespace actorps
