#include "cluster/gate.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/io/basp_broker.hpp"
#include "caf/io/middleman.hpp"
#include "caf/io/network/multiplexer.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "cluster/handshake.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr char magic[8] = {'A', 'C', 'T', 'O', 'R', 'P', 'S', '\0'};
/// How long an accepted connection may take to send its preamble.
constexpr auto preamble_timeout = std::chrono::seconds(2);
/// Connections waiting for their preamble at most; more are closed at once.
constexpr size_t max_pending = 64;
/// Rejected connections logged one by one; after that, every 100th.
constexpr uint64_t rejections_logged = 10;

std::array<char, preamble_size> make_preamble() {
  std::array<char, preamble_size> p{};
  std::memcpy(p.data(), magic, sizeof(magic));
  uint32_t v = protocol_version;
  for (int i = 0; i < 4; ++i)
    p[8 + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return p;
}

uint32_t version_of(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t{static_cast<unsigned char>(p[8 + i])} << (8 * i);
  return v;
}

std::string hex_prefix(const char* p, size_t n) {
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(n, 8); ++i)
    out += fmt::format("{:02x}", static_cast<unsigned char>(p[i]));
  return out;
}

void set_nonblocking(int fd, bool on) {
  auto flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string peer_name(const sockaddr_storage& sa) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&sa), sizeof(sa), host,
                  sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV)
      != 0)
    return "?";
  return fmt::format("{}:{}", host, serv);
}

/// getaddrinfo for `hp`; the caller frees the list.
addrinfo* resolve(const host_port& hp, bool passive, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  auto port = std::to_string(hp.port);
  if (auto rc = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res);
      rc != 0) {
    error = fmt::format("cannot resolve \"{}\": {}", hp.host,
                        gai_strerror(rc));
    return nullptr;
  }
  return res;
}

caf::actor basp_broker(caf::actor_system& sys) {
  return sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
}

} // namespace

preamble_check check_preamble(const char* bytes, size_t n) {
  n = std::min(n, preamble_size);
  preamble_check out;
  out.first_bytes = hex_prefix(bytes, n);
  auto m = std::min(n, sizeof(magic));
  if (std::memcmp(bytes, magic, m) != 0)
    out.result = preamble_check::verdict::not_actorps;
  else if (n < preamble_size)
    out.result = preamble_check::verdict::incomplete;
  else if (out.version = version_of(bytes); out.version != protocol_version)
    out.result = preamble_check::verdict::other_version;
  else
    out.result = preamble_check::verdict::ok;
  return out;
}

// -- gate -----------------------------------------------------------------------

gate::gate(caf::actor_system& sys, const host_port& where,
           caf::strong_actor_ptr whom, std::set<std::string> sigs,
           std::string label)
  : sys_(sys),
    whom_(std::move(whom)),
    sigs_(std::move(sigs)),
    label_(std::move(label)) {
  std::string error;
  auto* res = resolve(where, true, error);
  if (res == nullptr)
    throw runtime_failure(fmt::format("{}: cannot listen on {}: {}", label_,
                                      to_string(where), error));
  int last_errno = 0;
  for (auto* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      listen_fd_ = fd;
      break;
    }
    last_errno = errno;
    close(fd);
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0)
    throw runtime_failure(fmt::format("{}: cannot listen on {}: {}", label_,
                                      to_string(where),
                                      std::strerror(last_errno)));
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.ss_family == AF_INET6
                  ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                  : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
  set_nonblocking(listen_fd_, true);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { run(); });
}

gate::~gate() {
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // The thread polls wake_fd_; a failed write cannot happen for an eventfd
    // below its maximum, but never leave the thread running.
  }
  if (thread_.joinable())
    thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

void gate::run() {
  struct pending {
    int fd;
    clock_type::time_point deadline;
    std::array<char, preamble_size> buf;
    size_t got;
    std::string peer;
  };
  std::vector<pending> waiting;
  auto basp = basp_broker(sys_);
  auto answer = make_preamble();
  auto reject = [&](pending& p, const std::string& why) {
    auto n = ++rejected_;
    if (n <= rejections_logged || n % 100 == 0)
      log::warn("gate", -1, "{}: closed a connection from {}: {}{}", label_,
                p.peer, why,
                n == rejections_logged ? " (further ones: every 100th)" : "");
    close(p.fd);
    p.fd = -1;
  };
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& p : waiting)
      fds.push_back({p.fd, POLLIN, 0});
    int timeout_ms = -1;
    auto now = clock_type::now();
    for (auto& p : waiting) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    p.deadline - now).count();
      timeout_ms = timeout_ms < 0 ? std::max<int>(0, left)
                                  : std::min<int>(timeout_ms, std::max<int>(0, left));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      log::warn("gate", -1, "{}: poll failed: {}", label_,
                std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0)
      break;
    now = clock_type::now();
    for (size_t i = 0; i < waiting.size(); ++i) {
      auto& p = waiting[i];
      if (fds[i + 2].revents != 0) {
        auto n = recv(p.fd, p.buf.data() + p.got, preamble_size - p.got, 0);
        if (n == 0) {
          reject(p, p.got == 0 ? "closed before its preamble"
                               : "closed within its preamble");
          continue;
        }
        if (n < 0) {
          if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            reject(p, std::strerror(errno));
          continue;
        }
        p.got += static_cast<size_t>(n);
        auto check = check_preamble(p.buf.data(), p.got);
        if (check.result == preamble_check::verdict::not_actorps) {
          reject(p, fmt::format("not an actorps peer (first bytes {})",
                                check.first_bytes));
          continue;
        }
        if (check.result == preamble_check::verdict::incomplete)
          continue;
        // Answer with this node's preamble in every case: a peer of another
        // version learns which version this node speaks.
        auto sent = send(p.fd, answer.data(), answer.size(), MSG_NOSIGNAL);
        if (check.result == preamble_check::verdict::other_version) {
          reject(p, fmt::format("protocol version {}, this node speaks {}",
                                check.version, protocol_version));
          continue;
        }
        if (sent != static_cast<ssize_t>(answer.size())) {
          reject(p, "could not answer its preamble");
          continue;
        }
        set_nodelay(p.fd);
        auto scribe = sys_.middleman().backend().new_scribe(p.fd);
        caf::anon_send(basp, caf::publish_atom::value, std::move(scribe), port_,
                       whom_, sigs_);
        log::debug("gate", -1, "{}: admitted {}", label_, p.peer);
        p.fd = -1; // CAF owns it now
      } else if (now >= p.deadline) {
        reject(p, fmt::format("no preamble within {} s",
                              preamble_timeout.count()));
      }
    }
    waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                                 [](const pending& p) { return p.fd < 0; }),
                  waiting.end());
    if (fds[1].revents != 0) {
      for (;;) {
        sockaddr_storage sa{};
        socklen_t len = sizeof(sa);
        int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
          break;
        pending p{fd, clock_type::now() + preamble_timeout, {}, 0,
                  peer_name(sa)};
        if (waiting.size() >= max_pending) {
          reject(p, "too many connections waiting for their preamble");
          continue;
        }
        waiting.push_back(std::move(p));
      }
    }
  }
  for (auto& p : waiting)
    close(p.fd);
}

// -- dial -----------------------------------------------------------------------

namespace {

/// Waits until `fd` is ready for `events` or `deadline` passes.
bool wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - clock_type::now()).count();
    if (left <= 0)
      return false;
    pollfd p{fd, events, 0};
    auto rc = poll(&p, 1, static_cast<int>(left));
    if (rc > 0)
      return true;
    if (rc < 0 && errno != EINTR)
      return false;
  }
}

/// TCP connect within `deadline`; returns the socket or -1 with `out` set.
int tcp_connect(const host_port& peer, clock_type::time_point deadline,
                dial_result& out) {
  std::string error;
  auto* res = resolve(peer, false, error);
  if (res == nullptr) {
    out.error = error;
    out.retryable = true; // name service may come back
    return -1;
  }
  int result = -1;
  out.error = "no address";
  for (auto* ai = res; ai != nullptr && result < 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0)
      continue;
    set_nonblocking(fd, true);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      result = fd;
      break;
    }
    if (errno == EINPROGRESS) {
      if (!wait_for(fd, POLLOUT, deadline)) {
        out.error = "no answer (connect timed out)";
        close(fd);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) {
        result = fd;
        break;
      }
      errno = err;
    }
    out.error = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(res);
  out.retryable = result < 0;
  return result;
}

} // namespace

dial_result dial(caf::actor_system& sys, const host_port& peer,
                 std::chrono::milliseconds timeout) {
  dial_result out;
  auto deadline = clock_type::now() + timeout;
  int fd = tcp_connect(peer, deadline, out);
  if (fd < 0)
    return out;
  auto fail = [&](std::string why, bool retryable) {
    close(fd);
    out.error = std::move(why);
    out.retryable = retryable;
    return out;
  };
  auto mine = make_preamble();
  if (!wait_for(fd, POLLOUT, deadline)
      || send(fd, mine.data(), mine.size(), MSG_NOSIGNAL)
           != static_cast<ssize_t>(mine.size()))
    return fail("could not send the preamble", true);
  std::array<char, preamble_size> theirs{};
  size_t got = 0;
  while (got < preamble_size) {
    if (!wait_for(fd, POLLIN, deadline))
      return fail("no preamble in answer (not an actorps node?)", true);
    auto n = recv(fd, theirs.data() + got, preamble_size - got, 0);
    if (n == 0)
      return fail("closed the connection during the preamble (not an actorps "
                  "node?)",
                  false);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      return fail(std::strerror(errno), true);
    }
    got += static_cast<size_t>(n);
  }
  auto check = check_preamble(theirs.data(), got);
  if (check.result == preamble_check::verdict::not_actorps)
    return fail(fmt::format("not an actorps node (answered {})",
                            check.first_bytes),
                false);
  if (check.result != preamble_check::verdict::ok)
    return fail(fmt::format("protocol version: {} here, {} at the peer",
                            protocol_version, check.version),
                false);
  set_nodelay(fd);
  auto scribe = sys.middleman().backend().new_scribe(fd);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - clock_type::now());
  if (left.count() < 1)
    left = std::chrono::milliseconds(1);
  caf::scoped_actor self{sys};
  self
    ->request(basp_broker(sys), left, caf::connect_atom::value,
              std::move(scribe), peer.port)
    .receive(
      [&](caf::node_id&, caf::strong_actor_ptr& ptr,
          std::set<std::string>&) {
        if (ptr == nullptr)
          out.error = "no actor published at that port";
        else
          out.actor = std::move(ptr);
      },
      [&](caf::error& err) {
        out.error = "CAF handshake failed: " + sys.render(err);
        out.retryable = true;
      });
  return out;
}

} // namespace actorps
