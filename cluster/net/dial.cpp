#include "cluster/net/gate.hpp"

#include <array>
#include <cerrno>
#include <cstring>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/io/basp_broker.hpp"
#include "caf/io/middleman.hpp"
#include "caf/scoped_actor.hpp"

#include "cluster/net/gate_io.hpp"
#include "cluster/net/handshake.hpp"
#include "cluster/net/tls_channel.hpp"

namespace actorps {

using namespace detail;

namespace {

using std::chrono::steady_clock;

/// Waits until `fd` is ready for `events` or `deadline` passes.
bool wait_for(int fd, short events, steady_clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - steady_clock::now()).count();
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
int tcp_connect(const host_port& peer, steady_clock::time_point deadline,
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

namespace detail {

std::unique_ptr<channel> open_channel(const host_port& peer,
                                      steady_clock::time_point deadline,
                                      const tls_context* tls,
                                      const node_identity* expect, char kind,
                                      dial_result& out,
                                      const std::shared_ptr<const job_secret>&
                                        secret) {
  int fd = tcp_connect(peer, deadline, out);
  if (fd < 0)
    return nullptr;
  auto* ssl = tls != nullptr ? tls->new_session(fd, false) : nullptr;
  auto owned = std::make_unique<channel>(fd, ssl);
  auto& ch = *owned;
  auto fail = [&](std::string why, bool retryable) {
    out.error = std::move(why);
    out.retryable = retryable;
    return std::unique_ptr<channel>{};
  };
  if (tls != nullptr && ssl == nullptr) // never fall back to plain TCP
    return fail("cannot create a TLS session: " + tls_error(nullptr), true);
  // Waits for what `s` wants; false when the deadline passed.
  auto wait = [&](channel::status s) {
    return wait_for(fd, s == channel::status::want_write ? POLLOUT : POLLIN,
                    deadline);
  };
  auto mine = make_preamble();
  mine[preamble_kind_at] = kind;
  mine[preamble_secret_at] = secret ? 1 : 0;
  // -- TLS: the peer's certificate names the member this node wants --------
  for (;;) {
    auto s = ch.handshake();
    if (s == channel::status::done)
      break;
    if (s == channel::status::failed) {
      auto& e = ch.error();
      if (e.find("closed during the TLS handshake") != std::string::npos)
        return fail(e + " (does the node there run with tls off?)", true);
      if (ch.transport_failure()) // reset: the node may be restarting
        return fail(e, true);
      return fail("TLS handshake failed: " + e
                    + (e.find("wrong version number") != std::string::npos
                         ? " (does the node there run with tls off?)"
                         : ""),
                  false);
    }
    if (!wait(s))
      return fail("no TLS handshake in answer", true);
  }
  if (ch.tls() && expect != nullptr) {
    auto id = ch.peer_identity();
    if (!id || *id != *expect) {
      auto why = fmt::format("its certificate names {} ({}), not {}",
                             id ? id->name() : std::string{"no actorps node"},
                             ch.peer_subject(), expect->name());
      auto msg = refusal_message(
        std::string(mine.begin(), mine.end()),
        fmt::format("{} refuses this connection: {}",
                    tls->identity().name(),
                    fmt::format("this node dialled {} and found {}",
                                expect->name(),
                                id ? id->name() : std::string{"another"})));
      ch.write(msg.data(), msg.size());
      return fail(why, false);
    }
  }
  // -- the preamble both ways ----------------------------------------------
  if (!wait_for(fd, POLLOUT, deadline))
    return fail("could not send the preamble: timed out", true);
  if (ch.write(mine.data(), mine.size()) != channel::status::done)
    return fail("could not send the preamble: " + ch.error(), true);
  std::array<char, preamble_size + 2 + max_reason_size> theirs{};
  auto extra = (ch.tls() ? ticket_size : 0)
               + (secret ? secret_nonce_size : 0);
  size_t got = 0;
  std::string refusal;
  while (missing_bytes(theirs.data(), got, extra) > 0) {
    size_t n = 0;
    auto s = ch.read(theirs.data() + got,
                     missing_bytes(theirs.data(), got, extra), n);
    if (s == channel::status::closed) {
      // A node of another version answers with its preamble and closes.
      auto early = check_preamble(theirs.data(), std::min(got, preamble_size));
      if (early.result == preamble_check::verdict::other_version)
        return fail(fmt::format("protocol version: {} here, {} at the peer",
                                protocol_version, early.version),
                    false);
      return fail(got >= preamble_size && theirs[preamble_status_at] != 0
                    ? "refused this node (no reason given)"
                    : "closed the connection during the preamble (not an "
                      "actorps node?)",
                  false);
    }
    if (s == channel::status::failed)
      return ch.tls() && !ch.transport_failure()
               ? fail("refused this node's certificate: " + ch.error(), false)
               : fail(ch.error(), true);
    if (s != channel::status::done) {
      if (!wait(s))
        return fail("no preamble in answer (not an actorps node?)", true);
      continue;
    }
    got += n;
    if (got >= preamble_size && theirs[preamble_status_at] != 0
        && check_preamble(theirs.data(), got).result
             == preamble_check::verdict::ok
        && parse_refusal(theirs.data() + preamble_size, got - preamble_size,
                         refusal))
      return fail(refusal, false);
    auto early = check_preamble(theirs.data(), std::min(got, preamble_size));
    if (early.result == preamble_check::verdict::not_actorps)
      break;
  }
  auto check = check_preamble(theirs.data(), std::min(got, preamble_size));
  if (check.result == preamble_check::verdict::not_actorps)
    return fail(fmt::format("not an actorps node (answered {}{})",
                            check.first_bytes,
                            theirs[0] == 0x15 || theirs[0] == 0x16
                              ? ": TLS, and this node runs with tls off"
                              : ""),
                false);
  if (check.result != preamble_check::verdict::ok)
    return fail(fmt::format("protocol version: {} here, {} at the peer",
                            protocol_version, check.version),
                false);
  if (ch.tls())
    out.ticket.assign(theirs.data() + preamble_size, ticket_size);
  // -- the job's secret: this end proves first, then checks the gate's -----
  if (secret) {
    if (theirs[preamble_secret_at] == 0)
      return fail(secret_mismatch(false, true), false);
    secret_transcript t;
    std::memcpy(t.dialer_preamble.data(), mine.data(), preamble_size);
    std::memcpy(t.gate_preamble.data(), theirs.data(), preamble_size);
    std::memcpy(t.gate_nonce.data(), theirs.data() + extra - secret_nonce_size
                                       + preamble_size,
                secret_nonce_size);
    std::string answer;
    try {
      answer = dialer_answer(*secret, t);
    } catch (const std::exception& e) {
      return fail(e.what(), true);
    }
    if (ch.write(answer.data(), answer.size()) != channel::status::done)
      return fail("could not send the job secret's proof: " + ch.error(),
                  true);
    std::array<char, 3 + max_reason_size> verdict{};
    got = 0;
    while (auto missing = verdict_missing(verdict.data(), got)) {
      size_t n = 0;
      auto s = ch.read(verdict.data() + got, missing, n);
      if (s == channel::status::closed || s == channel::status::failed)
        return fail("job secret wrong or missing: the node closed the "
                    "connection instead of judging this node's proof",
                    false);
      if (s != channel::status::done) {
        if (!wait(s))
          return fail("no answer to the job secret's proof", true);
        continue;
      }
      got += n;
    }
    if (auto why = check_verdict(*secret, t, verdict.data(), got);
        !why.empty())
      return fail(why, false);
  }
  set_nodelay(fd);
  out.error.clear();
  return owned;
}

} // namespace detail

dial_result dial(caf::actor_system& sys, const host_port& peer,
                 std::chrono::milliseconds timeout, const tls_context* tls,
                 const node_identity* expect,
                 std::shared_ptr<const job_secret> secret) {
  dial_result out;
  auto deadline = steady_clock::now() + timeout;
  auto ch = open_channel(peer, deadline, tls, expect, 0, out, secret);
  if (!ch)
    return out;
  auto scribe = ch->release_to(sys, basp_limits{}, to_string(peer));
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - steady_clock::now());
  if (left.count() < 1)
    left = std::chrono::milliseconds(1);
  caf::scoped_actor self{sys};
  self
    ->request(basp_broker(sys), left, caf::connect_atom::value,
              std::move(scribe), peer.port)
    .receive(
      [&](caf::node_id&, caf::strong_actor_ptr& ptr,
          std::set<std::string>&) {
        if (ptr == nullptr) {
          out.error = "no actor published at that port";
        } else {
          out.actor = std::move(ptr);
          out.error.clear();
        }
      },
      [&](caf::error& err) {
        out.error = "CAF handshake failed: " + sys.render(err);
        out.retryable = true;
      });
  return out;
}

} // namespace actorps
