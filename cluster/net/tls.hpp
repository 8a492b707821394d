#pragma once

// Mutual TLS between the nodes of a cluster.
//
// Every node holds a certificate of the cluster's own CA (`actorps certs`,
// cluster/net/certs.hpp) whose subject names its role and index: O=actorps,
// OU=<role> ("chief", "ps", "worker"), CN=<node> ("coordinator", "ps0",
// "worker1"). TLS is the first thing on a node's port (cluster/net/gate.hpp):
// both sides present their certificate and verify the other's against the
// CA (OpenSSL: chain, signature, validity period), so a peer without a
// certificate, with one of another CA or an expired one never gets past the
// TLS handshake. Then:
// - the dialer compares the acceptor's certificate with the member it meant
//   to reach (the coordinator dialling ps0 accepts only "ps0");
// - the acceptor checks that the dialer's role may dial it (a ps admits the
//   coordinator and workers, a worker only the coordinator) and gives it a
//   ticket, 128 random bits, inside TLS; the dialer's handshake message
//   carries the ticket back, and the node refuses a handshake whose role and
//   index differ from the certificate that ticket was issued to. The ticket
//   binds the handshake (a CAF message, which does not know its connection)
//   to the certificate of the connection it was issued on.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;
typedef struct x509_st X509;

namespace actorps {

struct tls_settings;

/// A node as a certificate names it.
struct node_identity {
  std::string role; ///< "chief", "ps" or "worker"
  uint32_t index = 0;

  /// "coordinator", "ps0", "worker1": the certificate's CN.
  std::string name() const;

  friend bool operator==(const node_identity& x, const node_identity& y) {
    return x.role == y.role && x.index == y.index;
  }
  friend bool operator!=(const node_identity& x, const node_identity& y) {
    return !(x == y);
  }
};

/// The identity a certificate's subject names (OU = role, CN = node name of
/// that role), or none if the subject is not an actorps node's.
std::optional<node_identity> identity_of(X509* cert);

/// The certificate's subject in one line ("O=actorps, OU=ps, CN=ps0").
std::string subject_of(X509* cert);

/// Whether a node of role `dialer` may open connections to one of role
/// `acceptor`: the coordinator dials everyone, workers and parameter servers
/// (replication) dial parameter servers, a worker dials the coordinator to
/// join a running job (its join desk), nobody dials a worker but the
/// coordinator.
bool may_dial(const std::string& dialer, const std::string& acceptor);

/// The three PEM files of a node.
struct tls_files {
  std::string ca;   ///< the cluster CA's certificate
  std::string cert; ///< this node's certificate
  std::string key;  ///< this node's private key (unencrypted)
};

/// The files of `node` in a folder made by `actorps certs`: DIR/ca.pem,
/// DIR/<node>.pem, DIR/<node>.key.
tls_files tls_files_in(const std::string& dir, const node_identity& node);

/// One node's TLS state: its certificate and key, the CA it trusts, one
/// OpenSSL context for both directions, and the tickets its gate issued.
/// Thread-safe.
class tls_context {
public:
  /// Loads and checks the files: each readable PEM, the key matching the
  /// certificate, the certificate naming an actorps node. A certificate
  /// that is expired (or not yet valid) or not issued by the CA loads, with
  /// a warning in `warning()`: peers refuse it, and both sides say so.
  /// @throws input_error naming the file and what is wrong with it.
  static std::shared_ptr<tls_context> load(const tls_files& files);

  ~tls_context();

  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  /// Whom this node's certificate names.
  const node_identity& identity() const {
    return identity_;
  }

  /// "certificate ps0.pem (CN=ps0, valid until 2027-11-24), CA ca.pem".
  std::string describe() const;

  /// Non-empty when the node's own certificate is expired, not yet valid,
  /// or not issued by the CA.
  const std::string& warning() const {
    return warning_;
  }

  /// A new TLS session on the connected socket `fd`, in the server role
  /// (`accept`) or the client role. The caller owns it (SSL_free).
  SSL* new_session(int fd, bool accept) const;

  // -- tickets ----------------------------------------------------------------

  /// A fresh ticket for a connection whose peer presented `peer`'s
  /// certificate (32 hex digits). Tickets not redeemed within a minute are
  /// forgotten; at most 4096 are kept.
  std::string issue_ticket(const node_identity& peer);

  /// Redeems `ticket` for a handshake that claims to be `claimed`. Returns
  /// an empty string if the ticket was issued to that identity, else why
  /// not ("the certificate of its connection names worker1, its handshake
  /// says ps0"). A ticket is redeemed once.
  std::string redeem(const std::string& ticket,
                     const node_identity& claimed);

private:
  tls_context() = default;

  SSL_CTX* ctx_ = nullptr;
  node_identity identity_;
  std::string describe_;
  std::string warning_;
  std::mutex mtx_;
  struct issued {
    node_identity peer;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, issued> tickets_;
};

/// What went wrong in the last OpenSSL call on `ssl` (may be null), from
/// the thread's error queue and the peer verification result: "certificate
/// verify failed: certificate has expired", "tlsv13 alert certificate
/// required". Clears the queue.
std::string tls_error(SSL* ssl);

/// The files of node `me` that `settings` name: those of settings.dir
/// (tls_files_in), each replaced by a file named on its own (--tls-ca,
/// --tls-cert, --tls-key).
/// @throws input_error "TLS: --tls-cert missing (or --tls DIR)" for a file
///         neither names.
tls_files node_tls_files(const tls_settings& settings,
                         const node_identity& me);

/// Sets up TLS for the node `me` of a multi-process cluster from `settings`
/// (set_node_tls) and logs it as the node's first line: which certificate,
/// or, with tls off, that the node speaks plain TCP and authenticates
/// nobody. A certificate that names another node than `me`, or is expired,
/// is loaded with a warning: the node's peers refuse it and say why.
/// @throws input_error when nothing was said about TLS (plain TCP only when
///         asked for), a file is missing or unusable (naming it).
void open_node_tls(const tls_settings& settings, const node_identity& me);

/// The TLS settings of this process's node (null: plain TCP). `actorps node`
/// sets them once at its start; the gates and dials of the node's actor
/// system use them.
void set_node_tls(std::shared_ptr<tls_context> ctx);
std::shared_ptr<tls_context> node_tls();

} // namespace actorps
