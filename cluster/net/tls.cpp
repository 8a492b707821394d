#include "cluster/net/tls.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

constexpr auto ticket_lifetime = std::chrono::minutes(1);
constexpr size_t max_tickets = 4096;

std::shared_ptr<tls_context> process_tls;
std::mutex process_tls_mtx;

struct x509_deleter {
  void operator()(X509* x) const {
    X509_free(x);
  }
};
struct pkey_deleter {
  void operator()(EVP_PKEY* x) const {
    EVP_PKEY_free(x);
  }
};
using x509_ptr = std::unique_ptr<X509, x509_deleter>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_deleter>;

/// The reasons in this thread's OpenSSL error queue; clears it.
std::string drain_errors() {
  std::string out;
  while (auto e = ERR_get_error()) {
    auto* r = ERR_reason_error_string(e);
    auto text = r != nullptr ? std::string{r} : fmt::format("error {:x}", e);
    if (out.find(text) == std::string::npos)
      out += (out.empty() ? "" : "; ") + text;
  }
  return out;
}

/// Opens `path` for reading or throws naming it.
BIO* open_file(const std::string& path, const char* what) {
  if (path.empty())
    throw input_error(fmt::format("TLS: no {} file given", what));
  auto* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    throw input_error(fmt::format("TLS {} {}: cannot read: {}", what, path,
                                  std::strerror(errno)));
  std::fclose(f);
  auto* bio = BIO_new_file(path.c_str(), "rb");
  if (bio == nullptr)
    throw input_error(fmt::format("TLS {} {}: cannot read: {}", what, path,
                                  drain_errors()));
  return bio;
}

x509_ptr read_cert(const std::string& path, const char* what) {
  auto* bio = open_file(path, what);
  x509_ptr cert{PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)};
  BIO_free(bio);
  if (!cert)
    throw input_error(fmt::format("TLS {} {}: not a PEM certificate ({})",
                                  what, path, drain_errors()));
  return cert;
}

pkey_ptr read_key(const std::string& path) {
  auto* bio = open_file(path, "key");
  pkey_ptr key{PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr)};
  BIO_free(bio);
  if (!key)
    throw input_error(fmt::format("TLS key {}: not an unencrypted PEM private "
                                  "key ({})",
                                  path, drain_errors()));
  return key;
}

std::string entry_text(X509_NAME* name, int nid) {
  auto at = X509_NAME_get_index_by_NID(name, nid, -1);
  if (at < 0)
    return {};
  unsigned char* utf8 = nullptr;
  auto n = ASN1_STRING_to_UTF8(
    &utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, at)));
  if (n < 0)
    return {};
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

/// "2027-11-24 18:40 UTC".
std::string date_of(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1)
    return "?";
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

} // namespace

// -- identities -----------------------------------------------------------------

std::string node_identity::name() const {
  if (role == "chief")
    return "coordinator";
  return role + std::to_string(index);
}

std::optional<node_identity> identity_of(X509* cert) {
  if (cert == nullptr)
    return std::nullopt;
  auto* subject = X509_get_subject_name(cert);
  node_identity id;
  id.role = entry_text(subject, NID_organizationalUnitName);
  auto cn = entry_text(subject, NID_commonName);
  if (id.role == "chief")
    return cn == "coordinator" ? std::optional{id} : std::nullopt;
  if (id.role != "ps" && id.role != "worker")
    return std::nullopt;
  auto digits = cn.size() > id.role.size() && cn.compare(0, id.role.size(), id.role) == 0
                  ? cn.substr(id.role.size())
                  : std::string{};
  if (digits.empty() || digits.size() > 7
      || digits.find_first_not_of("0123456789") != std::string::npos
      || (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  id.index = static_cast<uint32_t>(std::stoul(digits));
  return id;
}

std::string subject_of(X509* cert) {
  if (cert == nullptr)
    return "(none)";
  auto* bio = BIO_new(BIO_s_mem());
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0,
                     XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB);
  char* data = nullptr;
  auto n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

bool may_dial(const std::string& dialer, const std::string& acceptor) {
  if (dialer == "chief")
    return true;
  // Workers push and pull; a ps reaches its backup (chain replication); a
  // worker joins a running job at the coordinator's gate.
  return ((dialer == "worker" || dialer == "ps") && acceptor == "ps")
         || (dialer == "worker" && acceptor == "chief");
}

tls_files tls_files_in(const std::string& dir, const node_identity& node) {
  auto base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  return {base + "ca.pem", base + node.name() + ".pem",
          base + node.name() + ".key"};
}

// -- tls_context ----------------------------------------------------------------

std::shared_ptr<tls_context> tls_context::load(const tls_files& files) {
  // OpenSSL writes to sockets with send() without MSG_NOSIGNAL: a peer that
  // closed its end would kill the process with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  ERR_clear_error();
  auto ca = read_cert(files.ca, "CA certificate");
  auto cert = read_cert(files.cert, "certificate");
  auto key = read_key(files.key);
  if (X509_check_private_key(cert.get(), key.get()) != 1)
    throw input_error(fmt::format("TLS key {} does not match the certificate "
                                  "{} ({})",
                                  files.key, files.cert, drain_errors()));
  auto id = identity_of(cert.get());
  if (!id)
    throw input_error(fmt::format("TLS certificate {}: its subject \"{}\" names "
                                  "no actorps node (expected OU=chief|ps|worker "
                                  "and CN=coordinator|psI|workerI; make "
                                  "certificates with actorps certs)",
                                  files.cert, subject_of(cert.get())));
  // Issued by the CA? A certificate of another CA, like an expired one,
  // loads with a warning: the node's peers refuse it, and both sides say so.
  std::string warning;
  {
    auto* store = X509_STORE_new();
    X509_STORE_add_cert(store, ca.get());
    auto* vctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(vctx, store, cert.get(), nullptr);
    X509_STORE_CTX_set_flags(vctx, X509_V_FLAG_NO_CHECK_TIME);
    auto ok = X509_verify_cert(vctx) == 1;
    auto err = X509_STORE_CTX_get_error(vctx);
    X509_STORE_CTX_free(vctx);
    X509_STORE_free(store);
    ERR_clear_error();
    if (!ok)
      warning = fmt::format("the certificate {} is not issued by the CA {} "
                            "({}): peers will refuse this node",
                            files.cert, files.ca,
                            X509_verify_cert_error_string(err));
  }
  std::shared_ptr<tls_context> out{new tls_context};
  out->identity_ = *id;
  out->warning_ = warning;
  auto* not_after = X509_get0_notAfter(cert.get());
  if (!warning.empty()) {
    // said enough
  } else if (X509_cmp_current_time(not_after) <= 0) {
    out->warning_ = fmt::format("the certificate {} expired on {}: peers will "
                                "refuse this node",
                                files.cert, date_of(not_after));
  } else if (X509_cmp_current_time(X509_get0_notBefore(cert.get())) >= 0) {
    out->warning_ = fmt::format("the certificate {} is not valid before {}: "
                                "peers will refuse this node",
                                files.cert,
                                date_of(X509_get0_notBefore(cert.get())));
  }
  out->describe_ = fmt::format("certificate {} ({}, valid until {}), CA {}",
                               files.cert, subject_of(cert.get()),
                               date_of(not_after), files.ca);
  auto* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr)
    throw runtime_failure("TLS: cannot create an OpenSSL context: "
                          + drain_errors());
  out->ctx_ = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // AES-128-GCM first: 11% faster than OpenSSL's default AES-256-GCM here
  // (openssl speed, 16 KB records: 2.55 against 2.28 GB/s), and the cost of
  // TLS is that of encrypting the tensors.
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                "TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:"
                               "ECDHE-ECDSA-AES256-GCM-SHA384");
  // No session resumption: connections are few and long-lived.
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  // A peer that closes without close_notify is a closed connection (BASP
  // frames its messages, so a cut one is noticed there).
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // CAF's stream writes what it can and comes back with the same buffer,
  // which may have moved (it is a std::vector).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE
                          | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate(ctx, cert.get()) != 1
      || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1)
    throw input_error(fmt::format("TLS certificate {} / key {}: OpenSSL does "
                                  "not take them: {}",
                                  files.cert, files.key, drain_errors()));
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca.get());
  SSL_CTX_add_client_CA(ctx, ca.get());
  // Both sides present a certificate and verify the other's: chain to the
  // CA, signatures, validity period.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     nullptr);
  return out;
}

tls_context::~tls_context() {
  SSL_CTX_free(ctx_);
}

std::string tls_context::describe() const {
  return describe_;
}

SSL* tls_context::new_session(int fd, bool accept) const {
  auto* ssl = SSL_new(ctx_);
  if (ssl == nullptr)
    return nullptr;
  SSL_set_fd(ssl, fd);
  if (accept)
    SSL_set_accept_state(ssl);
  else
    SSL_set_connect_state(ssl);
  return ssl;
}

std::string tls_context::issue_ticket(const node_identity& peer) {
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof(raw)) != 1)
    throw runtime_failure("TLS: no random bytes for a ticket");
  std::string ticket;
  for (auto b : raw)
    ticket += fmt::format("{:02x}", b);
  std::lock_guard<std::mutex> guard{mtx_};
  auto now = std::chrono::steady_clock::now();
  for (auto i = tickets_.begin(); i != tickets_.end();)
    i = now - i->second.at > ticket_lifetime ? tickets_.erase(i) : std::next(i);
  if (tickets_.size() >= max_tickets)
    tickets_.erase(tickets_.begin());
  tickets_[ticket] = issued{peer, now};
  return ticket;
}

std::string tls_context::redeem(const std::string& ticket,
                                const node_identity& claimed) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = tickets_.find(ticket);
  if (ticket.empty() || i == tickets_.end())
    return fmt::format("its handshake (as {}) carries no valid TLS ticket of "
                       "this node's gate",
                       claimed.name());
  auto peer = i->second.peer;
  tickets_.erase(i);
  if (peer != claimed)
    return fmt::format("the certificate of its connection names {}, its "
                       "handshake says {}",
                       peer.name(), claimed.name());
  return {};
}

// -- errors and the process's settings ------------------------------------------

std::string tls_error(SSL* ssl) {
  auto out = drain_errors();
  if (ssl != nullptr) {
    auto v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK)
      out += (out.empty() ? "" : ": ")
             + std::string{X509_verify_cert_error_string(v)};
  }
  return out.empty() ? "connection closed during the TLS handshake" : out;
}

tls_files node_tls_files(const tls_settings& settings,
                         const node_identity& me) {
  auto files = settings.dir.empty() ? tls_files{}
                                    : tls_files_in(settings.dir, me);
  for (auto [mine, given] : {std::pair{&files.ca, &settings.ca},
                             std::pair{&files.cert, &settings.cert},
                             std::pair{&files.key, &settings.key}})
    if (!given->empty())
      *mine = *given;
  for (auto [file, flag] : {std::pair{&files.ca, "--tls-ca"},
                            std::pair{&files.cert, "--tls-cert"},
                            std::pair{&files.key, "--tls-key"}})
    if (file->empty())
      throw input_error(fmt::format("TLS: {} missing (or --tls DIR)", flag));
  return files;
}

void open_node_tls(const tls_settings& settings, const node_identity& me) {
  auto who = me.role == "chief" ? std::string{"coordinator"} : me.role;
  auto index = me.role == "chief" ? -1 : static_cast<int>(me.index);
  if (settings.off) {
    log::warn(who, index, "TLS is off (tls: off): plain TCP, peers are not "
                          "authenticated and traffic is not encrypted");
    set_node_tls(nullptr);
    return;
  }
  if (!settings.given())
    throw input_error("no TLS settings: give --tls DIR (certificates made by "
                      "`actorps certs`), --tls-ca/--tls-cert/--tls-key, or "
                      "--tls off for plain TCP (or cluster.tls in the config)");
  auto files = node_tls_files(settings, me);
  auto ctx = tls_context::load(files);
  log::info(who, index, "TLS on: {}", ctx->describe());
  if (ctx->identity() != me)
    log::warn(who, index, "this node is {}, but its certificate {} names {}: "
                          "peers will refuse it",
              me.name(), files.cert, ctx->identity().name());
  if (!ctx->warning().empty())
    log::warn(who, index, "{}", ctx->warning());
  set_node_tls(std::move(ctx));
}

void set_node_tls(std::shared_ptr<tls_context> ctx) {
  std::lock_guard<std::mutex> guard{process_tls_mtx};
  process_tls = std::move(ctx);
}

std::shared_ptr<tls_context> node_tls() {
  std::lock_guard<std::mutex> guard{process_tls_mtx};
  return process_tls;
}

} // namespace actorps
