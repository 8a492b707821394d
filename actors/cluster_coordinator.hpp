#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <set>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "caf/error.hpp"

#include "actors/dispatcher_actor.hpp"
#include "actors/messages.hpp"
#include "core/error.hpp"

namespace actorps {

/// Counters of a cluster_coordinator. Once every closure is done,
/// scheduled == finished + failed + cancelled.
struct closure_counts {
  uint64_t scheduled = 0;
  uint64_t finished = 0;  ///< done with a value
  uint64_t failed = 0;    ///< done with an error other than cancelled
  uint64_t cancelled = 0; ///< errc::cancelled: never ran, or stopped before
                          ///< its push
  uint64_t reexecuted = 0; ///< extra attempts after a lost worker
};

/// What the planned moves of parameter-server groups did so far (moves,
/// joins' rebalancing, leaves; actors/dispatcher_moves.cpp).
struct move_totals {
  uint64_t count = 0;      ///< moves ended (of primaries and backups)
  uint64_t floats = 0;     ///< dense floats the moved replicas held
  uint64_t table_rows = 0; ///< table rows the moved replicas held
  double longest_stall_ms = 0; ///< the longest wait of pushes to a moving group
};

/// Thrown by cluster_coordinator::schedule() for a step-function name that
/// is not in the registry (models/step_function.hpp). The message names the
/// function and the known names. Nothing was queued, and an error pending
/// from an earlier closure stays pending.
class unknown_step_function : public runtime_failure {
public:
  using runtime_failure::runtime_failure;
};

namespace detail {

struct closure_tracker;

/// Shared between a remote_value, the dispatcher and the tracker.
struct closure_state {
  uint64_t id = 0;
  std::string function;
  /// The examples it trains on (empty: the worker's own source).
  data_range range;
  /// The number of errors the facade had raised when this closure was
  /// scheduled. An error cancels the closures of its epoch only.
  uint64_t epoch = 0;
  std::shared_ptr<closure_tracker> tracker;
  /// Times the closure was handed to a worker (> 1: re-executed). Touched
  /// by the dispatcher only.
  uint32_t attempts = 0;

  /// Completes the closure with a result, or with an error and its rendering
  /// for people (first call wins). Thread-safe.
  void complete(const step_result* value, const caf::error* err,
                const std::string& err_text = {});

  /// Adds this closure's outcome to the tracker's counts (tracker->mtx
  /// held); true if that may let a waiter of the tracker's cv through.
  bool count(const caf::error* err, const std::string& err_text);

  // -- guarded by mtx --------------------------------------------------------
  mutable std::mutex mtx;
  mutable std::condition_variable cv;
  /// Set by the first complete() (which alone stores a result).
  bool claimed = false;
  /// Set once the result is stored and counted: waiters may read it.
  bool finished = false;
  step_result value;
  caf::error error;
  std::string error_text;
};

/// Counts unfinished closures and keeps the first error for the facade.
struct closure_tracker {
  std::mutex mtx;
  std::condition_variable cv;
  // -- guarded by mtx --------------------------------------------------------
  uint64_t unfinished = 0;
  closure_counts counts;
  /// The first error since the last one raised (has_error), and its text.
  bool has_error = false;
  std::string error_text;
  /// Whether that error is a node lost and not recovered (errc::ps_lost,
  /// errc::no_workers): raised as a transient_failure.
  bool error_transient = false;
  /// Errors raised so far (the epoch of the next closure).
  uint64_t epoch = 0;
  uint64_t next_id = 1;
  /// The first id this coordinator hands out (ids below it are another
  /// coordinator's).
  uint64_t first_id = 1;
  /// schedule() waits while this many closures are unfinished (the
  /// coordinator's max_queued, at least 1). Set once, before any closure.
  uint64_t max_queued = 1;
  /// Ids of the closures scheduled and not done yet.
  std::set<uint64_t> unfinished_ids;

  /// The smallest closure id that may still push: every closure below it is
  /// done and will not run again (the parameter servers forget the applied
  /// ids below it). Call with mtx held.
  uint64_t low_watermark() const {
    return unfinished_ids.empty() ? next_id : *unfinished_ids.begin();
  }
};

} // namespace detail

/// A future for the result of one scheduled closure, like TensorFlow's
/// `RemoteValue`. Copies share the same state. Every member is thread-safe.
/// A default-constructed remote_value is empty: its members throw
/// std::logic_error.
class remote_value {
public:
  remote_value() = default;

  explicit remote_value(closure_ptr st) : st_(std::move(st)) {
    // nop
  }

  /// Whether the closure is done: finished with a value, failed or
  /// cancelled. Does not block.
  bool done() const;

  /// Blocks until done().
  void wait() const;

  /// Blocks until done(), then returns the step's result.
  /// @throws runtime_failure if the closure failed: the message names the
  ///         closure, its function, the worker and the error; for a cancelled
  ///         closure it says "closure N cancelled" and after which error.
  step_result fetch() const;

  /// Does not block: the result if the closure finished with a value,
  /// std::nullopt while it is not done (as TensorFlow's RemoteValue.get).
  /// @throws runtime_failure as fetch() if it failed or was cancelled.
  std::optional<step_result> get() const;

  /// The closure's error after done() (empty if it succeeded or is not done).
  caf::error error() const;

  uint64_t closure_id() const;

private:
  const detail::closure_state& state() const;

  closure_ptr st_;
};

/// Blocks until every value in `values` is done, then returns their results
/// in order (TensorFlow's `ClusterCoordinator.fetch` of a list).
/// @throws runtime_failure of the first value, in order, that failed or was
///         cancelled (every value is done by then).
std::vector<step_result> fetch(const std::vector<remote_value>& values);

/// The C++ face of the coordinator, after TensorFlow's
/// `tf.distribute.experimental.coordinator.ClusterCoordinator`: schedule()
/// queues a closure and returns at once, join() waits for all of them.
///
/// Errors, as TensorFlow's: when a closure fails with its own error (a step
/// function, model or dataset error, not a lost worker), the closures still
/// queued are cancelled, running ones are cancelled at their next message
/// boundary (a cancelled closure's gradient is never applied; one whose push
/// was already sent finishes with its value), and closures scheduled before
/// the error is raised are cancelled too. The first such error is then
/// thrown, once, by whichever of schedule(), join() or done() comes first,
/// and only when no closure is running or queued any more; then it is
/// cleared and later closures run normally. Closures of a job that cannot go
/// on (a parameter server lost and not recovered) each fail with that error.
///
/// Threads: every member may be called from any number of non-actor threads
/// at once (never from inside an actor: they block). Closure ids are unique
/// and increasing in the order schedule() calls take the tracker's lock.
class cluster_coordinator {
public:
  /// @param max_queued schedule() blocks while this many closures are
  ///        unfinished (a bounded queue, as TF's); at least 1.
  /// @param first_id the first closure's id; ids then count up. Parameter
  ///        servers apply one push per closure id, so coordinators that may
  ///        meet the same servers (a restarted one) must not reuse ids.
  /// The dispatcher must outlive this object.
  cluster_coordinator(caf::actor_system& sys, dispatcher_actor dispatcher,
                      uint64_t max_queued, uint64_t first_id = 1);

  /// Cancels the closures still queued or running (their remote_values
  /// complete as cancelled); does not wait.
  ~cluster_coordinator();

  cluster_coordinator(const cluster_coordinator&) = delete;
  cluster_coordinator& operator=(const cluster_coordinator&) = delete;

  /// Queues a closure that runs step function `function` on some worker and
  /// returns its remote_value at once. Blocks while max_queued closures are
  /// unfinished. If an error is pending, waits until no closure is running
  /// or queued, then throws it (and queues nothing).
  /// @throws unknown_step_function (before anything else) for a name not in
  ///         the step-function registry.
  /// @throws runtime_failure with the first error of an earlier closure.
  remote_value schedule(const std::string& function);

  /// As schedule(function), on the examples of `range` (the coordinator
  /// hands out data; a re-run after a lost worker trains on the same
  /// ones), with progressive evaluation: the remote value's scores and
  /// labels are the step's predictions before its update.
  remote_value schedule(const std::string& function, data_range range);

  /// Blocks until every scheduled closure is done.
  /// @throws runtime_failure with the first error of a closure (once); a
  ///         transient_failure when it is a node lost and not recovered
  ///         (errc::ps_lost, errc::no_workers).
  void join();

  /// Like join(), but returns false if `timeout` passes first (and throws
  /// nothing then).
  bool join_for(std::chrono::milliseconds timeout);

  /// Cancels every closure still queued, and every running one at its next
  /// message boundary, as the destructor does; returns at once, and join()
  /// returns once each is done (a running one whose push was already sent
  /// finishes with its value). A cancelled closure's remote_value holds
  /// errc::cancelled; no error is raised. Closures scheduled later run
  /// normally. For a job stopped early (cluster/job/stop_request.hpp).
  void cancel();

  /// Whether every scheduled closure is done. Does not block, unless an
  /// error is pending: then waits until no closure is running or queued and
  /// throws it, as join().
  bool done();

  closure_counts counts() const;

  /// Asks the dispatcher what the moves of groups did so far (up to 10 s;
  /// zeros if it does not answer).
  move_totals moves() const;

private:
  /// Throws the pending error and clears it. Needs tracker_->mtx held.
  void raise_pending_error();

  caf::actor_system& sys_;
  dispatcher_actor dispatcher_;
  std::shared_ptr<detail::closure_tracker> tracker_;
};

} // namespace actorps
