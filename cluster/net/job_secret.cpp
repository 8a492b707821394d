#include "cluster/net/job_secret.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string_view>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "cluster/net/tls_channel.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

std::mutex process_secret_mtx;
std::shared_ptr<const job_secret> process_secret;

/// The labels that keep a dialer's proof from serving as a gate's and back.
constexpr std::string_view dialer_label = "actorps job secret 1 dialer";
constexpr std::string_view gate_label = "actorps job secret 1 gate";

} // namespace

// -- job_secret -------------------------------------------------------------------

std::shared_ptr<const job_secret> job_secret::load(const std::string& file) {
  auto bad = [&](const std::string& what) {
    return input_error(fmt::format("secret file {}: {}", file, what));
  };
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw bad(std::strerror(errno));
  struct stat sb {};
  if (fstat(fd, &sb) != 0) {
    auto e = errno;
    ::close(fd);
    throw bad(std::strerror(e));
  }
  std::string why;
  if (!S_ISREG(sb.st_mode))
    why = "not a regular file";
  else if (sb.st_uid != geteuid())
    why = fmt::format("owned by uid {}, not by this process's user (uid {})",
                      sb.st_uid, geteuid());
  else if ((sb.st_mode & 077) != 0)
    why = fmt::format("readable or writable by group or others (mode {:04o}): "
                      "a secret must be its owner's alone (chmod 600 {})",
                      sb.st_mode & 07777, file);
  else if (static_cast<size_t>(sb.st_size) < min_bytes)
    why = fmt::format("holds {} bytes, fewer than {} (head -c 32 /dev/urandom "
                      "makes a good one)",
                      sb.st_size, min_bytes);
  else if (static_cast<size_t>(sb.st_size) > max_bytes)
    why = fmt::format("holds {} bytes, more than {} (not a secret file?)",
                      sb.st_size, max_bytes);
  if (!why.empty()) {
    ::close(fd);
    throw bad(why);
  }
  std::string bytes(static_cast<size_t>(sb.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    auto n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      auto e = n < 0 ? std::strerror(errno) : "it shrank while being read";
      ::close(fd);
      OPENSSL_cleanse(bytes.data(), bytes.size());
      throw bad(e);
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return of_bytes(std::move(bytes), file);
}

std::shared_ptr<const job_secret> job_secret::of_bytes(std::string bytes,
                                                       std::string origin) {
  if (bytes.size() < min_bytes)
    throw input_error(fmt::format("secret {}: {} bytes, fewer than {}", origin,
                                  bytes.size(), min_bytes));
  return std::shared_ptr<const job_secret>(
    new job_secret(std::move(bytes), std::move(origin)));
}

void job_secret::write_new(const std::string& file) {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof(raw)) != 1)
    throw runtime_failure(
      fmt::format("{}: OpenSSL gave no random bytes for a secret", file));
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                  0600);
  if (fd < 0)
    throw runtime_failure(fmt::format("cannot create the secret file {}: {}",
                                      file, std::strerror(errno)));
  // The mode is 0600 whatever the umask (open applies it).
  auto n = ::write(fd, raw, sizeof(raw));
  auto e = errno;
  OPENSSL_cleanse(raw, sizeof(raw));
  if (fchmod(fd, 0600) != 0 || n != static_cast<ssize_t>(sizeof(raw))) {
    ::close(fd);
    ::unlink(file.c_str());
    throw runtime_failure(fmt::format("cannot write the secret file {}: {}",
                                      file, std::strerror(e)));
  }
  ::close(fd);
}

job_secret::~job_secret() {
  OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

secret_proof job_secret::prove(secret_side side,
                               const secret_transcript& t) const {
  auto label = side == secret_side::dialer ? dialer_label : gate_label;
  std::string msg{label};
  msg.append(t.dialer_preamble.data(), t.dialer_preamble.size());
  msg.append(t.gate_preamble.data(), t.gate_preamble.size());
  msg.append(reinterpret_cast<const char*>(t.gate_nonce.data()),
             t.gate_nonce.size());
  msg.append(reinterpret_cast<const char*>(t.dialer_nonce.data()),
             t.dialer_nonce.size());
  secret_proof out{};
  unsigned len = 0;
  if (HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(),
           out.data(), &len)
        == nullptr
      || len != out.size())
    throw runtime_failure("job secret: HMAC-SHA256 failed in OpenSSL");
  return out;
}

bool job_secret::verify(secret_side side, const secret_transcript& t,
                        const unsigned char* proof) const {
  auto mine = prove(side, t);
  return CRYPTO_memcmp(mine.data(), proof, mine.size()) == 0;
}

// -- the exchange's pieces --------------------------------------------------------

secret_nonce fresh_nonce() {
  secret_nonce out;
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1)
    throw runtime_failure("job secret: OpenSSL gave no random bytes for a "
                          "nonce");
  return out;
}

std::string secret_mismatch(bool gate_has, bool dialer_has) {
  if (gate_has && !dialer_has)
    return "job secret wrong or missing: this node requires the job's "
           "secret and the dialer has none (--secret-file)";
  if (!gate_has && dialer_has)
    return "job secret wrong or missing: the dialer holds a job secret and "
           "this node has none (--secret-file)";
  return {};
}

std::string wrong_dialer_proof() {
  return "job secret wrong or missing: the dialer's proof does not match "
         "this node's secret";
}

std::string wrong_gate_proof() {
  return "job secret wrong or missing: the node's proof does not match this "
         "node's secret (it is not a node of this job)";
}

std::string dialer_answer(const job_secret& secret, secret_transcript& t) {
  t.dialer_nonce = fresh_nonce();
  auto proof = secret.prove(secret_side::dialer, t);
  std::string out(reinterpret_cast<const char*>(t.dialer_nonce.data()),
                  t.dialer_nonce.size());
  out.append(reinterpret_cast<const char*>(proof.data()), proof.size());
  return out;
}

std::string gate_verdict(const job_secret& secret, secret_transcript& t,
                         const char* answer, const std::string& prefix,
                         std::string& why) {
  std::memcpy(t.dialer_nonce.data(), answer, t.dialer_nonce.size());
  auto* proof = reinterpret_cast<const unsigned char*>(answer)
                + t.dialer_nonce.size();
  std::string out;
  if (secret.verify(secret_side::dialer, t, proof)) {
    why.clear();
    auto mine = secret.prove(secret_side::gate, t);
    out += '\0';
    out.append(reinterpret_cast<const char*>(mine.data()), mine.size());
    return out;
  }
  why = wrong_dialer_proof();
  auto text = (prefix + why).substr(0, max_reason_size);
  out += '\1';
  out += static_cast<char>(text.size() & 0xff);
  out += static_cast<char>(text.size() >> 8);
  return out + text;
}

size_t verdict_missing(const char* bytes, size_t got) {
  if (got == 0)
    return 1;
  if (bytes[0] == 0)
    return secret_verdict_size > got ? secret_verdict_size - got : 0;
  if (got < 3)
    return 3 - got;
  size_t len = static_cast<unsigned char>(bytes[1])
               | (size_t{static_cast<unsigned char>(bytes[2])} << 8);
  auto total = 3 + std::min(len, max_reason_size);
  return total > got ? total - got : 0;
}

std::string check_verdict(const job_secret& secret,
                          const secret_transcript& t, const char* bytes,
                          size_t n) {
  if (n == secret_verdict_size && bytes[0] == 0)
    return secret.verify(secret_side::gate, t,
                         reinterpret_cast<const unsigned char*>(bytes + 1))
             ? std::string{}
             : wrong_gate_proof();
  std::string reason;
  if (n > 0 && bytes[0] == 1 && parse_refusal(bytes + 1, n - 1, reason))
    return reason;
  return "job secret wrong or missing: a malformed verdict on this node's "
         "proof";
}

// -- the process's secret ---------------------------------------------------------

std::optional<std::string> secret_file_of(const std::string& file,
                                          const tls_settings& tls) {
  if (!file.empty())
    return file;
  if (tls.off || tls.dir.empty())
    return std::nullopt;
  auto in_dir = tls.dir + "/secret";
  struct stat sb {};
  if (stat(in_dir.c_str(), &sb) != 0 && errno == ENOENT)
    return std::nullopt;
  return in_dir; // there: load() says what is wrong with it, if anything
}

void open_node_secret(const std::string& file, const tls_settings& tls,
                      const std::string& who, int index) {
  auto path = secret_file_of(file, tls);
  if (!path) {
    set_node_secret(nullptr);
    return;
  }
  auto secret = job_secret::load(*path);
  log::info(who, index, "job secret: {} (every peer proves it holds the same "
                        "one)",
            *path);
  set_node_secret(std::move(secret));
}

void set_node_secret(std::shared_ptr<const job_secret> secret) {
  std::lock_guard<std::mutex> guard{process_secret_mtx};
  process_secret = std::move(secret);
}

std::shared_ptr<const job_secret> node_secret() {
  std::lock_guard<std::mutex> guard{process_secret_mtx};
  return process_secret;
}

} // namespace actorps
