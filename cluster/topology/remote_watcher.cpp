#include "cluster/topology/remote_watcher.hpp"

#include <mutex>

#include <fmt/format.h>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/blocking_actor.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"

#include "actors/dispatcher_actor.hpp"
#include "cluster/net/handshake.hpp"
#include "cluster/net/tls.hpp"
#include "cluster/topology/remote_cluster.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/seconds.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

struct watched_node {
  caf::actor node;
  std::string name;
  std::string role;
  uint32_t index = 0;
  steady_clock::time_point last_answer;
  bool suspected = false;
  bool lost = false;
  /// Left gracefully (or leaving): not watched, not lost, not rejoined.
  bool left = false;
};

struct watcher_state {
  std::vector<watched_node> nodes;
  dispatcher_actor dispatcher;
  steady_clock::time_point last_tick;
  bool closing = false;
  static constexpr const char* name = "watcher";
};

/// Tries once (for up to `timeout`) to join member `m` again; tells `chief`
/// (the watcher) the outcome as (dialed, slot, node, role actor,
/// incarnation) or (dialed, slot, error text).
void rejoin(caf::blocking_actor* self, cluster_member m, handshake mine,
            caf::actor chief, std::chrono::milliseconds timeout,
            uint64_t slot) {
  try {
    auto joined = join_members(self->system(), {m}, mine, chief, timeout);
    self->send(chief, dialed_atom_v, slot, joined[0].node,
               joined[0].welcome.role_actor,
               joined[0].welcome.node.incarnation);
  } catch (const std::exception& e) {
    self->send(chief, dialed_atom_v, slot, std::string{e.what()});
  }
}

using watcher_actor = caf::stateful_actor<watcher_state>;

void declare_lost(watcher_actor* self, watched_node& n, const std::string& why) {
  auto& st = self->state;
  if (n.lost || st.closing)
    return;
  n.lost = true;
  n.suspected = false;
  log::error("coordinator", -1, "lost {}: {}", n.name, why);
  if (!st.dispatcher)
    return;
  if (n.role == "worker")
    self->send(st.dispatcher, lost_atom_v, n.index);
  else
    self->send(st.dispatcher, ps_lost_atom_v, n.index);
}

caf::behavior watcher(watcher_actor* self, std::chrono::milliseconds interval,
                      std::chrono::milliseconds timeout,
                      std::vector<cluster_member> members, handshake mine,
                      std::shared_ptr<node_table> table) {
  auto try_rejoin = [=](uint64_t slot) {
    if (self->state.closing || slot >= members.size())
      return;
    self->spawn<caf::detached>(rejoin, members[slot], mine,
                               caf::actor{self}, std::chrono::seconds(2), slot);
  };
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (size_t i = 0; i < st.nodes.size(); ++i) {
      auto& n = st.nodes[i];
      if (n.node.address() != dm.source || n.lost || n.left)
        continue;
      declare_lost(self, n, self->system().render(dm.reason));
      if (n.role == "worker")
        try_rejoin(i);
    }
  });
  if (interval.count() > 0)
    self->delayed_send(self, interval, caf::tick_atom_v);
  return {
    [=](caf::actor& node, std::string& name, std::string& role,
        uint32_t index) {
      self->monitor(node);
      watched_node n;
      n.node = std::move(node);
      n.name = std::move(name);
      n.role = std::move(role);
      n.index = index;
      n.last_answer = steady_clock::now();
      self->state.nodes.push_back(std::move(n));
    },
    [=](dispatcher_actor& dispatcher) {
      self->state.dispatcher = std::move(dispatcher);
    },
    [=](caf::tick_atom) {
      auto& st = self->state;
      if (st.closing)
        return;
      auto now = steady_clock::now();
      if (st.last_tick != steady_clock::time_point{}
          && now - st.last_tick > timeout) {
        log::warn("coordinator", -1,
                  "the coordinator did not run for {:.1f} s (paused?); the "
                  "silence of its peers is not counted against them",
                  seconds(now - st.last_tick));
        for (auto& n : st.nodes)
          n.last_answer = now;
      }
      st.last_tick = now;
      for (size_t i = 0; i < st.nodes.size(); ++i) {
        auto& n = st.nodes[i];
        if (n.lost || n.left)
          continue;
        auto silent = now - n.last_answer;
        if (silent > timeout) {
          declare_lost(self, n,
                       fmt::format("no answer for {:.1f} s", seconds(silent)));
          if (n.role == "worker")
            try_rejoin(i);
          continue;
        }
        if (silent > timeout / 2 && !n.suspected) {
          n.suspected = true;
          log::warn("coordinator", -1,
                    "{} silent for {:.1f} s: suspected (lost after {:.1f} s)",
                    n.name, seconds(silent), seconds(timeout));
        }
        self->request(n.node, timeout, ping_atom_v)
          .then(
            [=](uint32_t) {
              auto& n = self->state.nodes[i];
              auto now = steady_clock::now();
              if (n.suspected && !n.lost)
                log::info("coordinator", -1, "{} answers again after {:.1f} s",
                          n.name, seconds(now - n.last_answer));
              n.suspected = false;
              n.last_answer = now;
            },
            [](caf::error&) {});
      }
      self->delayed_send(self, interval, caf::tick_atom_v);
    },
    [=](dialed_atom, uint64_t slot, caf::actor& node,
        caf::strong_actor_ptr& role_actor, uint64_t incarnation) {
      auto& st = self->state;
      if (st.closing || slot >= st.nodes.size() || !st.nodes[slot].lost)
        return;
      auto& n = st.nodes[slot];
      n.node = node;
      n.lost = false;
      n.suspected = false;
      n.last_answer = steady_clock::now();
      self->monitor(node);
      bool restarted = false;
      {
        std::lock_guard<std::mutex> guard{table->mtx};
        table->nodes.at(slot) = node;
        restarted = table->incarnations.at(slot) != incarnation;
        table->incarnations.at(slot) = incarnation;
      }
      log::info("coordinator", -1, "{} joined again ({})", n.name,
                restarted ? "restarted: a new incarnation"
                          : "the same incarnation: it was paused or cut off");
      // A ps goes back to the dispatcher from the recovery that joined it.
      if (st.dispatcher && n.role == "worker")
        self->send(st.dispatcher, replace_atom_v, n.index,
                   caf::actor_cast<worker_actor>(role_actor), restarted);
    },
    [=](dialed_atom, uint64_t slot, std::string& error) {
      if (self->state.closing)
        return;
      log::debug("coordinator", -1, "{} not back yet: {}",
                 members.at(slot).name(), error);
      self->delayed_send(self, std::chrono::milliseconds(500), rejoin_atom_v,
                         slot);
    },
    [=](rejoin_atom, uint64_t slot) { try_rejoin(slot); },
    [=](enlist_atom, handshake& peer, caf::actor& node,
        caf::actor& worker) -> caf::result<caf::actor> {
      auto& st = self->state;
      auto& sender = self->current_sender();
      if (!sender || sender->node() != self->node())
        return caf::make_error(errc::handshake_refused,
                               "a join goes through the join desk");
      if (st.closing || !st.dispatcher)
        return caf::make_error(errc::handshake_refused,
                               "the job is ending");
      for (auto& n : st.nodes)
        if (n.role == "worker" && n.index == peer.index && !n.lost)
          return caf::make_error(errc::handshake_refused,
                                 fmt::format("worker {} is in the job",
                                             peer.index));
      auto slot = st.nodes.size();
      watched_node n;
      n.node = node;
      n.name = "worker" + std::to_string(peer.index);
      n.role = "worker";
      n.index = peer.index;
      n.last_answer = steady_clock::now();
      self->monitor(node);
      st.nodes.push_back(std::move(n));
      {
        std::lock_guard<std::mutex> guard{table->mtx};
        table->nodes.resize(slot);
        table->incarnations.resize(slot);
        table->nodes.push_back(node);
        table->incarnations.push_back(peer.incarnation);
      }
      auto rp = self->make_response_promise<caf::actor>();
      self
        ->request(st.dispatcher, std::chrono::seconds(10), enlist_atom_v,
                  peer.index, caf::actor_cast<worker_actor>(worker))
        .then(
          [=](uint32_t in_service) mutable {
            log::info("coordinator", -1, "worker{} joined the running job; "
                      "{} worker(s) in service",
                      peer.index, in_service);
            rp.deliver(caf::actor{self});
          },
          [=](caf::error& err) mutable {
            self->state.nodes[slot].lost = true;
            rp.deliver(caf::make_error(errc::handshake_refused,
                                       self->system().render(err)));
          });
      return rp;
    },
    [=](leave_atom, uint32_t index) -> caf::result<uint32_t> {
      auto& st = self->state;
      auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
      bool local = self->current_sender()
                   && self->current_sender()->node() == self->node();
      // The newest node of that worker (one that joined again after it
      // was lost has a later entry).
      auto slot = st.nodes.size();
      for (size_t i = 0; i < st.nodes.size(); ++i)
        if (st.nodes[i].role == "worker" && st.nodes[i].index == index)
          slot = i;
      if (slot == st.nodes.size() || !st.dispatcher || st.closing)
        return caf::make_error(errc::no_workers, "worker", index,
                               "is not in this job");
      auto& n = st.nodes[slot];
      if (!local && n.node.address() != sender) {
        log::warn("coordinator", -1, "refused a leave of {} sent by another "
                  "actor than its node", n.name);
        return caf::make_error(errc::not_authorized, "only worker", index,
                               "may ask to leave");
      }
      if (n.lost || n.left)
        return caf::make_error(errc::no_workers, "worker", index,
                               n.left ? "is leaving already"
                                      : "is lost");
      n.left = true; // from now on its silence or its end is no loss
      log::info("coordinator", -1, "{} leaves ({})", n.name,
                local ? "asked by the coordinator" : "asked by the worker");
      auto rp = self->make_response_promise<uint32_t>();
      self->request(st.dispatcher, caf::infinite, leave_atom_v, index)
        .then(
          [=](uint32_t finished) mutable {
            auto& n = self->state.nodes[slot];
            n.lost = true;
            {
              std::lock_guard<std::mutex> guard{table->mtx};
              table->nodes.at(slot) = caf::actor{};
            }
            self->demonitor(n.node);
            if (local) // the node did not ask: it is told to end (status 0)
              self->send(n.node, shutdown_atom_v, int32_t{0});
            log::info("coordinator", -1, "{} left after finishing {} "
                      "closure(s); nothing re-executed", n.name, finished);
            rp.deliver(finished);
          },
          [=](caf::error& err) mutable {
            self->state.nodes[slot].left = false;
            rp.deliver(std::move(err));
          });
      return rp;
    },
    [=](shutdown_atom) { self->state.closing = true; },
    [=](ps_drain_atom, uint64_t slot) { // a drained server: it exits 0
      if (slot >= self->state.nodes.size())
        return;
      auto& n = self->state.nodes[slot];
      n.lost = true; // no longer watched
      self->demonitor(n.node);
      self->request(n.node, std::chrono::seconds(5), shutdown_atom_v,
                    int32_t{0}).then([](uint32_t) {}, [](caf::error&) {});
    },
  };
}

/// See spawn_join_desk.
caf::behavior join_desk(caf::event_based_actor* self, handshake mine,
                        caf::actor watcher) {
  return {
    [=](enlist_atom, handshake& peer, caf::actor& node,
        caf::actor& worker) -> caf::result<caf::actor> {
      auto refuse = [&](const std::string& why) {
        log::warn("coordinator", -1, "refused {} {} joining the job: {}",
                  peer.role, peer.index, why);
        return caf::make_error(errc::handshake_refused, why);
      };
      if (peer.role != "worker")
        return refuse("only a worker joins a running job");
      if (!node || !worker)
        return refuse("a join names the worker's node and worker actors");
      if (auto tls = node_tls())
        if (auto why = tls->redeem(peer.ticket,
                                   node_identity{peer.role, peer.index});
            !why.empty())
          return refuse(why);
      if (auto diffs = handshake_differences(mine, peer); !diffs.empty())
        return refuse(join_lines(diffs));
      auto rp = self->make_response_promise<caf::actor>();
      self->request(watcher, std::chrono::seconds(30), enlist_atom_v, peer,
                    node, worker)
        .then([=](caf::actor& w) mutable { rp.deliver(w); },
              [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
  };
}

} // namespace

caf::actor spawn_join_desk(caf::actor_system& sys, handshake mine,
                           caf::actor watcher) {
  return sys.spawn(join_desk, std::move(mine), std::move(watcher));
}

caf::actor spawn_remote_watcher(caf::actor_system& sys,
                                std::chrono::milliseconds interval,
                                std::chrono::milliseconds timeout,
                                std::vector<cluster_member> members,
                                handshake mine,
                                std::shared_ptr<node_table> table) {
  return sys.spawn(watcher, interval, timeout, std::move(members),
                   std::move(mine), std::move(table));
}

} // namespace actorps
