#pragma once

// The simulated network in front of a parameter server: a proxy
// that the workers of a simulation talk to instead of the server. Each pull
// and push is held for the time the network model gives it (the worker's
// link, the server's link, latency), then reaches the server, whose reply
// is held again on its way back; a push also leaves the worker only after
// its step's compute time (the worker computes in zero virtual time). Every
// delivery is an event of the trace. Everything else (create, stats, ...)
// passes at once. Runs under CAF's deterministic test scheduler only, whose
// clock is the virtual one.

#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "caf/actor_clock.hpp"
#include "caf/fwd.hpp"
#include "caf/typed_actor.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/sim/sim_host.hpp"
#include "cluster/sim/sim_model.hpp"
#include "cluster/sim/sim_trace.hpp"

namespace actorps {

struct placement;

/// What every link proxy of one simulation shares (one thread: the test
/// scheduler's).
struct sim_world {
  sim_world(network_model net, compute_model compute, sim_trace& trace,
            uint32_t workers, uint32_t servers, uint32_t per_machine = 1);

  network_model net;
  compute_model compute;
  /// One host shared by all nodes (off unless asked for).
  host_model host{host_spec{}, 0};
  sim_trace& trace;
  uint32_t workers;
  /// Virtual time 0 on CAF's clock.
  caf::actor_clock::time_point origin;
  /// Workers per machine (`--workers-per-machine`): workers m*K .. m*K+K-1
  /// share machine m's link (the link of node m*K in `net`) and its one
  /// compute unit, which runs one step at a time, first come first served.
  /// K tasks in flight per machine: Li et al.'s bounded delay tau = K - 1
  /// (OSDI 2014, Sec. 4.2 and Fig. 13).
  uint32_t per_machine = 1;
  /// Per machine: when its compute unit is free (ns).
  std::vector<sim_time> machine_free;
  /// Per worker: compute time charged so far (ns), the closure charged
  /// last (a closure's pushes to several servers charge it once) and when
  /// that closure's step started computing.
  std::vector<sim_time> compute_ns;
  std::vector<uint64_t> charged;
  std::vector<sim_time> step_start;
  /// Per server: pulls and pushes that reached it.
  std::vector<uint64_t> pulls;
  std::vector<uint64_t> pushes;

  /// --timing-only (cluster/sim/sim_timing.hpp): per replica group (a
  /// server's own group has its index), the bytes the real model's dense
  /// values take in a pull reply and a push, charged instead of the
  /// stand-in's (empty: charge what the messages hold).
  std::vector<uint64_t> dense_pull_bytes;
  std::vector<uint64_t> dense_push_bytes;

  /// Lazy pull replies (async mode only, where a server answers a pull at
  /// once): a reply takes its place in the server's link queue when the
  /// pull arrives, but the server reads its values only when the reply's
  /// transmission starts, so that a queue of a thousand replies holds no
  /// values (the simulator's memory aim). Needs the reply's size beforehand:
  /// `reply_dense_bytes` (per server, the dense values in the pull format)
  /// and the tables' row widths from `layout`. A reply of another size than
  /// estimated is counted in `estimate_misses` (a bug: the simulation
  /// fails with it). `reply_dense_bytes` is per replica group.
  bool lazy_replies = false;
  std::vector<uint64_t> reply_dense_bytes;
  std::shared_ptr<const placement> layout;
  uint64_t estimate_misses = 0;

  // -- faults (cluster/sim/sim_cluster.hpp) ----------------------------------------

  /// Per node (workers, then servers): the stop in effect, [from, until)
  /// in virtual ns (until 0: none). A stopped node neither computes, sends
  /// nor takes in messages, as a process under SIGSTOP.
  std::vector<std::pair<sim_time, sim_time>> stopped;
  /// Per worker: its incarnation, bumped when it is killed. A push the
  /// killed worker had not sent yet (still computing) dies with it.
  std::vector<uint64_t> lives;
  /// Shares of the workers' pulls and pushes that are dropped (the worker
  /// sends them again after the retry timeout, 200 ms) and delayed (by
  /// `delay_ns` on the way to the server).
  double drop = 0;
  double delay = 0;
  sim_time delay_ns = 0;
  /// Draws for drop and delay: seeded by the simulation's seed.
  uint64_t chaos_state = 0;
  uint64_t dropped = 0;
  uint64_t delayed = 0;

  /// The virtual time now, in ns.
  sim_time now(caf::actor_system& sys) const;

  /// The network node whose link worker `worker` uses: its machine's.
  uint32_t link_of(uint32_t worker) const {
    return worker / per_machine * per_machine;
  }

  /// The earliest time at or after `t` at which node `n` is not stopped.
  sim_time awake(uint32_t n, sim_time t) const;

  /// When a step of `duration` ns that worker `w` starts at `t` ends: later
  /// by the part of a stop that falls into it.
  sim_time step_end(uint32_t w, sim_time t, sim_time duration) const;

  /// How a pull or push fares on its way to a server under the drop and
  /// delay faults: 0 passes, 1 is dropped, 2 is delayed. Draws from
  /// chaos_state (a deterministic sequence) only while a fault is on.
  int chaos();
};

/// A parameter server as the workers of a simulation see it.
using sim_link_actor = ps_actor::extend<
  // Internal: held message `n` goes on now.
  caf::reacts_to<release_atom, uint64_t>>;

/// Puts the simulated network in front of parameter server `index`.
sim_link_actor spawn_sim_link(caf::actor_system& sys, ps_actor server,
                              uint32_t index, std::shared_ptr<sim_world> world);

} // namespace actorps
