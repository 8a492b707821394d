#include "actors/cluster_coordinator.hpp"

#include "caf/actor_system.hpp"
#include "caf/send.hpp"

#include "core/error.hpp"

namespace actorps {

// -- closure_state ------------------------------------------------------------

void detail::closure_state::complete(const step_result* result,
                                     const caf::error* err,
                                     const std::string& err_text) {
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (finished)
      return;
    finished = true;
    if (result != nullptr)
      value = *result;
    if (err != nullptr) {
      error = *err;
      error_text = err_text;
    }
  }
  cv.notify_all();
  std::lock_guard<std::mutex> guard{tracker->mtx};
  auto& t = *tracker;
  --t.unfinished;
  if (attempts > 1)
    t.counts.reexecuted += attempts - 1;
  if (err == nullptr) {
    ++t.counts.finished;
  } else if (*err == errc::cancelled) {
    ++t.counts.cancelled;
  } else {
    ++t.counts.failed;
    if (!t.has_error) {
      t.has_error = true;
      t.error_text = err_text;
    }
  }
  t.cv.notify_all();
}

// -- remote_value -------------------------------------------------------------

bool remote_value::done() const {
  std::lock_guard<std::mutex> guard{st_->mtx};
  return st_->finished;
}

void remote_value::wait() const {
  std::unique_lock<std::mutex> guard{st_->mtx};
  st_->cv.wait(guard, [&] { return st_->finished; });
}

step_result remote_value::fetch() const {
  std::unique_lock<std::mutex> guard{st_->mtx};
  st_->cv.wait(guard, [&] { return st_->finished; });
  if (st_->error)
    throw runtime_failure(st_->error_text);
  return st_->value;
}

caf::error remote_value::error() const {
  std::lock_guard<std::mutex> guard{st_->mtx};
  return st_->error;
}

uint64_t remote_value::closure_id() const {
  return st_->id;
}

// -- cluster_coordinator ------------------------------------------------------

cluster_coordinator::cluster_coordinator(caf::actor_system& sys,
                                         coordinator_actor dispatcher,
                                         uint64_t max_queued,
                                         uint64_t first_id)
  : sys_(sys),
    dispatcher_(std::move(dispatcher)),
    max_queued_(std::max<uint64_t>(max_queued, 1)),
    next_id_(first_id),
    tracker_(std::make_shared<detail::closure_tracker>()) {
  // nop
}

cluster_coordinator::~cluster_coordinator() {
  // Closures still queued would keep their promises forever: cancel them.
  caf::anon_send(dispatcher_, cancel_atom_v);
}

void cluster_coordinator::raise_pending_error() {
  // Called with tracker_->mtx held.
  if (tracker_->has_error) {
    tracker_->has_error = false;
    throw runtime_failure(std::move(tracker_->error_text));
  }
}

remote_value cluster_coordinator::schedule(const std::string& function) {
  auto c = std::make_shared<detail::closure_state>();
  c->id = next_id_++;
  c->function = function;
  c->tracker = tracker_;
  {
    std::unique_lock<std::mutex> guard{tracker_->mtx};
    tracker_->cv.wait(guard, [&] {
      return tracker_->has_error || tracker_->unfinished < max_queued_;
    });
    raise_pending_error();
    ++tracker_->unfinished;
    ++tracker_->counts.scheduled;
  }
  caf::anon_send(dispatcher_, schedule_atom_v, c);
  return remote_value{std::move(c)};
}

void cluster_coordinator::join() {
  std::unique_lock<std::mutex> guard{tracker_->mtx};
  tracker_->cv.wait(guard, [&] { return tracker_->unfinished == 0; });
  raise_pending_error();
}

bool cluster_coordinator::join_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> guard{tracker_->mtx};
  if (!tracker_->cv.wait_for(guard, timeout,
                             [&] { return tracker_->unfinished == 0; }))
    return false;
  raise_pending_error();
  return true;
}

bool cluster_coordinator::done() {
  std::lock_guard<std::mutex> guard{tracker_->mtx};
  raise_pending_error();
  return tracker_->unfinished == 0;
}

closure_counts cluster_coordinator::counts() const {
  std::lock_guard<std::mutex> guard{tracker_->mtx};
  return tracker_->counts;
}

} // namespace actorps
