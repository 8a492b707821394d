#include "cluster/net/data_link.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/sec.hpp"
#include "caf/send.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/ps_forwarding.hpp"
#include "cluster/net/data_channel_ends.hpp"
#include "cluster/net/frame_pump.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/net/gate_io.hpp"
#include "cluster/net/inline_unit.hpp"
#include "cluster/net/shm_offer.hpp"
#include "cluster/net/tls_channel.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

using detail::clock_type;
using detail::inbox;
using detail::next_idle_check;
using detail::start_pump;

caf::error channel_lost(const std::string& label, const std::string& why) {
  return caf::make_error(caf::sec::socket_disconnected,
                         fmt::format("data channel {}: {}", label, why));
}

// -- worker side ----------------------------------------------------------------

std::atomic<uint32_t> census_shm{0};
std::atomic<uint32_t> census_tcp{0};

std::atomic<uint32_t>& census_of(bool shm) {
  return shm ? census_shm : census_tcp;
}

/// A dialed channel and the segment its ends settled on (null: TCP).
struct settled_channel {
  std::unique_ptr<channel> ch;
  std::unique_ptr<shm_segment> shm;
};

/// Offers the server shared memory (or says TCP) on `ch` and reads its
/// answer, before the frame pump starts, so that open_data_link() can refuse
/// a link that `transport` shm does not allow. Logs which way the frames go.
/// @throws runtime_failure (the channel failed or timed out), input_error
///         (a malformed answer; a decline under link_transport::shm).
settled_channel settle(std::unique_ptr<channel> ch,
                       const data_link_options& opts, const std::string& label,
                       std::chrono::steady_clock::time_point deadline) {
  std::string why;
  auto ring = opts.transport == link_transport::tcp
                ? size_t{0}
                : shm_segment::ring_bytes_for(opts.frame_bytes);
  auto seg = offer_shm(*ch, ring, deadline, why);
  if (!seg && opts.transport == link_transport::shm)
    throw input_error(fmt::format(
      "{}: cluster.transport is shm, but the frames cannot go through shared "
      "memory: {} (transport auto falls back to TCP)",
      label, why));
  log::info("data", -1, "{}",
            seg ? fmt::format("{}: frames through shared memory", label)
                : fmt::format("{}: frames over TCP ({})", label, why));
  // Counted from here, so that the census holds when open_data_link()
  // returns; the link's state takes the count over (link_state::adopt).
  census_of(seg != nullptr).fetch_add(1);
  return {std::move(ch), std::move(seg)};
}

using link_actor = ps_actor::extend<caf::reacts_to<frames_atom>,
                                    caf::reacts_to<idle_atom>>;

/// Where a link dials its channel again after an idle close.
struct link_dial {
  host_port where;
  const tls_context* tls = nullptr;
  std::optional<node_identity> expect;
  std::chrono::milliseconds timeout{0};
};

struct link_state {
  ps_actor server;
  std::shared_ptr<inbox> box;
  /// None while the channel is closed for being idle (opened again by the
  /// next request).
  std::shared_ptr<frame_pump> pump;
  std::string label;
  data_link_options opts;
  link_dial dial;
  uint64_t next = 1;
  std::unordered_map<uint64_t, caf::typed_response_promise<pull_reply>> pulls;
  std::unordered_map<uint64_t, caf::typed_response_promise<uint64_t>> pushes;
  /// When the last request went out; whether an idle check is pending.
  clock_type::time_point last_request;
  bool idle_check = false;
  /// The channel could not be opened again: everything goes over BASP.
  bool over_basp = false;
  /// Whether the open channel (if any) is counted in the census as shared
  /// memory or TCP.
  std::optional<bool> counted;
  static constexpr const char* name = "data-link";

  /// Takes over the census count of a channel settle() counted (`shm`:
  /// through shared memory).
  void adopt(bool shm) {
    uncount();
    counted = shm;
  }

  void uncount() {
    if (counted)
      census_of(*counted).fetch_sub(1);
    counted.reset();
  }

  ~link_state() {
    uncount();
    if (pump)
      pump->close();
  }
};

using link_ptr = link_actor::stateful_pointer<link_state>;

/// Answers the requests whose replies arrived; ends the link when the
/// channel ended or a reply does not decode.
void on_frames(link_ptr self) {
  auto& st = self->state;
  std::optional<std::string> closed;
  auto frames = st.box->take(closed);
  auto& sys = self->system();
  try {
    for (auto& f : frames) {
      auto id = f.header.id;
      auto pull = st.pulls.find(id);
      auto push = st.pushes.find(id);
      if (pull == st.pulls.end() && push == st.pushes.end())
        throw input_error(fmt::format("an answer to request {}, which it "
                                      "was not asked",
                                      id));
      if (f.header.kind == frame_kind::error) {
        auto err = decode_error(sys, f);
        if (pull != st.pulls.end()) {
          pull->second.deliver(std::move(err));
          st.pulls.erase(pull);
        } else {
          push->second.deliver(std::move(err));
          st.pushes.erase(push);
        }
      } else if (pull != st.pulls.end()) {
        pull->second.deliver(decode_pull_reply(sys, f));
        st.pulls.erase(pull);
      } else {
        push->second.deliver(decode_clock(f));
        st.pushes.erase(push);
      }
    }
  } catch (const input_error& e) {
    log::warn("data", -1, "{}: the server sent {}; closing", st.label,
              e.what());
    self->quit(channel_lost(st.label, e.what()));
    return;
  }
  if (!closed)
    return;
  if (!st.pulls.empty() || !st.pushes.empty()) {
    self->quit(channel_lost(st.label, *closed));
    return;
  }
  // Nothing was lost: the server closed an idle channel (or one past its
  // cap per worker). The next request opens it again.
  log::debug("data", -1, "{}: closed with nothing outstanding ({}); opened "
                         "again at the next request",
             st.label, *closed);
  st.pump.reset();
  st.uncount();
}

std::shared_ptr<frame_pump> start(link_ptr self, settled_channel ch) {
  auto& st = self->state;
  // A fresh inbox: a closed pump's end does not reach the new one.
  st.box = std::make_shared<inbox>();
  // A link that nobody holds any more ends, and its pump with it.
  // The worker's thread writes its pushes itself (it waits for their
  // answers anyway): a 1M-float push 1.5-2.1x raw TCP -> 1.2-1.4x p50
  // (actorps-bench).
  st.adopt(ch.shm != nullptr);
  return start_pump(std::move(ch.ch), st.box,
                    caf::actor_cast<caf::strong_actor_ptr>(self), false,
                    st.label, SIZE_MAX, shm_mode::settled, st.opts.frame_bytes,
                    {}, std::move(ch.shm));
}

/// Whether a request may go over the channel: it is open, or opened again
/// now (after an idle close). If it cannot be, the link logs why and hands
/// this and every later request to the server over BASP.
bool channel_ready(link_ptr self) {
  auto& st = self->state;
  if (st.pump)
    return true;
  if (st.over_basp)
    return false;
  dial_result out;
  auto deadline = clock_type::now() + st.dial.timeout;
  auto ch = detail::open_channel(st.dial.where, deadline, st.dial.tls,
                                 st.dial.expect ? &*st.dial.expect : nullptr,
                                 channel_data, out);
  if (ch) {
    try {
      st.pump = start(self, settle(std::move(ch), st.opts, st.label,
                                   deadline));
      return true;
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  }
  log::warn("data", -1, "{}: could not open the data channel again ({}); "
                        "pulls and pushes go over BASP",
            st.label, out.error);
  st.over_basp = true;
  return false;
}

/// A request went over the channel: with an idle limit, a check is
/// scheduled (one at a time; it holds the link alive until it runs).
void used(link_ptr self) {
  auto& st = self->state;
  st.last_request = clock_type::now();
  if (st.opts.idle_close.count() > 0 && !st.idle_check) {
    st.idle_check = true;
    self->delayed_send(self, st.opts.idle_close, idle_atom_v);
  }
}

/// Closes the channel if nothing is outstanding and no request went out
/// for `idle_close`; checks again later otherwise.
void check_idle(link_ptr self) {
  auto& st = self->state;
  st.idle_check = false;
  if (!st.pump)
    return;
  auto busy = !st.pulls.empty() || !st.pushes.empty();
  auto quiet = clock_type::now() - st.last_request;
  auto again = next_idle_check(busy, quiet, st.opts.idle_close);
  if (!again) {
    log::debug("data", -1, "{}: idle for {} ms; closed until the next "
                           "request",
               st.label,
               std::chrono::duration_cast<std::chrono::milliseconds>(quiet)
                 .count());
    st.pump->close();
    st.pump.reset();
    return;
  }
  st.idle_check = true;
  self->delayed_send(self, *again, idle_atom_v);
}

link_actor::behavior_type
link_behavior(link_ptr self, ps_actor server,
              std::shared_ptr<settled_channel> ch, std::string label,
              data_link_options opts, link_dial dial) {
  auto& st = self->state;
  st.server = server;
  st.label = label;
  st.opts = opts;
  st.dial = std::move(dial);
  st.pump = start(self, std::move(*ch));
  self->monitor(server);
  self->set_down_handler([self](caf::down_msg& dm) {
    if (dm.source == self->state.server.address())
      self->quit(dm.reason);
  });
  auto to = [self] { return self->state.server; };
  return ps_forwarding_behavior<link_actor>(
    self, to,
    [self](pull_atom a, pull_request& req) -> caf::result<pull_reply> {
      auto& st = self->state;
      // Table keys and rows would be serialised by CAF in the frame too:
      // over BASP they save the session's hand-off (measured: a 64K-key
      // pull or push 10-15% faster).
      if (!req.tables.empty() && req.urgent) {
        // A delegated message keeps its id, and with it its priority: the
        // answer to an urgent request from across BASP gets lost in CAF
        // 0.17 (see actors/worker_step.cpp, request_pull). Asked anew, as
        // a normal message.
        auto rp = self->make_response_promise<pull_reply>();
        req.urgent = false;
        self->request(st.server, caf::infinite, a, std::move(req))
          .then([rp](pull_reply& r) mutable { rp.deliver(std::move(r)); },
                [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
        return rp;
      }
      if (!req.tables.empty() || !channel_ready(self))
        return self->delegate(st.server, a, std::move(req));
      auto id = st.next++;
      auto rp = self->make_response_promise<pull_reply>();
      st.pulls.emplace(id, rp);
      st.pump->send(encode(self->system(), id, std::move(req)));
      used(self);
      return rp;
    },
    [self](push_atom a, push_request& req) -> caf::result<uint64_t> {
      auto& st = self->state;
      if (!req.tables.empty() || !channel_ready(self))
        return self->delegate(st.server, a, std::move(req));
      auto id = st.next++;
      auto rp = self->make_response_promise<uint64_t>();
      st.pushes.emplace(id, rp);
      st.pump->send(encode(self->system(), id, std::move(req)));
      used(self);
      return rp;
    },
    [self](frames_atom) { on_frames(self); },
    [self](idle_atom) { check_idle(self); });
}

} // namespace

link_transport parse_link_transport(const std::string& name) {
  if (name == "auto")
    return link_transport::automatic;
  if (name == "tcp")
    return link_transport::tcp;
  if (name == "shm")
    return link_transport::shm;
  throw input_error(fmt::format("cluster.transport: expected auto, tcp or "
                                "shm, got \"{}\"",
                                name));
}

link_census data_link_census() {
  return {census_shm.load(), census_tcp.load()};
}

ps_actor open_data_link(caf::actor_system& sys, ps_actor server,
                        const host_port& where, const tls_context* tls,
                        const node_identity* expect,
                        std::chrono::milliseconds timeout, std::string label,
                        data_link_options opts) {
  dial_result out;
  auto deadline = clock_type::now() + timeout;
  auto ch = detail::open_channel(where, deadline, tls, expect, channel_data,
                                 out);
  if (!ch)
    throw runtime_failure(fmt::format("{}: no data channel to {}: {}", label,
                                      to_string(where), out.error));
  // CAF copies spawn arguments: the channel travels in a shared holder.
  auto holder = std::make_shared<settled_channel>(
    settle(std::move(ch), opts, label, deadline));
  link_dial dial{where, tls, expect ? std::optional<node_identity>{*expect}
                                    : std::nullopt,
                 timeout};
  auto link = sys.spawn(link_behavior, std::move(server), std::move(holder),
                        std::move(label), opts, std::move(dial));
  return caf::actor_cast<ps_actor>(link);
}

} // namespace actorps
