#include "cluster/net/tls_channel.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "caf/actor_system.hpp"
#include "caf/io/middleman.hpp"
#include "caf/io/network/default_multiplexer.hpp"
#include "caf/io/network/stream_impl.hpp"
#include "caf/io/scribe.hpp"
#include "caf/policy/tcp.hpp"

#include "core/log.hpp"

namespace actorps {

namespace {

using caf::io::network::native_socket;
using caf::io::network::rw_state;

/// CAF's stream policy over an established TLS session (as caf::openssl's
/// ssl_policy, without the handshake: the gate or dial did it).
class tls_policy {
public:
  explicit tls_policy(SSL* ssl) : ssl_(ssl) {
    // nop
  }

  tls_policy(tls_policy&& other) noexcept : ssl_(other.ssl_) {
    other.ssl_ = nullptr;
  }

  ~tls_policy() {
    SSL_free(ssl_);
  }

  rw_state read_some(size_t& result, native_socket, void* buf, size_t len) {
    return transfer(result, len,
                    [&](int n) { return SSL_read(ssl_, buf, n); });
  }

  rw_state write_some(size_t& result, native_socket, const void* buf,
                      size_t len) {
    return transfer(result, len,
                    [&](int n) { return SSL_write(ssl_, buf, n); });
  }

  // Decrypted bytes the multiplexer will not be woken for. (Reading ahead,
  // many records per read(), made a 1M-float push no faster: 12.8 ms.)
  bool must_read_more(native_socket, size_t threshold) {
    return static_cast<size_t>(SSL_pending(ssl_)) >= threshold;
  }

private:
  template <class F>
  rw_state transfer(size_t& result, size_t len, F f) {
    result = 0;
    if (len == 0)
      return rw_state::indeterminate;
    ERR_clear_error();
    auto n = f(static_cast<int>(std::min<size_t>(len, 1 << 30)));
    if (n > 0) {
      result = static_cast<size_t>(n);
      return rw_state::success;
    }
    switch (SSL_get_error(ssl_, n)) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE:
        return rw_state::success; // nothing now; the multiplexer polls
      default:
        ERR_clear_error();
        return rw_state::failure; // closed, or a TLS error
    }
  }

  SSL* ssl_;
};

/// CAF's plain TCP policy (caf::policy::tcp) as an object.
class tcp_policy {
public:
  rw_state read_some(size_t& result, native_socket fd, void* buf,
                     size_t len) {
    return caf::policy::tcp::read_some(result, fd, buf, len);
  }

  rw_state write_some(size_t& result, native_socket fd, const void* buf,
                      size_t len) {
    return caf::policy::tcp::write_some(result, fd, buf, len);
  }

  bool must_read_more(native_socket fd, size_t threshold) {
    return caf::policy::tcp::must_read_more(fd, threshold);
  }
};

/// Reads through `Inner` (TLS or plain TCP) and passes every byte read
/// through a basp_guard (cluster/net/basp_guard.hpp): a header that announces
/// more than the peer may send fails the read, so the connection closes
/// before CAF allocates the payload.
template <class Inner>
class guarded_policy {
public:
  guarded_policy(Inner inner, basp_limits limits, std::string label,
                 std::shared_ptr<void> hold)
    : inner_(std::move(inner)),
      guard_(limits),
      label_(std::move(label)),
      hold_(std::move(hold)) {
    // nop
  }

  guarded_policy(guarded_policy&&) noexcept = default;

  rw_state read_some(size_t& result, native_socket fd, void* buf,
                     size_t len) {
    auto st = inner_.read_some(result, fd, buf, len);
    if (st == rw_state::success && result > 0) {
      auto why = guard_.feed(static_cast<const char*>(buf), result);
      if (!why.empty()) {
        log::warn("gate", -1, "closed the connection of {}: {}", label_, why);
        return rw_state::failure;
      }
    }
    return st;
  }

  rw_state write_some(size_t& result, native_socket fd, const void* buf,
                      size_t len) {
    return inner_.write_some(result, fd, buf, len);
  }

  bool must_read_more(native_socket fd, size_t threshold) {
    return inner_.must_read_more(fd, threshold);
  }

private:
  Inner inner_;
  basp_guard guard_;
  std::string label_;
  std::shared_ptr<void> hold_;
};

/// A CAF scribe over `Policy` (as caf::openssl's scribe_impl and CAF's
/// own).
template <class Policy>
class guarded_scribe : public caf::io::scribe {
public:
  guarded_scribe(caf::io::network::default_multiplexer& mpx, native_socket fd,
                 Policy policy)
    : scribe(caf::io::network::conn_hdl_from_socket(fd)),
      stream_(mpx, fd, std::move(policy)) {
    // nop
  }

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }

  void ack_writes(bool enable) override {
    stream_.ack_writes(enable);
  }

  std::vector<char>& wr_buf() override {
    return stream_.wr_buf();
  }

  std::vector<char>& rd_buf() override {
    return stream_.rd_buf();
  }

  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }

  void flush() override {
    stream_.flush(this);
  }

  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }

  uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }

  void add_to_loop() override {
    stream_.activate(this);
  }

  void remove_from_loop() override {
    stream_.passivate();
  }

private:
  bool launched_ = false;
  caf::io::network::stream_impl<Policy> stream_;
};

} // namespace

// -- channel --------------------------------------------------------------------

channel::channel(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {
  // nop
}

channel::~channel() {
  if (ssl_ != nullptr)
    SSL_free(ssl_);
  if (fd_ >= 0)
    close(fd_);
}

channel::status channel::fail(int ret, const char* what) {
  auto e = SSL_get_error(ssl_, ret);
  transport_failure_ = false;
  if (e == SSL_ERROR_WANT_READ)
    return status::want_read;
  if (e == SSL_ERROR_WANT_WRITE)
    return status::want_write;
  if (e == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    return status::closed;
  }
  if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    transport_failure_ = true;
    error_ = ret == 0 || errno == 0 ? std::string{"connection closed"}
                                    : std::string{std::strerror(errno)};
    error_ = std::string{what} + ": " + error_;
    return ret == 0 ? status::closed : status::failed;
  }
  error_ = tls_error(ssl_);
  return status::failed;
}

channel::status channel::handshake() {
  if (ssl_ == nullptr)
    return status::done;
  ERR_clear_error();
  errno = 0;
  auto ret = SSL_do_handshake(ssl_);
  if (ret == 1)
    return status::done;
  auto s = fail(ret, "TLS handshake");
  if (s == status::closed) {
    error_ = tls_error(ssl_);
    transport_failure_ = true;
    return status::failed;
  }
  return s;
}

channel::status channel::read(char* buf, size_t n, size_t& got) {
  got = 0;
  if (ssl_ == nullptr) {
    auto r = recv(fd_, buf, n, 0);
    if (r > 0) {
      got = static_cast<size_t>(r);
      return status::done;
    }
    if (r == 0)
      return status::closed;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      return status::want_read;
    error_ = std::strerror(errno);
    return status::failed;
  }
  ERR_clear_error();
  errno = 0;
  auto r = SSL_read(ssl_, buf, static_cast<int>(n));
  if (r > 0) {
    got = static_cast<size_t>(r);
    return status::done;
  }
  return fail(r, "read");
}

channel::status channel::write(const char* buf, size_t n) {
  if (ssl_ == nullptr) {
    auto r = send(fd_, buf, n, MSG_NOSIGNAL);
    if (r == static_cast<ssize_t>(n))
      return status::done;
    error_ = r < 0 ? std::strerror(errno) : "short write";
    return status::failed;
  }
  ERR_clear_error();
  errno = 0;
  auto r = SSL_write(ssl_, buf, static_cast<int>(n));
  if (r == static_cast<int>(n))
    return status::done;
  if (r > 0) {
    error_ = "short write";
    return status::failed;
  }
  auto s = fail(r, "write");
  if (s == status::want_read || s == status::want_write)
    error_ = "could not write at once";
  else if (s == status::closed)
    error_ = "connection closed";
  return status::failed;
}

channel::status channel::write_some(const char* buf, size_t n,
                                    size_t& wrote) {
  wrote = 0;
  if (n == 0)
    return status::done;
  if (ssl_ == nullptr) {
    auto r = send(fd_, buf, n, MSG_NOSIGNAL);
    if (r >= 0) {
      wrote = static_cast<size_t>(r);
      return status::done;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      return status::want_write;
    error_ = std::strerror(errno);
    transport_failure_ = true;
    return status::failed;
  }
  ERR_clear_error();
  errno = 0;
  auto chunk = static_cast<int>(std::min<size_t>(n, size_t{1} << 30));
  auto r = SSL_write(ssl_, buf, chunk);
  if (r > 0) {
    wrote = static_cast<size_t>(r);
    return status::done;
  }
  return fail(r, "write");
}

void channel::allow_partial_writes() {
  if (ssl_ != nullptr)
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE
                         | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

std::optional<node_identity> channel::peer_identity() const {
  if (ssl_ == nullptr)
    return std::nullopt;
  auto* cert = SSL_get0_peer_certificate(ssl_);
  return identity_of(cert);
}

std::string channel::peer_subject() const {
  return ssl_ == nullptr ? std::string{"(plain TCP)"}
                         : subject_of(SSL_get0_peer_certificate(ssl_));
}

caf::intrusive_ptr<caf::io::scribe>
channel::release_to(caf::actor_system& sys, basp_limits limits,
                    const std::string& label, std::shared_ptr<void> hold) {
  auto& dm = static_cast<caf::io::network::default_multiplexer&>(
    sys.middleman().backend());
  caf::io::scribe_ptr out;
  if (ssl_ == nullptr) {
    using policy = guarded_policy<tcp_policy>;
    out = caf::make_counted<guarded_scribe<policy>>(
      dm, fd_, policy{tcp_policy{}, limits, label, std::move(hold)});
  } else {
    using policy = guarded_policy<tls_policy>;
    out = caf::make_counted<guarded_scribe<policy>>(
      dm, fd_, policy{tls_policy{ssl_}, limits, label, std::move(hold)});
  }
  fd_ = -1;
  ssl_ = nullptr;
  return out;
}

// -- refusals -------------------------------------------------------------------

std::string refusal_message(std::string preamble, const std::string& reason) {
  auto text = reason.substr(0, max_reason_size);
  preamble[preamble_status_at] = 1;
  preamble += static_cast<char>(text.size() & 0xff);
  preamble += static_cast<char>(text.size() >> 8);
  return preamble + text;
}

size_t missing_bytes(const char* bytes, size_t got, size_t extra) {
  constexpr size_t p = 16; // preamble_size (cluster/net/gate.hpp)
  if (got < p)
    return p - got;
  if (bytes[preamble_status_at] == 0)
    return p + extra > got ? p + extra - got : 0;
  if (got < p + 2)
    return p + 2 - got;
  size_t len = static_cast<unsigned char>(bytes[p])
               | (size_t{static_cast<unsigned char>(bytes[p + 1])} << 8);
  auto total = p + 2 + std::min(len, max_reason_size);
  return total > got ? total - got : 0;
}

bool parse_refusal(const char* bytes, size_t n, std::string& reason) {
  if (n < 2)
    return false;
  size_t len = static_cast<unsigned char>(bytes[0])
               | (size_t{static_cast<unsigned char>(bytes[1])} << 8);
  len = std::min(len, max_reason_size);
  if (n < 2 + len)
    return false;
  reason.assign(bytes + 2, len);
  for (auto& c : reason)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '?'; // a peer's text goes into our logs
  return true;
}

} // namespace actorps
