#pragma once

// The job's secret: what lets a node without TLS (`--tls off`) tell the
// nodes of its job from anyone else who can reach its port (another user
// of the same host, above all).
//
// A secret is a file of at least 32 bytes (all of its bytes are the key,
// a trailing newline too) that only its owner may read, like an ssh key:
// `--secret-file FILE` (cluster.secret_file), by default DIR/secret of
// `--tls DIR` when that file exists. `actorps launch --tls off` makes a
// fresh one per job; `actorps certs --secret` writes one beside the
// certificates. The secret itself is never on a command line.
//
// At the gate (cluster/net/gate.hpp), after the 16-byte preambles, both ends
// prove that they hold it without sending it (challenge-response with
// HMAC-SHA256, RFC 2104, over both preambles and a fresh nonce of each end):
//
//   dialer -> gate    preamble, byte 14 = 1 ("I hold a secret")
//   gate   -> dialer  preamble (byte 14 = 1), [TLS ticket, 32], gate nonce (32)
//   dialer -> gate    dialer nonce (32), HMAC(K, "actorps job secret 1 dialer"
//                     | dialer preamble | gate preamble | gate nonce |
//                     dialer nonce) (32)
//   gate   -> dialer  0 and HMAC(K, "actorps job secret 1 gate" | the same)
//                     (33), or 1, a 2-byte little-endian length and the
//                     reason, then it closes
//
// The dialer goes on (BASP, or the data channel's shared-memory offer) only
// after checking the gate's proof; both compare in constant time
// (CRYPTO_memcmp). A gate with a secret refuses a dialer whose preamble
// says it holds none, and a gate without one refuses a dialer that holds
// one, each with its reason in the usual refusal after the preamble
// (cluster/net/tls_channel.hpp). With TLS the exchange runs inside the
// session, so a node that has a secret requires it from every peer, TLS or
// not: a worker's key alone no longer gets anyone in.
//
// What it does not do: encrypt or authenticate the bytes that follow the
// handshake (that is TLS's job). Without TLS, someone who can read or
// change a connection's packets (root, or a program on the path between
// hosts) can still read or hijack it; on one host, only root can.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace actorps {

struct tls_settings;

/// Offset of the secret flag in a preamble (1: the sender holds a secret;
/// a dialer then proves it, a gate's answer then carries its nonce).
inline constexpr size_t preamble_secret_at = 14;
/// Bytes of a nonce and of a proof (HMAC-SHA256).
inline constexpr size_t secret_nonce_size = 32;
inline constexpr size_t secret_proof_size = 32;
/// Bytes of a gate's verdict that admits: 0, then its proof.
inline constexpr size_t secret_verdict_size = 1 + secret_proof_size;

using secret_nonce = std::array<unsigned char, secret_nonce_size>;
using secret_proof = std::array<unsigned char, secret_proof_size>;

/// What both ends prove over: the two preambles as sent, and both nonces.
struct secret_transcript {
  std::array<char, 16> dialer_preamble{};
  std::array<char, 16> gate_preamble{};
  secret_nonce gate_nonce{};
  secret_nonce dialer_nonce{};
};

/// Which end proves.
enum class secret_side { dialer, gate };

/// A job's secret, loaded once per process. Immutable, so thread-safe; its
/// bytes are wiped (OPENSSL_cleanse) when the last holder lets go.
class job_secret {
public:
  /// The fewest and most bytes a secret file may hold.
  static constexpr size_t min_bytes = 32;
  static constexpr size_t max_bytes = 4096;

  /// Reads `file`: a regular file of min_bytes to max_bytes, owned by this
  /// process's user and readable or writable by no one else (mode 0600 or
  /// 0400, as ssh asks of a key).
  /// @throws input_error naming the file and what is wrong ("is readable
  ///         by group or others (mode 0644): chmod 600 FILE", "holds 12
  ///         bytes, fewer than 32", missing, unreadable).
  static std::shared_ptr<const job_secret> load(const std::string& file);

  /// A secret of `bytes` (at least min_bytes) named `origin` in messages;
  /// for tests and tools.
  /// @throws input_error if it is shorter.
  static std::shared_ptr<const job_secret> of_bytes(std::string bytes,
                                                    std::string origin);

  /// Writes a fresh secret (32 random bytes from OpenSSL's RAND_bytes) to
  /// `file`, created with mode 0600; it must not exist yet.
  /// @throws runtime_failure naming the file if it cannot.
  static void write_new(const std::string& file);

  ~job_secret();

  job_secret(const job_secret&) = delete;
  job_secret& operator=(const job_secret&) = delete;

  /// Where it came from (the file), for log lines.
  const std::string& origin() const {
    return origin_;
  }

  /// This end's proof: HMAC-SHA256 with the secret as key of the side's
  /// label and the transcript (see above).
  secret_proof prove(secret_side side, const secret_transcript& t) const;

  /// Whether `proof` (secret_proof_size bytes) is `side`'s proof of `t`
  /// under this secret; compares in constant time.
  bool verify(secret_side side, const secret_transcript& t,
              const unsigned char* proof) const;

private:
  job_secret(std::string bytes, std::string origin)
    : bytes_(std::move(bytes)), origin_(std::move(origin)) {
  }

  std::string bytes_;
  std::string origin_;
};

/// A fresh nonce (RAND_bytes).
/// @throws runtime_failure if OpenSSL has no random bytes.
secret_nonce fresh_nonce();

/// Why a gate that holds a secret (`gate_has`) refuses a dialer whose
/// preamble says `dialer_has`; empty when both agree.
std::string secret_mismatch(bool gate_has, bool dialer_has);

/// The reason a gate gives for a dialer whose proof is wrong, and the one a
/// dialer gives for a gate whose proof is. They start "job secret wrong or
/// missing", as secret_mismatch's do.
std::string wrong_dialer_proof();
std::string wrong_gate_proof();

/// The dialer's answer to a gate's nonce: fills `t.dialer_nonce` with a
/// fresh nonce and returns it followed by the dialer's proof of `t`
/// (secret_nonce_size + secret_proof_size bytes to send).
/// @throws runtime_failure if OpenSSL has no random bytes.
std::string dialer_answer(const job_secret& secret, secret_transcript& t);

/// The gate's verdict on a dialer's `answer` (its nonce, which goes into
/// `t.dialer_nonce`, and its proof): 0 and the gate's proof of `t` if the
/// dialer's is right (`why` stays empty); else 1, a 2-byte little-endian
/// length and `prefix` + the reason, which `why` gets too.
std::string gate_verdict(const job_secret& secret, secret_transcript& t,
                         const char* answer, const std::string& prefix,
                         std::string& why);

/// How many bytes of a gate's verdict are still missing from
/// `bytes[0..got)` (never more, so that nothing after it is read).
size_t verdict_missing(const char* bytes, size_t got);

/// A whole verdict, judged by the dialer: empty if it admits and the
/// gate's proof of `t` is right; else the gate's reason, or
/// wrong_gate_proof().
std::string check_verdict(const job_secret& secret,
                          const secret_transcript& t, const char* bytes,
                          size_t n);

/// The secret file that `file` (--secret-file) and `tls` name: `file`, or
/// else DIR/secret of `--tls DIR` if it exists, or else none.
std::optional<std::string> secret_file_of(const std::string& file,
                                          const tls_settings& tls);

/// Loads this process's node's secret (secret_file_of) into set_node_secret
/// and logs it (`who`, `index`: the node in log lines); nothing is said
/// without one.
/// @throws input_error as job_secret::load.
void open_node_secret(const std::string& file, const tls_settings& tls,
                      const std::string& who, int index);

/// The secret of this process's node (null: none). `actorps node` sets it
/// once at its start; the gates and dials of the process use it unless told
/// otherwise.
void set_node_secret(std::shared_ptr<const job_secret> secret);
std::shared_ptr<const job_secret> node_secret();

} // namespace actorps
