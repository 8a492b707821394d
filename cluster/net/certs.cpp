#include "cluster/net/certs.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

struct key_deleter {
  void operator()(EVP_PKEY* x) const {
    EVP_PKEY_free(x);
  }
};
struct cert_deleter {
  void operator()(X509* x) const {
    X509_free(x);
  }
};
using key_ptr = std::unique_ptr<EVP_PKEY, key_deleter>;
using cert_ptr = std::unique_ptr<X509, cert_deleter>;

[[noreturn]] void openssl_failed(const char* what) {
  std::string reasons;
  while (auto e = ERR_get_error())
    reasons += (reasons.empty() ? "" : "; ")
               + std::string{ERR_error_string(e, nullptr)};
  throw runtime_failure(fmt::format("certificates: {} failed: {}", what,
                                    reasons));
}

key_ptr new_key() {
  key_ptr key{EVP_EC_gen("P-256")};
  if (!key)
    openssl_failed("making an EC key");
  return key;
}

void add_name(X509_NAME* name, const char* field, const std::string& value) {
  if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(
                                   value.c_str()),
                                 -1, -1, 0)
      != 1)
    openssl_failed("setting the subject");
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  auto* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr || X509_add_ext(cert, ext, -1) != 1)
    openssl_failed("adding an extension");
  X509_EXTENSION_free(ext);
}

/// A certificate for `key` with `subject` fields, signed by `ca_key` as
/// `ca` (null: self-signed).
cert_ptr make_cert(EVP_PKEY* key,
                   const std::vector<std::pair<const char*, std::string>>& subject,
                   X509* ca, EVP_PKEY* ca_key, int days, bool is_ca) {
  cert_ptr cert{X509_new()};
  X509_set_version(cert.get(), 2); // v3
  auto* serial = BN_new();
  BN_rand(serial, 64, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY);
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  // An hour back: clocks of the cluster's machines may differ a little.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), long{days} * 86400);
  X509_set_pubkey(cert.get(), key);
  auto* name = X509_get_subject_name(cert.get());
  for (auto& [field, value] : subject)
    add_name(name, field, value);
  auto* issuer = ca != nullptr ? ca : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer));
  add_ext(cert.get(), issuer, NID_subject_key_identifier, "hash");
  if (is_ca) {
    add_ext(cert.get(), issuer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_ext(cert.get(), issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_ext(cert.get(), issuer, NID_authority_key_identifier, "keyid");
    add_ext(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(cert.get(), issuer, NID_key_usage,
            "critical,digitalSignature,keyAgreement");
    add_ext(cert.get(), issuer, NID_ext_key_usage, "serverAuth,clientAuth");
    // The node's name as a DNS name too, so that an HTTPS client (a
    // Prometheus scraping --metrics-tls, whose Go TLS ignores the CN) can
    // check the certificate against it (tls_config server_name: ps0).
    for (auto& [field, value] : subject)
      if (std::string_view{field} == "CN")
        add_ext(cert.get(), issuer, NID_subject_alt_name,
                ("DNS:" + value).c_str());
  }
  if (X509_sign(cert.get(), ca_key != nullptr ? ca_key : key, EVP_sha256()) <= 0)
    openssl_failed("signing a certificate");
  return cert;
}

/// Writes PEM text made by `write` to `path` with `mode`.
template <class F>
void write_pem(const std::string& path, int mode, F write) {
  ::unlink(path.c_str());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  auto* f = fd >= 0 ? fdopen(fd, "w") : nullptr;
  if (f == nullptr)
    throw input_error(fmt::format("certificates: cannot write {}: {}", path,
                                  std::strerror(errno)));
  auto ok = write(f) == 1;
  ok = std::fclose(f) == 0 && ok;
  if (!ok)
    throw input_error(fmt::format("certificates: cannot write {}", path));
}

/// Writes NAME.key (0600) and NAME.pem into folder `base` (with '/').
void save_pair(const std::string& base, const std::string& name, X509* cert,
               EVP_PKEY* key, std::vector<std::string>& written) {
  write_pem(base + name + ".key", 0600, [&](FILE* f) {
    return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
  write_pem(base + name + ".pem", 0644,
            [&](FILE* f) { return PEM_write_X509(f, cert); });
  written.push_back(base + name + ".pem");
  written.push_back(base + name + ".key");
}

/// A new key and certificate for node `n`, signed by the CA, saved.
void sign_node(const std::string& base, const node_identity& n, X509* ca,
               EVP_PKEY* ca_key, int days, std::vector<std::string>& written) {
  auto key = new_key();
  auto cert = make_cert(key.get(),
                        {{"O", "actorps"}, {"OU", n.role}, {"CN", n.name()}},
                        ca, ca_key, days, false);
  save_pair(base, n.name(), cert.get(), key.get(), written);
}

} // namespace

std::vector<node_identity> nodes_of(uint32_t ps, uint32_t workers) {
  std::vector<node_identity> out{{"chief", 0}};
  for (uint32_t i = 0; i < ps; ++i)
    out.push_back({"ps", i});
  for (uint32_t i = 0; i < workers; ++i)
    out.push_back({"worker", i});
  return out;
}

std::vector<node_identity> nodes_of(const cluster_spec& spec) {
  return nodes_of(static_cast<uint32_t>(spec.ps.size()),
                  static_cast<uint32_t>(spec.worker.size()));
}

std::vector<std::string> make_cluster_certs(const std::string& dir,
                                            const std::vector<node_identity>& nodes,
                                            int days) {
  if (days < 1)
    throw input_error(fmt::format("certificates: --days {}: must be >= 1", days));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw input_error(fmt::format("certificates: cannot create {}: {}", dir,
                                  ec.message()));
  auto base = dir.back() == '/' ? dir : dir + "/";
  if (std::filesystem::exists(base + "ca.pem"))
    throw input_error(fmt::format("certificates: {}ca.pem exists (the CA of "
                                  "another cluster?); remove it or choose "
                                  "another folder",
                                  base));
  ERR_clear_error();
  std::vector<std::string> written;
  auto save = [&](const std::string& name, X509* cert, EVP_PKEY* key) {
    save_pair(base, name, cert, key, written);
  };
  // A name of its own per CA, so that two clusters' CAs never look alike.
  unsigned char raw[6];
  RAND_bytes(raw, sizeof(raw));
  std::string id;
  for (auto b : raw)
    id += fmt::format("{:02x}", b);
  auto ca_key = new_key();
  auto ca = make_cert(ca_key.get(),
                      {{"O", "actorps"}, {"CN", "actorps cluster CA " + id}},
                      nullptr, nullptr, days, true);
  save("ca", ca.get(), ca_key.get());
  for (auto& n : nodes)
    sign_node(base, n, ca.get(), ca_key.get(), days, written);
  return written;
}

std::vector<std::string> add_node_certs(const std::string& ca_dir,
                                        const std::string& out_dir,
                                        const std::vector<node_identity>& nodes,
                                        int days) {
  if (days < 1)
    throw input_error(fmt::format("certificates: --days {}: must be >= 1", days));
  auto ca_base = ca_dir.back() == '/' ? ca_dir : ca_dir + "/";
  auto read = [&](const char* file, auto reader) {
    auto path = ca_base + file;
    auto* f = std::fopen(path.c_str(), "r");
    if (f == nullptr)
      throw input_error(fmt::format("certificates: cannot read {}: {}", path,
                                    std::strerror(errno)));
    auto* obj = reader(f);
    std::fclose(f);
    if (obj == nullptr)
      throw input_error(fmt::format("certificates: {} is not a PEM {}", path,
                                    file));
    return obj;
  };
  ERR_clear_error();
  cert_ptr ca{read("ca.pem", [](FILE* f) {
    return PEM_read_X509(f, nullptr, nullptr, nullptr);
  })};
  key_ptr ca_key{read("ca.key", [](FILE* f) {
    return PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  })};
  if (X509_check_private_key(ca.get(), ca_key.get()) != 1)
    throw input_error(fmt::format("certificates: {}ca.key does not belong to "
                                  "{}ca.pem",
                                  ca_base, ca_base));
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec)
    throw input_error(fmt::format("certificates: cannot create {}: {}",
                                  out_dir, ec.message()));
  auto base = out_dir.back() == '/' ? out_dir : out_dir + "/";
  std::vector<std::string> written;
  for (auto& n : nodes)
    sign_node(base, n, ca.get(), ca_key.get(), days, written);
  return written;
}

} // namespace actorps
