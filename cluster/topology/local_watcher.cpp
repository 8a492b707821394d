#include "cluster/topology/local_watcher.hpp"

#include <map>

#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"

#include "actors/messages.hpp"
#include "core/log.hpp"
#include "core/seconds.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

struct role_state {
  steady_clock::time_point last_answer;
  bool suspected = false;
  bool silent = false;
};

struct local_watcher_state {
  std::map<std::string, role_state> roles;
  steady_clock::time_point last_tick;
  static constexpr const char* name = "local-watcher";
};

using watcher_ptr = caf::stateful_actor<local_watcher_state>*;

caf::behavior local_watcher(watcher_ptr self, watched_roles roles,
                            std::chrono::milliseconds interval,
                            std::chrono::milliseconds timeout) {
  self->delayed_send(self, interval, caf::tick_atom_v);
  return {
    [=](caf::tick_atom) {
      auto& st = self->state;
      auto now = steady_clock::now();
      if (st.last_tick != steady_clock::time_point{}
          && now - st.last_tick > timeout)
        for (auto& [name, r] : st.roles)
          r.last_answer = now; // our own silence, not theirs
      st.last_tick = now;
      for (auto& [name, actor] : roles()) {
        auto [i, fresh] = st.roles.try_emplace(name);
        auto& r = i->second;
        if (fresh)
          r.last_answer = now;
        auto silent = now - r.last_answer;
        if (silent > timeout && !r.silent) {
          r.silent = true;
          log::warn("coordinator", -1,
                    "{} has not answered for {:.1f} s (heartbeat timeout "
                    "{:.1f} s)",
                    name, seconds(silent), seconds(timeout));
        } else if (silent > timeout / 2 && !r.suspected) {
          r.suspected = true;
          log::warn("coordinator", -1, "{} silent for {:.1f} s: suspected",
                    name, seconds(silent));
        }
        auto who = name;
        self->request(actor, timeout, ping_atom_v)
          .then(
            [=](uint32_t) {
              auto& r = self->state.roles[who];
              auto now = steady_clock::now();
              if (r.suspected || r.silent)
                log::info("coordinator", -1, "{} answers again after {:.1f} s",
                          who, seconds(now - r.last_answer));
              r = role_state{now, false, false};
            },
            [](caf::error&) {});
      }
      self->delayed_send(self, interval, caf::tick_atom_v);
    },
  };
}

} // namespace

caf::actor spawn_local_watcher(caf::actor_system& sys, watched_roles roles,
                               std::chrono::milliseconds interval,
                               std::chrono::milliseconds timeout) {
  return sys.spawn<caf::hidden>(local_watcher, std::move(roles), interval,
                                timeout);
}

} // namespace actorps
