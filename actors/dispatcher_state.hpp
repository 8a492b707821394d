#pragma once

// The dispatcher's state and the functions of its two files
// (actors/dispatcher_actor.cpp: closures and workers;
// actors/dispatcher_servers.cpp: parameter servers, replica groups,
// failover and recovery). Internal to actors/.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "caf/stateful_actor.hpp"
#include "caf/typed_response_promise.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "actors/cluster_coordinator.hpp"
#include "actors/dispatcher_actor.hpp"
#include "core/dataset.hpp"

namespace actorps::detail {

/// Who serves one replica group: its primary (a server index), its backup
/// (-1: none), and the view, which counts the group's role changes (workers
/// name it in every request). `lost`: no live copy (dispatch pauses until
/// the group is restored); `promoting`: a backup is being made primary;
/// `adding`: a server being made its backup (-1: none).
struct group_state {
  uint32_t primary = 0;
  int64_t backup = -1;
  uint64_t view = 0;
  bool lost = false;
  bool promoting = false;
  int64_t adding = -1;
  /// A planned move of the group runs (dispatcher_state::move): its backup
  /// is the move's business, not ensure_backups'.
  bool moving = false;
};

/// What the dispatcher keeps for one worker (slot w is worker index w).
struct worker_slot {
  /// The worker's current incarnation (replaced when it comes back or is
  /// restarted).
  worker_actor actor;
  /// In service (taken out when lost, back when admitted).
  bool alive = true;
  /// The closures it holds, in the order they were sent: the first runs,
  /// the others wait in the worker's queue (at most per_worker).
  std::vector<closure_ptr> running;
  /// Why it was last taken out of service ("never started" until then),
  /// with what failed since ("restart failed: ...").
  std::string lost_reason = "never started";
  /// Restarts made (of restart_budget), and its incarnation (the number
  /// respawn got last).
  uint32_t restarts = 0;
  uint32_t incarnation = 0;
  /// Consecutive closures it failed with errc::ps_lost while that server
  /// was not being recovered (the worker cannot reach it), and whether it
  /// sits out a back-off for that (benched).
  uint32_t strikes = 0;
  bool benched = false;
  /// Tells a bench timer of an earlier bench from the current one's.
  uint64_t bench_number = 0;
  /// Its data position after its last finished closure, and whether it has
  /// one (a restarted worker process is moved there).
  data_position position;
  bool has_position = false;
  /// Leaving gracefully (leave_atom): no new closure; when it holds none,
  /// it leaves service and `farewell` gets the closures it finished since
  /// (`finished_leaving`).
  bool leaving = false;
  uint32_t finished_leaving = 0;
  caf::typed_response_promise<uint32_t> farewell;
};

/// What the dispatcher keeps for one parameter server (slot p is server
/// index p; which groups it serves is in group_state).
struct ps_slot {
  /// The server's current incarnation (replaced when it is brought back).
  ps_actor actor;
  /// Alive (not lost since it was last back).
  bool alive = true;
  /// A helper is bringing it back.
  bool returning = false;
  /// The groups it holds a replica of.
  std::set<uint32_t> holds;
  /// Leaving the job: its replicas move elsewhere and it takes no new ones
  /// (draining), then it is stopped and forgotten (retired).
  bool draining = false;
  bool retired = false;
};

/// A request to move replicas (move_atom) or drain a server (ps_drain_atom):
/// its reply, once each of its moves ended.
struct move_request {
  caf::typed_response_promise<uint32_t> promise;
  /// Moves not ended yet, moves done, and why the others failed.
  uint32_t left = 0;
  uint32_t moved = 0;
  std::string failures;
  /// A drain: the server to stop when its replicas are elsewhere (-1: none).
  int64_t retire = -1;
  /// The moves that level the servers after a join (nobody waits for the
  /// reply; "rebalanced: ..." is logged instead).
  bool rebalance = false;
  /// The server a rebalance moves groups to (for its log line).
  uint32_t rebalance_to = 0;
};

/// One planned move: group `group`'s replica on server `from` goes to
/// server `to` (-1: the dispatcher chooses when the move starts).
struct planned_move {
  uint32_t group = 0;
  uint32_t from = 0;
  int64_t to = -1;
  std::shared_ptr<move_request> request;
};

/// The move that runs (one at a time), with its phase's start times.
struct running_move {
  planned_move plan;
  uint32_t to = 0;
  /// Names the move for the answers it waits for (a late answer of an
  /// ended move is dropped).
  uint64_t number = 0;
  /// The group's backup before the move, kept for the log (-1: none).
  int64_t old_backup = -1;
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point handoff;
  /// Tries to start it while the group was busy (a backup being built).
  uint32_t waits = 0;
  /// The target is being made the primary (after the handoff).
  bool taking_over = false;
};

struct dispatcher_state {
  // -- closures ---------------------------------------------------------------
  std::deque<closure_ptr> queue;
  /// Closures handed to a worker at once (spawn_dispatcher's
  /// closures_per_worker): with 2, a worker starts its next closure the
  /// moment one ends, not a round trip to the dispatcher later.
  uint32_t per_worker = 1;
  /// Closures of an epoch below this are cancelled: an error of their epoch
  /// happened and the facade has not raised it yet.
  uint64_t cancel_below = 0;
  /// The error that cancels them ("closure 3 (train_step) failed on ...").
  std::string cancel_cause;
  /// Set when the job cannot go on: every closure fails with it.
  caf::error fatal;
  std::string fatal_text;
  // -- workers ----------------------------------------------------------------
  /// One per worker (see worker_slot).
  std::vector<worker_slot> workers;
  size_t alive_count = 0;
  /// One entry per free place of a worker (a worker with two free places
  /// is in it twice).
  std::deque<uint32_t> idle;
  worker_respawn respawn;
  uint32_t restart_budget = 0;
  uint32_t pending_restarts = 0;
  // -- no worker in service ---------------------------------------------------
  std::chrono::milliseconds no_worker_grace{0};
  /// Whether the grace period runs (or ran) since the last worker was lost.
  bool grace_started = false;
  /// Whether it is over: closures fail with errc::no_workers.
  bool grace_over = false;
  /// Tells a timer of an earlier grace period from the current one's.
  uint64_t grace_number = 0;
  // -- parameter servers and replica groups -------------------------------------
  /// One per server (see ps_slot).
  std::vector<ps_slot> servers;
  /// Who serves each replica group (see group_state).
  std::vector<group_state> groups;
  ps_recovery recovery;
  /// When dispatch paused for a group without a serving primary.
  std::chrono::steady_clock::time_point pause_start;
  bool paused = false;
  /// Completions since the servers were last told the closure-id watermark.
  uint64_t since_prune = 0;
  // -- planned moves (dispatcher_moves.cpp) ---------------------------------------
  std::deque<planned_move> moves;
  /// The move that runs, if `moving`.
  running_move move;
  bool moving = false;
  uint64_t move_number = 0;
  /// The longest time pushes to a moving group waited so far (from the
  /// handoff's request to the new routes), seconds, and the moves done (of
  /// primaries and of backups), for the log.
  double longest_move_stall_s = 0;
  uint64_t moves_done = 0;
  /// What the moves done carried: the floats and table rows of each moved
  /// replica, as its new server counts them right after the move.
  uint64_t moved_floats = 0;
  uint64_t moved_table_rows = 0;

  /// Nobody would complete what is left: cancel it.
  ~dispatcher_state() {
    auto err = caf::make_error(errc::cancelled);
    auto cancel = [&](const closure_ptr& c) {
      c->complete(nullptr, &err,
                  fmt::format("closure {} cancelled: the coordinator stopped",
                              c->id));
    };
    for (auto& c : queue)
      cancel(c);
    for (auto& w : workers)
      for (auto& c : w.running)
        cancel(c);
  }

  /// Whether worker `w` holds closure `c`; takes it off the worker.
  bool has_closure(uint32_t w, const closure_ptr& c) const {
    auto& held = workers[w].running;
    return std::find(held.begin(), held.end(), c) != held.end();
  }
  void take_closure(uint32_t w, const closure_ptr& c) {
    auto& held = workers[w].running;
    held.erase(std::remove(held.begin(), held.end(), c), held.end());
  }

  static constexpr const char* name = "dispatcher";
};

using dispatcher_ptr = dispatcher_actor::stateful_pointer<dispatcher_state>;

// -- dispatcher_actor.cpp ----------------------------------------------------------

/// Hands queued closures to idle workers (unless dispatch is paused).
void dispatch(dispatcher_ptr self);

/// Fails every queued, running and later closure with `reason`.
void fail_job(dispatcher_ptr self, const caf::error& reason);

// -- dispatcher_members.cpp ---------------------------------------------------------

/// Worker `w` joins as `worker` (enlist_atom). Returns the workers in
/// service then, or an error if that index is in service.
caf::result<uint32_t> enlist_worker(dispatcher_ptr self, uint32_t w,
                                    worker_actor worker);

/// Worker `w` is asked to leave gracefully (leave_atom).
caf::result<uint32_t> begin_leave(dispatcher_ptr self, uint32_t w);

/// Worker `w` holds one closure less (finished or failed without being
/// lost): gives its place back, or, leaving and holding none, lets it go.
void free_place(dispatcher_ptr self, uint32_t w);

/// A leaving worker `w` was lost before it was done: its promise fails.
void leave_failed(dispatcher_ptr self, uint32_t w);

/// Worker `w` is back in service as `worker`: watched, routes sent, its
/// places idle (admit, in dispatcher_actor.cpp).
void admit(dispatcher_ptr self, uint32_t w, worker_actor worker);

// -- dispatcher_servers.cpp --------------------------------------------------------

/// Sets up the server and group tables (group g of recovery.groups on
/// server g % n; with replicas, its backup on the next server) and watches
/// the servers.
void init_servers(dispatcher_ptr self, std::vector<ps_actor> servers,
                  ps_recovery recovery);

/// Whether dispatch waits: some group has no serving primary.
bool dispatch_paused(const dispatcher_state& st);

/// Server `p` is lost (its actor went down, or a watcher says so): its
/// groups fail over to their backups, groups without one wait for it to come
/// back (dispatch pauses), and a helper brings it back.
void server_lost(dispatcher_ptr self, uint32_t p, const std::string& why);

/// Server `p` is back as `ps`, holding replicas of `held`.
void server_back(dispatcher_ptr self, uint32_t p, ps_actor ps,
                 std::vector<uint32_t> held);

/// Server `p` could not be brought back (`why`).
void server_not_back(dispatcher_ptr self, uint32_t p, const std::string& why);

/// Group `g`'s replica on server `p` was created (and, with `restored`,
/// restored from a checkpoint), or failed with `err`.
void group_created(dispatcher_ptr self, uint32_t g, uint32_t p, bool restored,
                   const caf::error& err);

/// Sends every live worker (or worker `w`) the routes of every group.
void send_routes(dispatcher_ptr self);
void send_routes(dispatcher_ptr self, uint32_t w);

/// Copies every group's state from its primary to its backup again (after
/// the primaries were restored from a checkpoint).
void reinstall_backups(dispatcher_ptr self);

/// Every few completions: tells the servers the smallest closure id that
/// may still push, so that they forget the applied ids below it.
void maybe_prune(dispatcher_ptr self, const detail::closure_state& c);

/// Sets server `p`'s role in a group (replica_config); calls `done` with
/// the outcome (an empty error: done). With an install, the answer waits
/// for the backup to take the primary's state (up to 10 minutes).
void configure(dispatcher_ptr self, uint32_t p, replica_config cfg,
               std::function<void(const caf::error&)> done);

/// Creates group `g`'s shards on server `p` in a helper thread (it blocks),
/// restored from the newest checkpoint if `restore`; then the dispatcher
/// gets (replica_atom, g, p, restore, error): group_created.
void create_on(dispatcher_ptr self, uint32_t p, uint32_t g, bool restore);

/// Server `b` holds a replica of group `g`: makes it the group's backup
/// (first its own role, then the primary copies its state to it); ends in
/// backup_added.
void add_backup(dispatcher_ptr self, uint32_t g, uint32_t b);

/// Gives every group without a backup one (with replication): a live
/// server that is not leaving, one holding a copy of the group first, else
/// the next after its primary. Groups in a planned move are left alone.
void ensure_backups(dispatcher_ptr self);

// -- dispatcher_moves.cpp ----------------------------------------------------------

/// Why moving every replica of server `from` to server `to` is refused
/// (no such server, the same, lost, leaving, nothing to move); empty: it
/// is not.
caf::error check_move(const dispatcher_state& st, uint32_t from, uint32_t to);

/// Queues the moves of every replica server `from` holds to server `to`
/// (move_atom, after check_move); `req` is answered when they ended.
void plan_moves(dispatcher_ptr self, uint32_t from, uint32_t to,
                std::shared_ptr<move_request> req);

/// Why removing server `p` is refused (no such server, lost, leaving or
/// left already, the last one); empty: it is not.
caf::error check_drain(const dispatcher_state& st, uint32_t p);

/// Queues the moves that drain server `p` (ps_drain_atom, after
/// check_drain), each to the server holding the fewest replicas; when they
/// ended, `p` is stopped (recovery.retire) if it holds nothing, and `req`
/// is answered.
void plan_drain(dispatcher_ptr self, uint32_t p,
                std::shared_ptr<move_request> req);

/// Server `index` joins the job as `ps`, holding nothing (ps_join_atom);
/// with more groups than servers, groups move to it from the servers
/// serving the most primaries until the counts differ by at most one
/// (core/group_balance.hpp, rebalance_moves).
/// @returns an error if `index` is not the next server index.
caf::error join_server(dispatcher_ptr self, uint32_t index, ps_actor ps);

/// Starts the next planned move unless one runs.
void next_move(dispatcher_ptr self);

/// The running move numbered `number` waited for its busy group: it tries
/// to start again (move_atom, number).
void retry_move(dispatcher_ptr self, uint64_t number);

/// An attempt to make server `b` group `g`'s backup ended (`ok`): a
/// planned move that waited for it goes on, or ends.
void backup_added(dispatcher_ptr self, uint32_t g, uint32_t b, bool ok);

/// Server `p` was lost: a move from or to it ends. @returns true if `p` was
/// leaving and need not come back (then it is retired).
bool moves_on_server_lost(dispatcher_ptr self, uint32_t p);

} // namespace actorps::detail
