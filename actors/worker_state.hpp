#pragma once

// The worker actor's state and the functions its two source files share:
// worker_actor.cpp (closures, failures, routes) and worker_step.cpp (a
// step's pulls, compute and pushes). Internal to the worker.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/key_routes.hpp"
#include "actors/worker_actor.hpp"
#include "core/example_batch.hpp"
#include "core/table_lookup.hpp"
#include "core/wire_plan.hpp"
#include "models/model.hpp"

namespace actorps::detail {

using std::chrono::steady_clock;

inline double seconds_since(steady_clock::time_point t0) {
  return std::chrono::duration<double>(steady_clock::now() - t0).count();
}

/// A pull of one group's dense values for the next closure, sent with the
/// running closure's push (worker_options::overlap, ::prefetch).
struct pull_ahead {
  enum class state { none, in_flight, ready };
  state at = state::none;
  /// Its request; only the answer to the current token counts.
  uint64_t token = 0;
  /// The step (worker_state::seq) that took it as its own pull; 0: none.
  uint64_t taken_by = 0;
  steady_clock::time_point sent;
  /// Its replies: one (the region whole) or one per slice of the group
  /// (priority pulls: `sliced`); stored[i]: reply i arrived and no step
  /// took it yet; `left`: replies not arrived yet.
  std::vector<pull_reply> replies;
  std::vector<bool> stored;
  uint32_t left = 0;
  bool sliced = false;
};

/// A part of a pull with a group's dense values whole (or none), not a
/// slice.
constexpr uint32_t whole_region = UINT32_MAX;

/// Priority pulls: one slice [from, to) of a group's dense region that a
/// step pulls on its own; once it and the slices before it are in, the
/// group holds the values of the first `stages` forward stages.
struct pull_slice {
  uint64_t from = 0;
  uint64_t to = 0;
  uint32_t stages = 0;
};

/// One closure waiting to run or running.
struct job {
  closure_request req;
  caf::typed_response_promise<step_result> promise;
};

/// Where the running closure is.
enum class phase { idle, pulling, pushing };

/// What a worker keeps for one replica group and the server that serves it:
/// slot g is group g, whose server is worker_options::servers[g] at the
/// start and then whichever server a route names (after a failover one
/// server may serve two groups, and so sit in two slots). Every function
/// below that takes a group `p` indexes worker_state::slots with it.
struct server_slot {
  // -- who serves the group ---------------------------------------------------
  /// The group's server (worker_options::servers[g]; replaced by a route or
  /// a reconnect).
  ps_actor server;
  /// The group's view as the worker knows it, named in every request
  /// (worker_options::views[g], else 0; raised by routes).
  uint64_t view = 0;
  /// The index of the server serving the group, which redial connects to
  /// (worker_options::server_index[g], else g; changed by routes).
  uint32_t server_index = 0;
  // -- failures ---------------------------------------------------------------
  /// The server is lost (down or unreachable) and not yet reconnected or
  /// replaced.
  bool lost = false;
  /// A reconnect attempt is scheduled or running.
  bool reconnecting = false;
  /// Reconnect attempts made since the server was last reachable (the
  /// back-off's exponent).
  uint32_t reconnect_tries = 0;
  // -- the running step -------------------------------------------------------
  /// The oldest clock of the values the step took from the group (its
  /// push's read clock); UINT64_MAX until the first part arrives.
  uint64_t read_clock = 0;
  /// The token of the pull or push awaiting its answer (0: none). Only that
  /// request's answer counts: when a route moves the group to another
  /// server, what was in flight is sent there again, and a late answer of
  /// the old server (or none: a server that died with the request) must
  /// neither count twice nor be waited for.
  uint64_t in_flight = 0;
  /// The requests of the token in_flight awaiting their answer (a push in
  /// pieces sends several), and when its first was sent (for the log line
  /// of a request sent again after a move).
  uint32_t outstanding = 0;
  std::chrono::steady_clock::time_point in_flight_since;
  /// Layer pushes: the region offset from which pieces were pushed during
  /// the compute (the region's size: none).
  uint64_t sent_from = 0;
  /// The runs of the region pushed by the step, as (from, to), sent again
  /// whole when the group moves to a new server.
  std::vector<std::pair<uint64_t, uint64_t>> runs_sent;
  // -- push formats -----------------------------------------------------------
  /// The running closure's encoded gradient, sent again as it is (encoding
  /// again would count a topk residual twice), and whether it is the
  /// running closure's (encoded_for_seq).
  std::vector<encoded_part> encoded;
  bool encoded_for_seq = false;
  /// The error-feedback residual (topk): the region's size in floats once
  /// a format that keeps one encoded the group's gradient, else empty.
  std::vector<float> residual;
  // -- priority pulls (worker_options::priority_pulls) -----------------------
  /// The slices of the region in stage order, and the stages that need none
  /// of its values. No slices: the values are pulled whole.
  std::vector<pull_slice> slices;
  uint32_t stages_at_start = 0;
  /// For the running step: the stages whose values (and rows) it holds,
  /// which of its slices arrived, the first slice not yet counted in
  /// dense_stages, and whether its rows arrived.
  uint32_t dense_stages = 0;
  std::vector<bool> slice_in;
  uint32_t slice_next = 0;
  bool rows_in = true;
  // -- overlap and prefetch (worker_options::overlap, ::prefetch) ------------
  /// The dense values pulled ahead for the next closure, sent with the
  /// running closure's push.
  pull_ahead ahead;
};

// Growing worker_state::slots moves the slots (their buffers are not copied).
static_assert(std::is_nothrow_move_constructible_v<server_slot>);

struct worker_state {
  worker_options opts;
  std::unique_ptr<model_workspace> ws;
  std::vector<float> params;
  std::vector<float> grad;
  example_batch batch;
  std::vector<table_lookup> tables;
  key_routes routes;
  /// One per replica group (see server_slot). Their servers, views and
  /// server indices are moved here from opts at the start: opts.servers,
  /// opts.views and opts.server_index are empty from then on.
  std::vector<server_slot> slots;
  std::deque<job> queue; // queue.front() is running when busy
  /// Set when a parameter server is lost: every closure fails with it.
  caf::error ps_lost;
  bool busy = false;
  // -- the running closure ----------------------------------------------------
  /// Counts started steps: a reply is for the running step only if it was
  /// sent by it (a late reply of an earlier step, e.g. of the same closure
  /// run again here, is dropped).
  uint64_t seq = 0;
  /// The last token given to a request (server_slot::in_flight,
  /// pull_ahead::token).
  uint64_t next_token = 0;
  /// Layer pushes (worker_options::layer_pushes), for the running step: the
  /// flat-model offset from which the gradient is final.
  uint64_t ready_from = 0;
  /// The compute runs (pieces pushed from the model's callback), and what
  /// failed in one of them (handled once the compute returned).
  bool in_compute = false;
  std::string piece_error;
  /// Per group: the runs of its region and their push formats.
  wire_plan plan;
  /// Priority pulls (worker_options::priority_pulls): the model's forward
  /// stages (model::forward_stages). Empty: the values are pulled whole.
  std::vector<uint64_t> stage_ends;
  /// For the running step: whether it pulls in slices and runs stages as
  /// they come, and the stages run.
  bool staged = false;
  uint32_t stages_run = 0;
  /// Set while a step takes replies that arrived before it, but for the
  /// last of them: stages run only once they are all in place (run
  /// earlier, they would not overlap anything).
  bool hold_stages = false;
  /// Decoded values of an encoded pull reply.
  std::vector<float> decoded;
  /// The duration of the last step, from its start to its last push's
  /// acknowledgement, by the actor system's clock (virtual under simulate):
  /// values pulled ahead longer ago than this are not used.
  double last_step_s = 0;
  steady_clock::time_point step_started;
  /// A wire format chosen by measurement, to be used from the next step
  /// on (empty: none).
  std::string next_format;
  /// The measurement is running: closures wait (their traffic would skew
  /// it).
  bool probing = false;
  const step_function* step = nullptr;
  phase at = phase::idle;
  size_t pending = 0;
  bool failed = false;
  step_result result;
  steady_clock::time_point t0;
  static constexpr const char* name = "worker";
};

using worker_ptr = worker_actor::stateful_pointer<worker_state>;

// -- worker_actor.cpp ---------------------------------------------------------

/// Ends the running closure with its result or `err` and starts the next one.
void finish(worker_ptr self, const caf::error& err);

/// Fails the running closure with `err` (once; later replies are ignored).
void fail(worker_ptr self, caf::error err);

/// The running closure's own code failed (the dataset, the model or the push
/// format threw): the closure's error, not the worker's. Nothing was pushed,
/// except with layer pushes the layers pushed before the model threw.
void step_error(worker_ptr self, const char* where, const std::exception& e);

/// A pull or push to server `p` failed with `err`: a server that is gone is
/// reported as errc::ps_lost (the dispatcher may wait for its recovery).
caf::error server_error(worker_ptr self, uint32_t p, caf::error err);

/// Whether `err` is server `p`'s answer that group `p` moved away at a view
/// newer than the worker knows (a planned move): the dispatcher's new route
/// is on its way, and the request goes again with it (resend), so the
/// closure does not fail.
bool awaits_route(worker_ptr self, uint32_t p, const caf::error& err);

// -- worker_step.cpp ----------------------------------------------------------

/// Frees `xs` (worker_options::lean).
void release(std::vector<float>& xs);

/// Takes the next batch, lets the model name its keys, and pulls (or takes
/// the values pulled ahead).
void begin_step(worker_ptr self);

/// One part of the running step's pull of group `p` has arrived: a pull's
/// reply (`rows`; with the dense values unless they were pulled ahead), or
/// the values pulled ahead (not `rows`), or (priority pulls) slice `slice`
/// of the dense values, with the rows if `rows`. What it carries goes into
/// place; the last part starts the compute, one before it may run forward
/// stages.
void take_pull(worker_ptr self, uint32_t p, pull_reply& reply, bool with_dense,
               bool rows, uint32_t slice = whole_region);

/// Group `p` moved to another server while the running closure awaited its
/// answer: the request goes to the new server.
void resend(worker_ptr self, uint32_t p);

// -- worker_ahead.cpp ---------------------------------------------------------

/// True if the running step awaits the values pulled ahead from group `p`.
bool awaits_ahead(worker_ptr self, uint32_t p);

/// True if the step takes group `p`'s dense values from the pull ahead: one
/// in flight (sent with the last push), or one sent at most one step's
/// duration (at least 5 ms) ago, so it adds at most about one step of
/// staleness.
bool use_ahead(worker_ptr self, uint32_t p);

/// Reply `i` of the pull ahead of group `p` under `token` arrived: taken
/// by the running step if it awaits it, else kept for the next.
void ahead_arrived(worker_ptr self, uint32_t p, uint64_t token, uint32_t i,
                   pull_reply& reply);

/// The pull ahead of group `p` under `token` failed: forgotten, and the
/// step that awaits it fails.
void ahead_failed(worker_ptr self, uint32_t p, uint64_t token,
                  caf::error& err);

/// At a step's start: takes the replies of group `p`'s pull ahead that
/// arrived (the rest are taken as they come).
void take_ahead(worker_ptr self, uint32_t p);

/// Forgets what was pulled ahead from group `p` (its server changed or was
/// lost).
void drop_ahead(worker_ptr self, uint32_t p);

/// Seconds since `t` by the actor system's clock, which is virtual under
/// simulate: what decides whether values pulled ahead are used must not
/// depend on wall time there, or a seed would not give one event order.
double clock_seconds_since(worker_ptr self, steady_clock::time_point t);

// -- worker_push.cpp ----------------------------------------------------------

/// Pushes the run [from, to) of the running closure's gradient to group
/// `p`'s server: the whole push when it is the whole region, else a piece
/// of it (layer pushes); the table rows go with the run that starts at 0.
/// Counts the request in `pending` and under the group's token.
void push_run(worker_ptr self, uint32_t p, uint64_t from, uint64_t to);

/// Pushes what is left of group `p`'s gradient after the compute: all of
/// it, or (layer pushes) the run before the pieces pushed during it.
void push_one(worker_ptr self, uint32_t p);

/// Layer pushes: backpropagation made the flat gradient [first, last)
/// final; pushes what that completes of each group as a piece.
void layer_ready(worker_ptr self, const float* first, const float* last);

/// Layer pushes, around the compute: hands the model the callback that
/// pushes pieces (model_workspace::gradient_ready), and takes it back.
void start_pieces(worker_ptr self);
void end_pieces(worker_ptr self);

/// Group `p` moved to a new server during the pushes: every run pushed to
/// the old one goes there again.
void resend_pushes(worker_ptr self, uint32_t p);

// -- worker_slices.cpp --------------------------------------------------------

/// Priority pulls: computes the model's stages and every group's slices
/// (at the worker's start; none when off or the model has one stage).
void plan_slices(worker_ptr self);

/// At a step's start: whether it pulls in slices (staged), and the stages'
/// bookkeeping for it.
void begin_slices(worker_ptr self);

/// Whether the running step pulls group `p`'s dense values in slices.
bool sliced(worker_ptr self, uint32_t p);

/// The requests the running step's own pull of group `p` takes: its slices
/// not yet in, or 1 (whole).
uint32_t pull_parts(worker_ptr self, uint32_t p);

/// Bookkeeping of a part of group `p`'s pull that arrived: with `dense`,
/// its slice `slice` of the dense values (whole_region: all of them);
/// with `rows`, its rows.
void note_part(worker_ptr self, uint32_t p, bool dense, uint32_t slice,
               bool rows);

/// Runs the forward stages whose values are all in and were not run yet,
/// counting their time as compute. False if one threw: the step failed.
bool run_ready_stages(worker_ptr self);

} // namespace actorps::detail
