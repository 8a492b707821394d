#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <memory>
#include <string>

#include "caf/error.hpp"

#include "actors/coordinator_actor.hpp"
#include "actors/messages.hpp"

namespace actorps {

/// Counters of a cluster_coordinator.
struct closure_counts {
  uint64_t scheduled = 0;
  uint64_t finished = 0;  ///< done with a value
  uint64_t failed = 0;    ///< done with an error other than cancelled
  uint64_t cancelled = 0;
  uint64_t reexecuted = 0; ///< extra attempts after a lost worker
};

namespace detail {

struct closure_tracker;

/// Shared between a remote_value, the coordinator actor and the tracker.
struct closure_state {
  uint64_t id = 0;
  std::string function;
  std::shared_ptr<closure_tracker> tracker;
  /// Times the closure was handed to a worker (> 1: re-executed).
  uint32_t attempts = 0;

  /// Completes the closure with a result, or with an error and its rendering
  /// for people (first call wins).
  void complete(const step_result* value, const caf::error* err,
                const std::string& err_text = {});

  // -- guarded by mtx --------------------------------------------------------
  mutable std::mutex mtx;
  mutable std::condition_variable cv;
  bool finished = false;
  step_result value;
  caf::error error;
  std::string error_text;
};

/// Counts unfinished closures and keeps the first error for the facade.
struct closure_tracker {
  std::mutex mtx;
  std::condition_variable cv;
  uint64_t unfinished = 0;
  closure_counts counts;
  bool has_error = false;
  std::string error_text;
};

} // namespace detail

/// A future for the result of one scheduled closure, like TensorFlow's
/// `RemoteValue`. Copies share the same state. Thread-safe.
class remote_value {
public:
  remote_value() = default;

  explicit remote_value(closure_ptr st) : st_(std::move(st)) {
    // nop
  }

  /// Whether the closure finished (with a value, an error or cancelled).
  bool done() const;

  /// Blocks until done().
  void wait() const;

  /// Blocks until done(), then returns the step's result.
  /// @throws runtime_failure if the closure failed; the message names the
  ///         closure and the error (errc::cancelled if it never ran).
  step_result fetch() const;

  /// The closure's error after done() (empty if it succeeded).
  caf::error error() const;

  uint64_t closure_id() const;

private:
  closure_ptr st_;
};

/// The C++ face of the coordinator, after TensorFlow's
/// `tf.distribute.experimental.coordinator.ClusterCoordinator`: schedule()
/// queues a closure and returns at once, join() waits for all of them.
/// Error semantics as TF's: the first non-retryable closure error cancels the
/// closures still queued and is thrown by the next schedule(), join() or
/// done(); after that the coordinator accepts new closures.
/// Call from one non-actor thread (the training loop).
class cluster_coordinator {
public:
  /// @param max_queued schedule() blocks while this many closures are
  ///        unfinished (a bounded queue, as TF's).
  /// @param first_id the first closure's id; ids then count up. Parameter
  ///        servers apply one push per closure id, so coordinators that may
  ///        meet the same servers (a restarted one) must not reuse ids.
  cluster_coordinator(caf::actor_system& sys, coordinator_actor dispatcher,
                      uint64_t max_queued, uint64_t first_id = 1);

  ~cluster_coordinator();

  /// Queues a closure that runs step function `function` on some worker.
  /// Blocks while max_queued closures are unfinished.
  /// @throws runtime_failure with the first error of an earlier closure.
  remote_value schedule(const std::string& function);

  /// Blocks until every scheduled closure is done.
  /// @throws runtime_failure with the first error of a closure.
  void join();

  /// Like join(), but returns false if `timeout` passes first (no throw then).
  bool join_for(std::chrono::milliseconds timeout);

  /// Whether every scheduled closure is done (no block).
  /// @throws runtime_failure as join().
  bool done();

  closure_counts counts() const;

private:
  void raise_pending_error();

  caf::actor_system& sys_;
  coordinator_actor dispatcher_;
  uint64_t max_queued_;
  uint64_t next_id_ = 1;
  std::shared_ptr<detail::closure_tracker> tracker_;
};

} // namespace actorps
