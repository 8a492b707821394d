#pragma once

// The actor system every actor test runs on (one fixture, shared):
// deterministic (CAF's test coordinator, caf-0.17-notes.md section 10:
// nothing runs until run()) or threaded (actorps' own scheduler). No receive
// ever hangs: on a deterministic system a reply must be queued already when
// the test asks for it; on a threaded one the test waits at most
// reply_timeout, then fails naming what it waited for. Actors given to
// keep() are stopped when the test ends.

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/after.hpp"
#include "caf/scheduler/test_coordinator.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "cluster/topology/local_cluster.hpp"

namespace actorps::test {

/// How long a test on a threaded system waits for one reply.
inline constexpr std::chrono::seconds reply_timeout{10};

struct actor_fixture {
  system_config cfg;
  caf::actor_system sys;
  /// The test coordinator of a deterministic system, else null.
  caf::scheduler::test_coordinator* sched = nullptr;
  caf::scoped_actor self;
  std::vector<caf::actor> kept;

  static system_config& prep(system_config& c, bool deterministic) {
    if (deterministic)
      c.set("scheduler.policy", caf::atom("testing"));
    return c;
  }

  explicit actor_fixture(bool deterministic)
    : cfg(4),
      sys(prep(cfg, deterministic)),
      sched(deterministic ? dynamic_cast<caf::scheduler::test_coordinator*>(
                              &sys.scheduler())
                          : nullptr),
      self(sys) {
    // nop
  }

  ~actor_fixture() {
    run();
    for (auto& a : kept)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    run();
  }

  actor_fixture(const actor_fixture&) = delete;
  actor_fixture& operator=(const actor_fixture&) = delete;

  /// Runs every queued message (deterministic; nothing on a threaded system).
  void run() {
    if (sched != nullptr)
      sched->run();
  }

  /// Stops `x` when the test ends; returns it.
  template <class Handle>
  Handle keep(Handle x) {
    kept.push_back(caf::actor_cast<caf::actor>(x));
    return x;
  }

  /// How long a receive may wait here.
  std::chrono::milliseconds patience() const {
    return sched != nullptr ? std::chrono::milliseconds{0}
                            : std::chrono::milliseconds{reply_timeout};
  }

  /// The reply queued for the test (or, threaded, the next within
  /// reply_timeout), which must be a T.
  template <class T>
  T reply() {
    T result{};
    self->receive([&](T& x) { result = std::move(x); },
                  [&](caf::error& err) {
                    FAIL("expected a reply, got " << sys.render(err));
                  },
                  caf::after(patience()) >> [&] {
                    FAIL("expected a reply, got nothing within "
                         << patience().count() << " ms");
                  });
    return result;
  }

  /// The error queued for the test (as reply), where a T would be a reply.
  template <class T>
  caf::error refusal() {
    caf::error result;
    self->receive([&](T&) { FAIL("expected an error, got a reply"); },
                  [&](caf::error& err) { result = std::move(err); },
                  caf::after(patience()) >> [&] {
                    FAIL("expected an error, got nothing within "
                         << patience().count() << " ms");
                  });
    return result;
  }

  /// Sends `xs` to `dest`, runs it and returns its reply (a T).
  template <class T, class Handle, class... Ts>
  T ask(const Handle& dest, Ts&&... xs) {
    self->send(dest, std::forward<Ts>(xs)...);
    run();
    return reply<T>();
  }

  /// Sends `xs` to `dest`, runs it and returns its error (a T reply fails).
  template <class T, class Handle, class... Ts>
  caf::error refusal(const Handle& dest, Ts&&... xs) {
    self->send(dest, std::forward<Ts>(xs)...);
    run();
    return refusal<T>();
  }

  /// Polls `pred` for up to reply_timeout (for events on other threads).
  template <class Predicate>
  static bool eventually(Predicate pred) {
    auto deadline = std::chrono::steady_clock::now() + reply_timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > deadline)
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
};

} // namespace actorps::test
