#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <memory>
#include <vector>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "actors/messages.hpp"
#include "core/data_range.hpp"
#include "actors/ps_actor.hpp"
#include "models/step_function.hpp"

namespace actorps {

class batch_source;
class model;
struct placement;

/// A worker: runs scheduled closures against the parameter servers, one at a
/// time (closures that arrive while one runs wait in the worker's queue).
using worker_actor = caf::typed_actor<
  // Runs the step function `function` (models/step_function.hpp) as one
  // closure. "train_step": the next minibatch of this worker's dataset -> the
  // model names the table keys it needs -> pull the dense region and those
  // rows from every server (in parallel) -> forward/backward -> push the
  // dense and row gradients to every server (in parallel), each push
  // carrying the clock its values were read at. Replies when every push is
  // acknowledged.
  // Errors: errc::unknown_function; errc::step_failed (the model or the
  // dataset threw: the message names the worker and what it said; the
  // worker stays and nothing was pushed); errc::cancelled (cancelled before
  // its push); errc::ps_lost once a parameter server is down or unreachable
  // (the worker monitors each one; every later closure fails the same way);
  // any error of a pull or push (the first one), e.g. errc::shape_mismatch.
  caf::replies_to<run_atom, closure_request>::with<step_result>,
  // Cancels closure `id`: if it is queued it fails with errc::cancelled at
  // once; if it is running it fails so at its next message boundary (before
  // its push is sent, so its gradient is never applied; a push already sent
  // completes).
  caf::reacts_to<cancel_atom, uint64_t>,
  // Moves the worker's data source to (epoch, offset) (a restored
  // checkpoint). Replies with true.
  // Errors: errc::shape_mismatch if the offset is past the worker's shard.
  caf::replies_to<seek_atom, uint64_t, uint64_t>::with<bool>,
  // Internal: try to reconnect to lost server `index` (a helper thread
  // dials it).
  caf::reacts_to<redial_atom, uint32_t>,
  // Internal: the outcome of a reconnect to server `index`: its actor and
  // incarnation, or a null actor if it could not be reached.
  caf::reacts_to<dialed_atom, uint32_t, caf::strong_actor_ptr,
                 uint64_t>,
  // Liveness probe. Replies with the worker's index.
  caf::replies_to<ping_atom>::with<uint32_t>,
  // Where replica groups are served now (after a failover or a recovery):
  // the worker sends each group's pulls and pushes to the route's server at
  // the route's view from now on (a route older than the one it knows is
  // ignored). Across processes it dials the server directly (redial).
  caf::reacts_to<route_atom, std::vector<group_route>>,
  // Internal: the wire format a measurement of the links chose
  // (worker_options::choose_push_format / choose_pull_format), used from
  // the next step on.
  caf::reacts_to<formats_atom, std::string>>;

/// What a worker is spawned with.
struct worker_options {
  uint32_t index = 0;
  /// Incremented each time the worker of this index is respawned.
  uint32_t incarnation = 0;
  std::shared_ptr<const model> net;
  /// This worker's dataset (from dataset_fn); used by this worker only
  /// (a respawned worker goes on with the same source).
  std::shared_ptr<batch_source> data;
  /// Reads the examples of closures that carry a data_range (a stream's
  /// parts); null: such closures fail ("this worker reads no data ranges").
  std::shared_ptr<range_reader> ranges;
  std::shared_ptr<const placement> layout;
  /// The server of replica group g (its primary): the group holds the
  /// shards with shard_info::ps == g.
  std::vector<ps_actor> servers;
  /// The view of each group the worker knows (empty: all 0), and the index
  /// of the server serving it (empty: group g on server g).
  std::vector<uint64_t> views;
  std::vector<uint32_t> server_index;
  /// Across processes: connects to server `index` directly and returns it
  /// with its incarnation (blocking, a few milliseconds), for a recovered
  /// server (instead of using the handle the dispatcher's route carries,
  /// which CAF would route through the chief's node) and to reconnect to a
  /// server the worker lost while the server lives on (e.g. after the
  /// worker was paused). Throws when it cannot.
  std::function<std::pair<ps_actor, uint64_t>(uint32_t index)> redial;
  /// Across processes: how many of this process's data channels move
  /// their frames through shared memory (first) and over TCP (second) now
  /// (cluster/net/data_link.hpp, data_link_census); reported with each
  /// step (step_result::links_shm, links_tcp). Unset in one process.
  std::function<std::pair<uint32_t, uint32_t>()> link_transports;
  /// Across processes: the incarnation of each server (by server index) as
  /// joined. A server
  /// the worker lost is reconnected to by the worker itself only if it is
  /// still this incarnation (paused or cut off, state intact); a restarted
  /// one is used only once the coordinator has restored it and says so.
  std::vector<uint64_t> server_incarnations;
  /// The wire format of the dense gradient in pushes (core/wire_format.hpp);
  /// null: plain floats (fp32). A format with error feedback (topk) keeps
  /// one residual per group in the worker.
  std::shared_ptr<const wire_format> push_format;
  /// The push format of particular dense variables (by name), instead of
  /// push_format (cluster.variable_formats; see core/wire_plan.hpp).
  std::map<std::string, std::shared_ptr<const wire_format>> variable_formats;
  /// The wire format the servers send dense values in (bf16, fp16); null:
  /// plain floats.
  std::shared_ptr<const wire_format> pull_format;
  /// Holds the pulled values only from a step's start to its compute, and
  /// the gradient only from its compute to the step's end, instead of both
  /// for the worker's life: for a thousand simulated workers in one process
  /// (cluster/sim/simulator.hpp), at the cost of two allocations per step.
  bool lean = false;
  /// Overlap (async only): with each push the worker also sends the next
  /// step's pull of dense values, so the push goes out on its uplink while
  /// the values come in on its downlink. The next closure takes them (at
  /// most one step old, so at most one step of extra staleness, counted as
  /// such by the servers); rows are still pulled when it starts.
  bool overlap = false;
  /// Prefetch (async only; not with overlap; cluster.prefetch): right after
  /// each push the worker sends the next step's pull of dense values, which
  /// comes behind the push on the connection and in the server's mailbox
  /// and so sees it; the next closure takes the values as with overlap,
  /// without waiting a round trip after its start. (Under layer pushes a
  /// pull is urgent and may pass the push; the servers count staleness by
  /// clocks either way.)
  bool prefetch = false;
  /// Layer pushes (async only; cluster.layer_pushes): the worker pushes
  /// each layer's gradient to its servers as soon as backpropagation
  /// produces it (model_workspace::gradient_ready), last layer first, as
  /// pieces of the step's push (actors/ps_pieces.hpp); the first layer's
  /// run and the table rows go with the last piece, after the compute.
  /// Pulls are sent as urgent messages, which a server takes ahead of the
  /// pushes in its mailbox: to servers in this process and through the
  /// data channel, not across BASP (see request_pull in worker_step.cpp).
  /// After Jayarajan et al., "Priority-based Parameter Propagation", SysML
  /// 2019 (values first, in the order the next forward pass needs them);
  /// here by message, not by slices of a pull.
  bool layer_pushes = false;
  /// Priority pulls (cluster.priority_pulls): a step pulls each group's
  /// dense values in slices, one per forward stage of the model
  /// (model::forward_stages), first layers first, and runs each stage as
  /// soon as the values it reads are in, while the later slices are still
  /// on their way (Jayarajan et al., "Priority-based Parameter
  /// Propagation", SysML 2019). Values pulled ahead (overlap, prefetch)
  /// come whole; a model or step function without stages pulls whole.
  bool priority_pulls = false;
  /// Priority pulls: a slice below this many floats goes with the one
  /// before it (the first with the one after): a message of its own costs
  /// both ends more CPU than the microseconds of transfer (16 KiB: 0.13 ms
  /// at 1 Gbit/s) by which it could let a stage start earlier.
  /// Fashion-MNIST's MLP: its last layer's 645 floats per server go with
  /// the layer before, so a pull is two messages, not three.
  uint64_t min_slice_floats = 4096;
  /// cluster.push_format / pull_format "auto": at its start, the worker
  /// times a pull of every group's values in fp32 and in bf16 from a helper
  /// thread (actors/format_probe.hpp), logs both, and from then on pushes
  /// and/or pulls in the faster (fp32 until then).
  bool choose_push_format = false;
  bool choose_pull_format = false;
};

/// Spawns a worker; its behaviour lives in worker_actor.cpp.
worker_actor spawn_worker(caf::actor_system& sys, worker_options opts);

} // namespace actorps
