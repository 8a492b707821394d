// A server's end of a data channel (cluster/net/data_link.hpp): the session
// actor that hands a worker's pulls and pushes from the frame pump to the
// parameter server, checks them against the channel's certificate, closes
// an idle channel, and caps a worker's channels per server.

#include "cluster/net/data_link.hpp"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/send.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "cluster/net/authorization.hpp"
#include "cluster/net/data_channel_ends.hpp"
#include "cluster/net/tls_channel.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

using detail::clock_type;
using detail::inbox;
using detail::next_idle_check;
using detail::start_pump;

using session_actor = caf::typed_actor<caf::reacts_to<frames_atom>,
                                       caf::reacts_to<idle_atom>>;

struct session_state {
  ps_actor server;
  std::shared_ptr<inbox> box;
  std::shared_ptr<frame_pump> pump;
  std::string label;
  /// Whom the channel's certificate names (none without TLS): a worker may
  /// pull and push only under its own index, any other role not at all
  /// (cluster/net/authorization.hpp).
  std::optional<node_identity> peer;
  /// Requests passed to the server and not answered yet; when the last
  /// request arrived or answer went out (for the idle timeout).
  size_t outstanding = 0;
  clock_type::time_point last_activity = clock_type::now();
  std::chrono::milliseconds idle_timeout{0};
  static constexpr const char* name = "data-session";

  ~session_state() {
    if (pump)
      pump->close();
  }
};

using session_ptr = session_actor::stateful_pointer<session_state>;

/// Why a request (`kind`, in the name of worker `worker`) of this
/// channel's peer is refused (cluster/net/authorization.hpp's rule), logged;
/// empty if it may be served.
std::string refusal(session_state& st, ps_request kind, uint32_t worker) {
  if (!st.peer)
    return {}; // no TLS: nobody is authenticated
  auto why = request_refusal(st.peer->role, st.peer->index, kind, worker);
  if (why.empty())
    return {};
  why = fmt::format("a {} over the data channel of {}: {}", to_string(kind),
                    st.peer->name(), why);
  log::warn("data", -1, "{}: refused {}", st.label, why);
  return why;
}

/// The data-channel sessions of this process by server and peer identity,
/// oldest first: past the cap, a newer one closes the oldest (as a
/// restarted worker's must replace its dead predecessor's).
struct session_registry {
  std::mutex mtx;
  std::map<std::pair<caf::actor_id, std::string>, std::deque<caf::actor_addr>>
    live;
};

session_registry& sessions() {
  static session_registry r;
  return r;
}

/// Passes the requests that arrived to the server; each answer goes back
/// as a frame. Ends the session when the channel ended or a request does
/// not decode.
void on_requests(session_ptr self) {
  auto& st = self->state;
  std::optional<std::string> closed;
  auto frames = st.box->take(closed);
  auto& sys = self->system();
  auto pump = st.pump;
  try {
    if (!frames.empty())
      st.last_activity = clock_type::now();
    for (auto& f : frames) {
      auto id = f.header.id;
      // An answer (or error) goes out: one request fewer outstanding.
      auto answered = [self] {
        --self->state.outstanding;
        self->state.last_activity = clock_type::now();
      };
      auto fail = [pump, &sys, id](caf::error& err) {
        pump->send(encode_error(sys, id, err));
      };
      auto failed = [fail, answered](caf::error& err) {
        answered();
        fail(err);
      };
      if (f.header.kind == frame_kind::pull) {
        auto req = decode_pull(sys, f);
        if (auto why = refusal(st, ps_request::pull, req.worker);
            !why.empty()) {
          auto err = caf::make_error(errc::not_authorized, "pull", why);
          fail(err);
          continue;
        }
        auto urgent = req.urgent;
        auto sent = urgent ? self->request<caf::message_priority::high>(
                               st.server, caf::infinite, pull_atom_v,
                               std::move(req))
                           : self->request(st.server, caf::infinite,
                                           pull_atom_v, std::move(req));
        ++st.outstanding;
        std::move(sent).then(
            [pump, &sys, id, answered](pull_reply& r) {
              answered();
              pump->send(encode(sys, id, std::move(r)));
            },
            failed);
      } else if (f.header.kind == frame_kind::push) {
        auto req = decode_push(sys, f);
        if (auto why = refusal(st, ps_request::push, req.id.worker);
            !why.empty()) {
          auto err = caf::make_error(errc::not_authorized, "push", why);
          fail(err);
          continue;
        }
        ++st.outstanding;
        self->request(st.server, caf::infinite, push_atom_v, std::move(req))
          .then(
            [pump, id, answered](uint64_t clock) {
              answered();
              pump->send(encode_clock(id, clock));
            },
            failed);
      } else {
        throw input_error("an answer frame, where requests are expected");
      }
    }
  } catch (const input_error& e) {
    log::warn("data", -1, "{}: the worker sent {}; closing", st.label,
              e.what());
    self->quit();
    return;
  }
  if (closed) {
    log::debug("data", -1, "{}: {}", st.label, *closed);
    self->quit();
  }
}

/// Closes the channel if no request is outstanding and none arrived for
/// the idle timeout; checks again later otherwise.
void check_idle(session_ptr self) {
  auto& st = self->state;
  auto again = next_idle_check(st.outstanding > 0,
                               clock_type::now() - st.last_activity,
                               st.idle_timeout);
  if (!again) {
    log::info("data", -1, "{}: closing: idle for {} s (no request)",
              st.label, st.idle_timeout.count() / 1000.0);
    self->quit();
    return;
  }
  self->delayed_send(self, *again, idle_atom_v);
}

} // namespace

frame_limits frame_limits_for(uint64_t region_bytes) {
  auto bound = 2 * region_bytes + (uint64_t{1} << 20);
  frame_limits out;
  out.meta = std::min(bound, out.meta);
  out.bulk = std::min(bound, out.bulk) / sizeof(float) * sizeof(float);
  return out;
}

void serve_data_channel(caf::actor_system& sys, ps_actor server,
                        std::unique_ptr<channel> ch, std::string label,
                        data_session_options opts) {
  auto peer = opts.authorize ? ch->peer_identity() : std::nullopt;
  auto holder = std::make_shared<std::unique_ptr<channel>>(std::move(ch));
  auto session = sys.spawn([holder, server, label, opts,
                            peer](session_ptr self)
                             -> session_actor::behavior_type {
    auto& st = self->state;
    st.server = server;
    st.label = label;
    st.peer = peer;
    st.idle_timeout = opts.idle_timeout;
    st.box = std::make_shared<inbox>();
    // The pump holds the session: it lives until the channel ends or the
    // server is down.
    // Acknowledgements and errors are written by the server's thread, pull
    // replies of more than 64 KiB by the pump's (the server's one thread
    // serves every worker).
    st.pump = start_pump(
      std::move(*holder), st.box, caf::actor_cast<caf::strong_actor_ptr>(self),
      true, label, size_t{64} << 10,
      opts.shared_memory ? shm_mode::answer : shm_mode::decline, 0,
      opts.limits);
    self->monitor(server);
    self->set_down_handler([self](caf::down_msg& dm) {
      if (dm.source == self->state.server.address())
        self->quit(dm.reason);
    });
    if (opts.idle_timeout.count() > 0)
      self->delayed_send(self, opts.idle_timeout, idle_atom_v);
    return {[self](frames_atom) { on_requests(self); },
            [self](idle_atom) { check_idle(self); }};
  });
  if (!peer)
    return;
  std::vector<caf::actor> closing;
  {
    auto& r = sessions();
    std::lock_guard<std::mutex> guard{r.mtx};
    auto& mine = r.live[{server.id(), peer->name()}];
    // The ended ones go first.
    mine.erase(std::remove_if(mine.begin(), mine.end(),
                              [](const caf::actor_addr& a) {
                                return !caf::actor_cast<caf::actor>(a);
                              }),
               mine.end());
    mine.push_back(session.address());
    while (mine.size() > std::max<size_t>(opts.max_channels, 1)) {
      if (auto older = caf::actor_cast<caf::actor>(mine.front()))
        closing.push_back(older);
      mine.pop_front();
    }
  }
  for (auto& older : closing) {
    log::warn("data", -1, "{}: {} opened another data channel; its oldest "
                          "is closed ({} at most per worker and server)",
              label, peer->name(), opts.max_channels);
    caf::anon_send_exit(older, caf::exit_reason::user_shutdown);
  }
}

} // namespace actorps
