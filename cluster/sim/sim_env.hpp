#pragma once

// The deterministic actor system of a simulation: CAF's test
// scheduler, whose clock is the virtual one, and the loop that runs it.
// Every call runs on the thread that made the environment.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/after.hpp"
#include "caf/scheduler/test_coordinator.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "cluster/sim/sim_trace.hpp"
#include "cluster/job/system_config.hpp"
#include "core/error.hpp"

namespace actorps {

struct sim_env {
  system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  caf::scoped_actor self;

  static system_config& prep(system_config& c) {
    c.set("scheduler.policy", caf::atom("testing"));
    return c;
  }

  /// Every actor of the simulation: stopped by the destructor, also when
  /// the simulation throws (a test scheduler has no threads, and the actor
  /// system's destructor would wait for live actors forever).
  std::vector<caf::actor> actors;
  /// Checked after every step (the replay's mismatch).
  const sim_trace* trace = nullptr;

  sim_env()
    : cfg(1),
      sys(prep(cfg)),
      sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())),
      self(sys) {
    // nop
  }

  sim_env(const sim_env&) = delete;
  sim_env& operator=(const sim_env&) = delete;

  ~sim_env() {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::kill);
    sched.run();
  }

  template <class Handle>
  Handle keep(Handle x) {
    actors.push_back(caf::actor_cast<caf::actor>(x));
    return x;
  }

  /// Runs messages, and moves virtual time to the next timeout whenever
  /// none is left, until `done()`. `between()` runs whenever the messages
  /// of a moment are done (before `done()` is asked): it may send more.
  /// @throws runtime_failure if nothing is left to run before that, or a
  ///         replay differs.
  template <class Predicate, class Between>
  void run_until(Predicate done, const char* waiting_for, Between between) {
    for (;;) {
      sched.run();
      if (trace != nullptr && !trace->mismatch().empty())
        throw runtime_failure(trace->mismatch());
      if (between())
        continue; // it sent something: run that first
      if (done())
        return;
      if (!sched.trigger_timeout())
        throw runtime_failure(fmt::format(
          "simulate: stalled waiting for {}: no message and no timer left",
          waiting_for));
    }
  }

  template <class Predicate>
  void run_until(Predicate done, const char* waiting_for) {
    run_until(std::move(done), waiting_for, [] { return false; });
  }

  /// Sends `xs` to `dest`, runs the system and returns its reply (a T).
  /// @throws runtime_failure "`what`: <error>" if it refuses or does not
  ///         answer before the system is idle.
  template <class T, class Handle, class... Ts>
  T ask(const Handle& dest, const std::string& what, Ts&&... xs) {
    self->send(dest, std::forward<Ts>(xs)...);
    sched.run();
    T result{};
    std::string failure;
    self->receive([&](T& x) { result = std::move(x); },
                  [&](caf::error& err) { failure = sys.render(err); },
                  caf::after(std::chrono::seconds(0)) >> [&] {
                    failure = "no answer";
                  });
    if (!failure.empty())
      throw runtime_failure(fmt::format("simulate: {}: {}", what, failure));
    return result;
  }
};

} // namespace actorps
