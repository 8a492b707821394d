#include "cluster/topology/node_actor.hpp"

#include <csignal>
#include <ctime>

#include <sys/types.h>
#include <unistd.h>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/send.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "actors/fault_injection.hpp"
#include "cluster/net/authorization.hpp"
#include "cluster/net/handshake.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

struct node_state {
  node_options opts;
  /// The coordinator that joined last (null: none yet, or lost), and its
  /// watcher actor (the one it named in its hello).
  caf::actor_addr chief;
  caf::actor chief_actor;
  bool joined = false;
  /// When waiting for a coordinator ends (ticks before it are stale).
  std::chrono::steady_clock::time_point deadline;
  /// Messages refused by their sender so far (for the log line).
  uint64_t refused = 0;
  static constexpr const char* name = "node";
};

using node_ptr = node_actor::stateful_pointer<node_state>;

/// Who sent the current message, for log lines.
std::string sender_of(node_ptr self) {
  auto& sender = self->current_sender();
  if (!sender)
    return "an anonymous sender";
  if (sender->node() == self->node())
    return "this process";
  if (auto& peers = self->state.opts.peers)
    if (auto who = peers->find(sender->node()))
      return fmt::format("{} (node {})", to_string(*who),
                         to_string(sender->node()));
  return fmt::format("node {}, which never introduced itself",
                     to_string(sender->node()));
}

/// Why the current message (`what`) may not be handled, logged; empty if
/// it may. Only the coordinator that joined may send it (`chief_only`), or
/// any peer whose hello was admitted. Without a registry everything may.
std::string refusal(node_ptr self, const char* what, bool chief_only) {
  auto& st = self->state;
  if (!st.opts.peers)
    return {};
  auto& sender = self->current_sender();
  bool ok = false;
  if (sender && sender->node() == self->node())
    ok = true; // this process (its own timers)
  else if (sender && chief_only)
    ok = st.joined && sender->node() == st.chief.node();
  else if (sender)
    ok = st.opts.peers->find(sender->node()).has_value();
  if (ok)
    return {};
  auto why = fmt::format("{} from {}: {}", what, sender_of(self),
                         chief_only ? "only the coordinator that joined may "
                                      "send it"
                                    : "only a peer that introduced itself "
                                      "may send it");
  ++st.refused;
  log::warn(st.opts.self.role, static_cast<int>(st.opts.self.index),
            "refused {} ({} refused so far)", why, st.refused);
  return why;
}

/// As refusal(), and also refused (logged) if the job's fault plan does
/// not name this fault for this node (`planned`).
bool refuse_fault(node_ptr self, const char* what, bool planned) {
  if (!refusal(self, what, true).empty())
    return true;
  auto& st = self->state;
  if (planned || !st.opts.peers)
    return false;
  ++st.refused;
  log::warn(st.opts.self.role, static_cast<int>(st.opts.self.index),
            "refused {} from {}: the job's fault plan names no such fault "
            "for this node ({} refused so far)",
            what, sender_of(self), st.refused);
  return true;
}

void stop(node_ptr self, int status) {
  self->state.opts.exit_status->store(status);
  self->quit(status == 0 ? caf::exit_reason::normal
                         : caf::exit_reason::user_shutdown);
}

node_actor::behavior_type node_behavior(node_ptr self, node_options opts) {
  self->state.opts = std::move(opts);
  auto& me = self->state.opts.self;
  auto role = me.role;
  auto index = static_cast<int>(me.index);
  auto wait_for_chief = [=] {
    auto& st = self->state;
    st.deadline = std::chrono::steady_clock::now() + st.opts.join_timeout;
    self->delayed_send(self, st.opts.join_timeout, caf::tick_atom_v);
  };
  wait_for_chief();
  self->set_down_handler([=](caf::down_msg& dm) {
    if (dm.source != self->state.chief)
      return;
    self->state.chief = nullptr;
    self->state.joined = false;
    log::error(role, index,
               "lost the coordinator ({}); waiting {} s for it to rejoin",
               self->system().render(dm.reason),
               self->state.opts.join_timeout.count() / 1000.0);
    wait_for_chief();
  });
  return {
    [=](hello_atom, handshake& peer,
        caf::actor& chief) -> caf::result<node_welcome> {
      auto& st = self->state;
      // Before the ticket is redeemed: a refused hello does not spend it.
      if (chief && peer.role != "chief") {
        auto text = fmt::format("{} {} named itself the coordinator of the "
                                "job; only the chief may",
                                peer.role, peer.index);
        log::error(role, index, "refused {}", text);
        return caf::make_error(errc::handshake_refused, std::move(text));
      }
      if (st.opts.authorize) {
        if (auto why = st.opts.authorize(peer); !why.empty()) {
          log::error(role, index, "refused {} {}: {}", peer.role, peer.index,
                     why);
          return caf::make_error(errc::handshake_refused, std::move(why));
        }
      }
      auto diffs = handshake_differences(st.opts.self, peer);
      if (!diffs.empty()) {
        auto text = join_lines(diffs);
        log::error(role, index, "refused {} {}: {}", peer.role,
                        peer.index, text);
        return caf::make_error(errc::handshake_refused, std::move(text));
      }
      if (auto& peers = st.opts.peers) {
        auto& sender = self->current_sender();
        if (!sender) {
          log::error(role, index, "refused an anonymous hello of {} {}",
                     peer.role, peer.index);
          return caf::make_error(errc::handshake_refused,
                                 "a hello needs a sender");
        }
        peer_identity id{peer.role, peer.index, peer.incarnation};
        log::debug(role, index, "admitted {} from node {}", to_string(id),
                   to_string(sender->node()));
        if (auto old = peers->admit(sender->node(), id); old)
          log::warn(role, index,
                    "{} introduced itself from node {}; the process that "
                    "held that identity before (node {}) is fenced: its "
                    "requests are refused from now on",
                    to_string(id), to_string(sender->node()),
                    to_string(*old));
      }
      if (chief) {
        if (st.chief)
          self->demonitor(st.chief);
        st.chief = chief.address();
        st.chief_actor = chief;
        st.joined = true;
        self->monitor(chief);
        log::info(role, index, "coordinator joined (job {})",
                  fingerprint_id(peer.job));
      }
      return node_welcome{st.opts.self, st.opts.role_actor};
    },
    [=](shutdown_atom, int32_t status) -> caf::result<uint32_t> {
      if (auto why = refusal(self, "a shutdown", true); !why.empty())
        return caf::make_error(errc::not_authorized, std::move(why));
      log::info(role, index, "shutting down ({})",
                status == 0 ? "the job is done" : "the job failed");
      // The role's actor ends before this answer reaches the coordinator,
      // which tells the servers only then: a worker gone does not report
      // them lost.
      if (auto& actor = self->state.opts.role_actor)
        caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
      stop(self, status == 0 ? 0 : exit_job_failed);
      return self->state.opts.self.index;
    },
    [=](ping_atom) -> caf::result<uint32_t> {
      if (auto why = refusal(self, "a ping", false); !why.empty())
        return caf::make_error(errc::not_authorized, std::move(why));
      return self->state.opts.self.index;
    },
    [=](kill_atom) {
      if (refuse_fault(self, "a kill", self->state.opts.faults.kill))
        return;
      log::warn(role, index, "fault injection: SIGKILL");
      ::kill(::getpid(), SIGKILL);
    },
    [=](freeze_atom, uint64_t ms) {
      if (refuse_fault(self, "a freeze", self->state.opts.faults.freeze))
        return;
      log::warn(role, index, "fault injection: SIGSTOP for {} ms", ms);
      auto me = ::getpid();
      if (::fork() == 0) {
        // Only async-signal-safe calls in the child of a threaded process.
        struct timespec ts;
        ts.tv_sec = static_cast<time_t>(ms / 1000);
        ts.tv_nsec = static_cast<long>(ms % 1000) * 1000000L;
        ::nanosleep(&ts, nullptr);
        ::kill(me, SIGCONT);
        ::_exit(0);
      }
      ::kill(me, SIGSTOP);
    },
    [=](fail_atom) {
      if (!refusal(self, "a step error", true).empty())
        return;
      auto& hooks = self->state.opts.faults;
      if (!hooks.arm_step_error) {
        log::warn(role, index, "fault injection: a step error was asked for, "
                               "but this node's config names no such fault");
        return;
      }
      log::warn(role, index, "fault injection: the next step throws");
      hooks.arm_step_error();
    },
    [=](chaos_atom, double drop, double delay, uint64_t delay_ms) {
      if (!refusal(self, "a chaos fault", true).empty())
        return;
      auto& hooks = self->state.opts.faults;
      if (!hooks.ps_proxy) {
        log::warn(role, index, "fault injection: dropped or delayed messages "
                               "were asked for, but this node's config names "
                               "no such fault");
        return;
      }
      self->send(caf::actor_cast<faulty_ps_actor>(hooks.ps_proxy), chaos_atom_v,
                 drop, delay, delay_ms);
    },
    [=](caf::tick_atom) {
      auto& st = self->state;
      if (!refusal(self, "a tick", true).empty())
        return;
      if (st.joined || std::chrono::steady_clock::now() < st.deadline)
        return;
      log::error(role, index, "no coordinator joined within {} s",
                 st.opts.join_timeout.count() / 1000.0);
      stop(self, exit_retryable); // another attempt may find one
    },
    [=](enlist_atom, caf::actor& chief) {
      auto& st = self->state;
      auto& sender = self->current_sender();
      if (!sender || sender->node() != self->node() || !chief) {
        log::warn(role, index, "refused an enlist from {}: only this process "
                  "may say which coordinator it joined",
                  sender_of(self));
        return;
      }
      if (st.chief)
        self->demonitor(st.chief);
      st.chief = chief.address();
      st.chief_actor = chief;
      st.joined = true;
      self->monitor(chief);
      if (auto& peers = st.opts.peers)
        peers->admit(chief.node(), peer_identity{"chief", 0, 0});
    },
    [=](leave_atom) -> caf::result<uint32_t> {
      auto& st = self->state;
      auto& sender = self->current_sender();
      if (!sender || sender->node() != self->node())
        return caf::make_error(errc::not_authorized,
                               "a leave only from this process");
      if (role != "worker" || !st.joined || !st.chief_actor)
        return caf::make_error(errc::no_workers,
                               role != "worker" ? "not a worker"
                                                : "no coordinator joined");
      log::info(role, index, "leaving the job: finishing the closures this "
                "worker holds, then exiting");
      auto rp = self->make_response_promise<uint32_t>();
      self->request(st.chief_actor, st.opts.join_timeout, leave_atom_v,
                    st.opts.self.index)
        .then(
          [=](uint32_t finished) mutable {
            log::info(role, index, "left the job after finishing {} "
                      "closure(s); exiting 0", finished);
            if (auto& actor = self->state.opts.role_actor)
              caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
            rp.deliver(finished);
            stop(self, 0);
          },
          [=](caf::error& err) mutable {
            log::warn(role, index, "the coordinator did not let this worker "
                      "leave ({}); serving on",
                      self->system().render(err));
            rp.deliver(caf::make_error(errc::no_workers,
                                       self->system().render(err)));
          });
      return rp;
    },
  };
}

} // namespace

node_actor spawn_node(caf::actor_system& sys, node_options opts) {
  return sys.spawn(node_behavior, std::move(opts));
}

} // namespace actorps
