#pragma once

// What the dispatcher's tests share (dispatcher_test.cpp,
// dispatcher_failure_test.cpp): fake workers whose behaviour each test
// scripts, a fake parameter server, and fixtures on the shared actor system
// of test/actor_fixture.hpp (deterministic, or threaded with bounded waits).

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/scheduler/test_coordinator.hpp"
#include "caf/send.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/cluster_coordinator.hpp"
#include "actors/dispatcher_actor.hpp"
#include "test/actor_fixture.hpp"
#include "core/error.hpp"

namespace actorps::test::dispatch {

using namespace std::chrono_literals;

// -- fake workers ---------------------------------------------------------------

/// What a fake worker does with a closure.
enum class action {
  reply,                /// replies with a value at once
  fail,                 /// replies with script::fail_code at once
  hold,                 /// keeps it until put_atom; honours cancel_atom
  hold_ignoring_cancel, /// keeps it until put_atom (its push was sent)
};

/// Shared by the test and its fake workers (locked: the threaded tests
/// read it while workers write it).
struct script {
  std::mutex mtx;
  action fallback = action::reply;
  std::map<uint64_t, action> by_id;
  /// Workers that die (exit_reason::kill) on the next closure they get.
  std::set<uint32_t> die_next;
  errc fail_code = errc::step_failed;
  /// A worker that answers every closure with ps_lost for ps 0, as one whose
  /// link to that server is down (-1: none).
  int64_t fail_worker = -1;
  /// (worker, closure) of every closure a worker got, and every cancel.
  std::vector<std::pair<uint32_t, uint64_t>> runs;
  std::vector<std::pair<uint32_t, uint64_t>> cancels;

  void set(uint64_t id, action a) {
    std::lock_guard<std::mutex> guard{mtx};
    by_id[id] = a;
  }

  size_t runs_of(uint64_t id) {
    std::lock_guard<std::mutex> guard{mtx};
    return std::count_if(runs.begin(), runs.end(),
                         [&](auto& r) { return r.second == id; });
  }

  size_t run_count() {
    std::lock_guard<std::mutex> guard{mtx};
    return runs.size();
  }

  size_t runs_by(uint32_t worker) {
    std::lock_guard<std::mutex> guard{mtx};
    return std::count_if(runs.begin(), runs.end(),
                         [&](auto& r) { return r.first == worker; });
  }
};

/// A worker with one more message, for the test: answers held closure `id`
/// with `err`, or with a value if `err` is empty.
using fake_worker_actor = worker_actor::extend<
  caf::reacts_to<caf::put_atom, uint64_t, caf::error>>;

struct held_closure {
  caf::typed_response_promise<step_result> promise;
  bool ignore_cancel = false;
  data_range range;
};

struct fake_worker_state {
  std::map<uint64_t, held_closure> held;
  static constexpr const char* name = "fake-worker";
};

/// The value of closure `id` on `worker`: 8 samples, or, for a closure
/// that carries a data range, the range's examples and its end as the
/// data position (as a real worker reports them).
inline step_result value_of(uint32_t worker, uint64_t id,
                            const data_range& range = {}) {
  step_result r;
  r.closure = id;
  r.worker = worker;
  r.loss = 1.0 / double(id);
  r.samples = 8;
  if (!range.empty()) {
    r.samples = range.rows();
    r.data_epoch = range.part;
    r.data_offset = range.end;
  }
  return r;
}

inline fake_worker_actor::behavior_type
fake_worker(fake_worker_actor::stateful_pointer<fake_worker_state> self,
            uint32_t index, std::shared_ptr<script> sc) {
  return {
    [=](run_atom, closure_request& req) -> caf::result<step_result> {
      action act;
      {
        std::lock_guard<std::mutex> guard{sc->mtx};
        sc->runs.emplace_back(index, req.id);
        if (sc->die_next.erase(index) > 0) {
          auto rp = self->make_response_promise<step_result>();
          self->quit(caf::exit_reason::kill);
          return rp;
        }
        auto i = sc->by_id.find(req.id);
        act = i != sc->by_id.end() ? i->second : sc->fallback;
        if (sc->fail_worker == int64_t{index})
          return caf::make_error(errc::ps_lost, "ps", uint32_t{0},
                                 "link down");
      }
      switch (act) {
        case action::reply:
          return value_of(index, req.id, req.range);
        case action::fail:
          return caf::make_error(sc->fail_code,
                                 "worker " + std::to_string(index)
                                   + ": the step threw: bad batch");
        default: {
          auto rp = self->make_response_promise<step_result>();
          self->state.held.emplace(
            req.id,
            held_closure{rp, act == action::hold_ignoring_cancel, req.range});
          return rp;
        }
      }
    },
    [=](cancel_atom, uint64_t id) {
      {
        std::lock_guard<std::mutex> guard{sc->mtx};
        sc->cancels.emplace_back(index, id);
      }
      auto i = self->state.held.find(id);
      if (i != self->state.held.end() && !i->second.ignore_cancel) {
        i->second.promise.deliver(
          caf::make_error(errc::cancelled, "closure", id));
        self->state.held.erase(i);
      }
    },
    [=](caf::put_atom, uint64_t id, caf::error& err) {
      auto i = self->state.held.find(id);
      if (i == self->state.held.end())
        return;
      if (err)
        i->second.promise.deliver(err);
      else
        i->second.promise.deliver(value_of(index, id, i->second.range));
      self->state.held.erase(i);
    },
    [=](seek_atom, uint64_t, uint64_t) { return true; },
    [=](redial_atom, uint32_t) {},
    [=](dialed_atom, uint32_t, caf::strong_actor_ptr&, uint64_t) {},
    [=](ping_atom) { return index; },
    [=](route_atom, std::vector<group_route>&) {},
    [=](formats_atom, std::string&) {},
  };
}

/// A parameter server that answers everything with nothing (only its loss
/// matters here).
inline ps_actor::behavior_type fake_ps(ps_actor::pointer) {
  return {
    [=](create_atom, create_shard&) { return uint64_t{0}; },
    [=](pull_atom, pull_request&) { return pull_reply{}; },
    [=](push_atom, push_request&) { return uint64_t{0}; },
    [=](replicate_atom, replicate_request&) { return uint64_t{0}; },
    [=](configure_atom, replica_config&) { return true; },
    [=](install_atom, uint32_t, uint64_t, ps_snapshot&) { return uint64_t{0}; },
    [=](stats_atom, uint32_t) { return ps_stats{}; },
    [=](save_atom, uint32_t) { return ps_snapshot{}; },
    [=](save_atom, uint32_t, uint64_t, uint64_t) { return ps_snapshot{}; },
    [=](restore_atom, uint32_t, ps_snapshot&) { return uint64_t{0}; },
    [=](prune_atom, uint64_t, uint64_t) {},
    [=](ping_atom) { return uint32_t{0}; },
    [=](caf::flush_atom, uint32_t, uint64_t) {},
    [=](handoff_atom, uint32_t, uint64_t) { return uint64_t{0}; },
    [=](drop_atom, uint32_t, uint64_t) { return true; },
    [=](caf::timeout_atom, uint32_t, uint64_t) {},
  };
}

// -- fixtures -------------------------------------------------------------------

/// An actor system (test/actor_fixture.hpp) with fake workers; stops every
/// actor it knows at the end.
struct fixture : test::actor_fixture {
  std::shared_ptr<script> sc = std::make_shared<script>();
  std::vector<fake_worker_actor> fakes;

  explicit fixture(bool deterministic) : actor_fixture(deterministic) {
    // nop
  }

  fake_worker_actor add_worker(uint32_t index) {
    auto w = keep(sys.spawn(fake_worker, index, sc));
    fakes.push_back(w);
    return w;
  }

  std::vector<worker_actor> add_workers(uint32_t n) {
    std::vector<worker_actor> result;
    for (uint32_t i = 0; i < n; ++i)
      result.emplace_back(add_worker(i));
    return result;
  }

  dispatcher_actor
  add_dispatcher(std::vector<worker_actor> workers,
                 std::chrono::milliseconds grace = 0ms,
                 worker_respawn respawn = nullptr, uint32_t budget = 0,
                 std::vector<ps_actor> servers = {},
                 ps_recovery recover = {}) {
    return keep(spawn_dispatcher(sys, std::move(workers), std::move(respawn),
                                 budget, grace, std::move(servers),
                                 std::move(recover)));
  }

  /// A dispatcher over two workers and one fake server that is never lost
  /// (its recovery would throw), `places` closures per worker; then
  /// worker 0 answers every closure with ps_lost for that server (its own
  /// link is down) while `n` closures are scheduled and run.
  std::vector<remote_value>
  run_with_worker_cut_off(std::unique_ptr<cluster_coordinator>& coord,
                          uint32_t places, int n) {
    auto workers = add_workers(2);
    ps_actor server = sys.spawn(fake_ps);
    keep(server);
    ps_recovery recover;
    recover.bring_back = [](uint32_t) -> std::pair<ps_actor,
                                                   std::vector<uint32_t>> {
      throw std::runtime_error("not used");
    };
    auto dispatcher = keep(spawn_dispatcher(sys, std::move(workers), nullptr,
                                            0, 60s, {server},
                                            std::move(recover), places));
    coord = std::make_unique<cluster_coordinator>(sys, dispatcher, 64);
    run_all();
    sc->fail_code = errc::ps_lost;
    sc->fail_worker = 0;
    std::vector<remote_value> rvs;
    for (int i = 0; i < n; ++i)
      rvs.push_back(coord->schedule("train_step"));
    run_all();
    return rvs;
  }

  /// Runs what is queued (deterministic fixtures; the threaded ones run by
  /// themselves).
  virtual void run_all() {
    // nop
  }
};

struct deterministic : fixture {
  caf::scheduler::test_coordinator& sched;

  deterministic() : fixture(true), sched(*fixture::sched) {
    // nop
  }

  void run_all() override {
    sched.run();
  }
};

struct threaded : fixture {
  threaded() : fixture(false) {
    // nop
  }
};

inline bool is(const remote_value& rv, errc code) {
  return rv.done() && rv.error() == code;
}

} // namespace actorps::test::dispatch
