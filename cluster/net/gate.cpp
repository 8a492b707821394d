#include "cluster/net/gate.hpp"

#include <algorithm>
#include <map>
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

#include "cluster/net/gate_io.hpp"
#include "cluster/net/handshake.hpp"
#include "cluster/net/tls_channel.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

using namespace detail;

namespace {

using std::chrono::steady_clock;

constexpr char magic[8] = {'A', 'C', 'T', 'O', 'R', 'P', 'S', '\0'};
/// How long an accepted connection may take to send its preamble.
constexpr auto preamble_timeout = std::chrono::seconds(2);
/// Connections waiting for their preamble at most. When that many wait, a
/// new one takes the place of the oldest that has sent nothing yet (a
/// flood of silent connections cannot keep a node that talks out); if all
/// of them have sent something, the new one is closed.
constexpr size_t max_pending = 64;
/// BASP connections one certificate identity may hold open to this node at
/// once: a node opens one (a reconnect may overlap its predecessor, CAF
/// may add one for a route), far fewer than this.
constexpr int max_basp_per_peer = 8;
/// Rejected connections of one cause logged one by one; after that, the
/// counts per cause in one line at most every summary_interval.
constexpr uint64_t rejections_logged = 10;
constexpr auto summary_interval = std::chrono::seconds(10);

/// The cause of a rejection for counting: its text up to the first ':' or
/// " (" (the details differ from one connection to the next).
std::string cause_of(const std::string& why) {
  auto end = std::min(why.find(':'), why.find(" ("));
  return why.substr(0, end);
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

} // namespace

namespace detail {

std::array<char, preamble_size> make_preamble() {
  std::array<char, preamble_size> p{};
  std::memcpy(p.data(), magic, sizeof(magic));
  uint32_t v = protocol_version;
  for (int i = 0; i < 4; ++i)
    p[8 + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return p;
}

void set_nonblocking(int fd, bool on) {
  auto flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
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

} // namespace detail

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
           std::string label, std::shared_ptr<tls_context> tls,
           data_handler on_data, limits_function limits,
           std::shared_ptr<const job_secret> secret)
  : sys_(sys),
    tls_(std::move(tls)),
    secret_(std::move(secret)),
    whom_(std::move(whom)),
    on_data_(std::move(on_data)),
    limits_(std::move(limits)),
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
  if (wake_fd_ < 0) {
    // Without it ~gate could not stop the thread.
    auto why = std::strerror(errno);
    close(listen_fd_);
    throw runtime_failure(fmt::format("{}: cannot listen on {}: eventfd: {}",
                                      label_, to_string(where), why));
  }
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    close(listen_fd_);
    close(wake_fd_);
    throw;
  }
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
  // One connection from accept() until CAF owns it (or it is closed).
  struct pending {
    std::unique_ptr<channel> ch;
    steady_clock::time_point deadline;
    bool tls_done = false;
    short events = POLLIN;
    std::array<char, preamble_size + 2 + max_reason_size> buf{};
    size_t got = 0;
    std::string peer; ///< address, and the certificate's node after TLS
    std::optional<node_identity> who;
    /// Whether the peer has sent anything (or closed): a silent one may be
    /// evicted when the gate is full.
    bool heard = false;
    /// With a job secret, once the preamble is answered: what both ends
    /// prove over, and the dialer's nonce and proof as they arrive.
    std::optional<secret_transcript> transcript;
    std::array<char, secret_nonce_size + secret_proof_size> proof{};
    size_t proof_got = 0;
    /// Held while the connection counts against its identity's BASP cap.
    std::shared_ptr<void> counted;
  };
  std::vector<pending> waiting;
  auto basp = basp_broker(sys_);
  auto answer = make_preamble();
  auto me = tls_ ? tls_->identity().name() : label_;
  // Rejections by cause: all of them, and those not logged one by one
  // since the last summary line.
  std::map<std::string, uint64_t> by_cause;
  std::map<std::string, uint64_t> unlogged;
  auto last_summary = steady_clock::now();
  auto reject = [&](pending& p, const std::string& why) {
    ++rejected_;
    auto cause = cause_of(why);
    auto n = ++by_cause[cause];
    if (n <= rejections_logged)
      log::warn("gate", -1, "{}: closed a connection from {}: {}{}", label_,
                p.peer, why,
                n == rejections_logged
                  ? " (further ones of this cause: counted, summarised "
                    "every 10 s)"
                  : "");
    else
      ++unlogged[cause];
    p.ch.reset();
  };
  auto summarise = [&](steady_clock::time_point now) {
    if (unlogged.empty() || now - last_summary < summary_interval)
      return;
    std::string text;
    for (auto& [cause, n] : unlogged)
      text += fmt::format("{}{} {} ({} in all)", text.empty() ? "" : ", ", n,
                          cause, by_cause[cause]);
    log::warn("gate", -1, "{}: closed since the last summary: {}", label_,
              text);
    unlogged.clear();
    last_summary = now;
  };
  // Tells the peer why (inside TLS if any), then closes.
  auto refuse = [&](pending& p, const std::string& why) {
    auto msg = refusal_message(std::string(answer.begin(), answer.end()),
                               fmt::format("{} refuses this connection: {}",
                                           me, why));
    p.ch->write(msg.data(), msg.size());
    reject(p, why);
  };
  // Hands `p` to its data handler or to CAF's BASP.
  auto admit = [&](pending& p) {
    set_nodelay(p.ch->fd());
    if (p.buf[preamble_kind_at] == channel_data) {
      log::debug("gate", -1, "{}: data channel from {}", label_, p.peer);
      on_data_(std::move(p.ch), p.peer);
      return;
    }
    auto limits = limits_ ? limits_(p.who) : basp_limits{};
    auto scribe = p.ch->release_to(sys_, limits,
                                   fmt::format("{} ({})", p.peer, label_),
                                   std::move(p.counted));
    caf::anon_send(basp, caf::publish_atom::value, std::move(scribe), port_,
                   whom_, sigs_);
    log::debug("gate", -1, "{}: admitted {}", label_, p.peer);
    p.ch.reset();
  };
  // Reads the dialer's nonce and proof of the job's secret, and answers
  // with this gate's proof (then admits it) or why not (then closes).
  auto check_proof = [&](pending& p) {
    while (p.proof_got < p.proof.size()) {
      size_t n = 0;
      auto s = p.ch->read(p.proof.data() + p.proof_got,
                          p.proof.size() - p.proof_got, n);
      if (s == channel::status::want_read || s == channel::status::want_write) {
        p.events = s == channel::status::want_read ? POLLIN : POLLOUT;
        return;
      }
      if (s == channel::status::closed)
        return reject(p, "job secret wrong or missing: closed before "
                         "proving it");
      if (s == channel::status::failed)
        return reject(p, p.ch->error());
      p.proof_got += n;
    }
    std::string why;
    auto verdict = gate_verdict(*secret_, *p.transcript, p.proof.data(),
                                fmt::format("{} refuses this connection: ", me),
                                why);
    auto s = p.ch->write(verdict.data(), verdict.size());
    if (why.empty() && s != channel::status::done)
      why = "could not answer its proof: " + p.ch->error();
    if (!why.empty())
      return reject(p, why);
    admit(p);
  };
  // Moves `p` on as far as its socket allows.
  auto advance = [&](pending& p) {
    if (!p.tls_done && p.ch->tls()) {
      // A plain actorps peer: tell it in plain text, it would not see TLS.
      char first[8];
      auto n = recv(p.ch->fd(), first, sizeof(first), MSG_PEEK);
      if (n > 0 && std::memcmp(first, magic, std::min<size_t>(n, 7)) == 0) {
        auto msg = refusal_message(
          std::string(answer.begin(), answer.end()),
          fmt::format("{} requires TLS; this node runs with tls off", me));
        send(p.ch->fd(), msg.data(), msg.size(), MSG_NOSIGNAL);
        return reject(p, "a plain-TCP actorps peer (it runs with tls off; "
                         "this node requires TLS)");
      }
      auto s = p.ch->handshake();
      if (s == channel::status::want_read || s == channel::status::want_write) {
        p.events = s == channel::status::want_read ? POLLIN : POLLOUT;
        return;
      }
      if (s != channel::status::done)
        return reject(p, "TLS handshake failed: " + p.ch->error());
      p.tls_done = true;
      p.events = POLLIN;
      p.who = p.ch->peer_identity();
      if (!p.who)
        return refuse(p, fmt::format("the dialer's certificate ({}) names "
                                     "no actorps node",
                                     p.ch->peer_subject()));
      p.peer += " (" + p.who->name() + ")";
      if (!may_dial(p.who->role, tls_->identity().role))
        return refuse(p, fmt::format("the dialer's certificate names {}, "
                                     "and a {} does not connect to a {}",
                                     p.who->name(), p.who->role,
                                     tls_->identity().role));
    }
    if (p.transcript)
      return check_proof(p);
    for (;;) {
      size_t n = 0;
      auto s = p.ch->read(p.buf.data() + p.got,
                          missing_bytes(p.buf.data(), p.got, 0), n);
      if (s == channel::status::want_read || s == channel::status::want_write) {
        p.events = s == channel::status::want_read ? POLLIN : POLLOUT;
        return;
      }
      if (s == channel::status::closed)
        return reject(p, p.got == 0 ? "closed before its preamble"
                                    : "closed within its preamble");
      if (s == channel::status::failed)
        return reject(p, p.ch->error());
      p.got += n;
      auto check = check_preamble(p.buf.data(), p.got);
      if (check.result == preamble_check::verdict::not_actorps)
        return reject(p, fmt::format("not an actorps peer (first bytes {}{})",
                                     check.first_bytes,
                                     p.buf[0] == 0x16 && !tls_
                                       ? ": a TLS client, and this node runs "
                                         "with tls off"
                                       : ""));
      if (check.result == preamble_check::verdict::incomplete)
        continue;
      if (missing_bytes(p.buf.data(), p.got, 0) > 0)
        continue;
      std::string why;
      if (p.buf[preamble_status_at] != 0
          && parse_refusal(p.buf.data() + preamble_size, p.got - preamble_size,
                           why))
        return reject(p, "it refused this node: " + why);
      break;
    }
    // Answer with this node's preamble in every case: a peer of another
    // version learns which version this node speaks.
    auto check = check_preamble(p.buf.data(), p.got);
    if (check.result == preamble_check::verdict::other_version) {
      p.ch->write(answer.data(), answer.size());
      return reject(p, fmt::format("protocol version {}, this node speaks {}",
                                   check.version, protocol_version));
    }
    auto kind = p.buf[preamble_kind_at];
    if (kind == channel_data && !on_data_)
      return refuse(p, "it asked for a data channel, which this node does "
                       "not serve");
    if (kind != channel_basp && kind != channel_data)
      return refuse(p, fmt::format("it asked for channel kind {}, which this "
                                   "node does not know",
                                   static_cast<int>(kind)));
    if (auto why = secret_mismatch(secret_ != nullptr,
                                   p.buf[preamble_secret_at] != 0);
        !why.empty())
      return refuse(p, why);
    // A cap on the BASP connections of one identity: each is a socket and
    // CAF's buffers for as long as the peer keeps it open.
    if (kind == channel_basp && p.who) {
      auto name = p.who->name();
      std::lock_guard<std::mutex> guard{census_->mtx};
      auto& open = census_->open[name];
      if (open >= max_basp_per_peer)
        return refuse(p, fmt::format("too many BASP connections of {}: {} "
                                     "open (at most {} per peer)",
                                     name, open, max_basp_per_peer));
      ++open;
      // Held by the connection's scribe (channel::release_to): counted
      // down when CAF lets the connection go.
      p.counted = std::shared_ptr<void>(
        nullptr, [census = census_, name](void*) {
          std::lock_guard<std::mutex> guard{census->mtx};
          if (--census->open[name] == 0)
            census->open.erase(name);
        });
    }
    std::string reply(answer.begin(), answer.end());
    if (secret_) {
      // The dialer proves first; this gate's proof follows only a right one.
      p.transcript.emplace();
      try {
        p.transcript->gate_nonce = fresh_nonce();
      } catch (const std::exception& e) {
        return reject(p, e.what());
      }
      reply[preamble_secret_at] = 1;
      std::memcpy(p.transcript->dialer_preamble.data(), p.buf.data(),
                  preamble_size);
      std::memcpy(p.transcript->gate_preamble.data(), reply.data(),
                  preamble_size);
    }
    if (tls_)
      reply += tls_->issue_ticket(*p.who);
    if (p.transcript)
      reply.append(reinterpret_cast<const char*>(
                     p.transcript->gate_nonce.data()),
                   secret_nonce_size);
    if (p.ch->write(reply.data(), reply.size()) != channel::status::done)
      return reject(p, "could not answer its preamble: " + p.ch->error());
    if (p.transcript) {
      p.events = POLLIN;
      return; // its proof next, within the same deadline
    }
    admit(p);
  };
  // Out of file descriptors (or memory), accept() fails while the listening
  // socket stays readable: it is left alone for a while instead of spinning.
  steady_clock::time_point accept_paused_until;
  bool accept_failing = false;
  for (;;) {
    auto now = steady_clock::now();
    bool accepting = now >= accept_paused_until;
    std::vector<pollfd> fds;
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (auto& p : waiting)
      fds.push_back({p.ch->fd(), p.events, 0});
    int timeout_ms = -1;
    if (!accepting)
      timeout_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(
          accept_paused_until - now).count() + 1);
    for (auto& p : waiting) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    p.deadline - now).count();
      timeout_ms = timeout_ms < 0 ? std::max<int>(0, left)
                                  : std::min<int>(timeout_ms, std::max<int>(0, left));
    }
    if (!unlogged.empty()) { // wake for the next summary line
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    last_summary + summary_interval - now).count() + 1;
      left = std::max<decltype(left)>(left, 0);
      timeout_ms = timeout_ms < 0 ? static_cast<int>(left)
                                  : std::min<int>(timeout_ms, left);
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      log::warn("gate", -1, "{}: poll failed: {}", label_,
                std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0)
      break;
    now = steady_clock::now();
    for (size_t i = 0; i < waiting.size(); ++i) {
      auto& p = waiting[i];
      if (fds[i + 2].revents != 0) {
        p.heard = true;
        advance(p);
      }
      else if (now >= p.deadline)
        reject(p, p.transcript
                    ? fmt::format("job secret wrong or missing: no proof "
                                  "within {} s",
                                  preamble_timeout.count())
                    : fmt::format("no {}preamble within {} s",
                                  p.ch->tls() && !p.tls_done
                                    ? "TLS handshake or "
                                    : "",
                                  preamble_timeout.count()));
    }
    waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                                 [](const pending& p) { return !p.ch; }),
                  waiting.end());
    summarise(now);
    if (fds[1].revents != 0) {
      for (;;) {
        sockaddr_storage sa{};
        socklen_t len = sizeof(sa);
        int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS
              || errno == ENOMEM) {
            if (!accept_failing)
              log::warn("gate", -1, "{}: cannot accept connections: {}; "
                                    "trying again every 100 ms",
                        label_, std::strerror(errno));
            accept_failing = true;
            accept_paused_until = steady_clock::now()
                                  + std::chrono::milliseconds(100);
          }
          break;
        }
        accept_failing = false;
        pending p;
        auto* ssl = tls_ ? tls_->new_session(fd, true) : nullptr;
        p.ch = std::make_unique<channel>(fd, ssl);
        p.deadline = steady_clock::now() + preamble_timeout;
        p.peer = peer_name(sa);
        if (tls_ && ssl == nullptr) { // never fall back to plain TCP
          reject(p, "cannot create a TLS session: " + tls_error(nullptr));
          continue;
        }
        if (waiting.size() >= max_pending) {
          // The oldest that has sent nothing makes room (they are in the
          // order they came); if all have sent something, the oldest: a
          // node finishes its TLS handshake and preamble in milliseconds,
          // so the oldest of 64 is a slow peer, and a newcomer always gets
          // its chance.
          auto oldest = std::find_if(waiting.begin(), waiting.end(),
                                     [](const pending& w) {
                                       return w.ch && !w.heard;
                                     });
          auto cause = "silent";
          if (oldest == waiting.end()) {
            oldest = waiting.begin();
            cause = "slow";
          }
          reject(*oldest, fmt::format("{} while {} connections waited for "
                                      "their preamble",
                                      cause, max_pending));
          waiting.erase(oldest);
        }
        waiting.push_back(std::move(p));
      }
    }
  }
  waiting.clear();
}

} // namespace actorps
