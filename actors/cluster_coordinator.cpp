#include "actors/cluster_coordinator.hpp"

#include <stdexcept>

#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "core/error.hpp"
#include "models/step_function.hpp"

namespace actorps {

// -- closure_state ------------------------------------------------------------

void detail::closure_state::complete(const step_result* result,
                                     const caf::error* err,
                                     const std::string& err_text) {
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (claimed)
      return; // the first call wins
    claimed = true;
    if (result != nullptr)
      value = *result;
    if (err != nullptr) {
      error = *err;
      error_text = err_text;
    }
  }
  // Counted and marked done under the tracker's lock (taken before the
  // closure's, never the other way round): whoever sees the closure done sees
  // it counted, and whoever join() or done() lets through (they check the
  // counts under that lock) sees every closure done.
  bool wake = false;
  {
    std::lock_guard<std::mutex> counts{tracker->mtx};
    wake = count(err, err_text);
    std::lock_guard<std::mutex> guard{mtx};
    finished = true;
  }
  cv.notify_all();
  if (wake)
    tracker->cv.notify_all();
}

bool detail::closure_state::count(const caf::error* err,
                                  const std::string& err_text) {
  auto& t = *tracker;
  auto had_error = t.has_error;
  --t.unfinished;
  t.unfinished_ids.erase(id);
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
      t.error_transient = *err == errc::ps_lost || *err == errc::no_workers;
    }
  }
  // Only what a waiter waits for wakes it (cluster_coordinator's schedule,
  // join, join_for, done): the last closure done, room in a full queue, a
  // first error. Woken at every closure, the facade's thread cost a thread
  // switch per step for nothing (0.7 per step under `launch`).
  return t.unfinished == 0 || t.unfinished + 1 == t.max_queued
         || t.has_error != had_error;
}

// -- remote_value -------------------------------------------------------------

const detail::closure_state& remote_value::state() const {
  if (!st_)
    throw std::logic_error("empty remote_value (default-constructed)");
  return *st_;
}

bool remote_value::done() const {
  auto& st = state();
  std::lock_guard<std::mutex> guard{st.mtx};
  return st.finished;
}

void remote_value::wait() const {
  auto& st = state();
  std::unique_lock<std::mutex> guard{st.mtx};
  st.cv.wait(guard, [&] { return st.finished; });
}

step_result remote_value::fetch() const {
  auto& st = state();
  std::unique_lock<std::mutex> guard{st.mtx};
  st.cv.wait(guard, [&] { return st.finished; });
  if (st.error)
    throw runtime_failure(st.error_text);
  return st.value;
}

std::optional<step_result> remote_value::get() const {
  auto& st = state();
  std::lock_guard<std::mutex> guard{st.mtx};
  if (!st.finished)
    return std::nullopt;
  if (st.error)
    throw runtime_failure(st.error_text);
  return st.value;
}

caf::error remote_value::error() const {
  auto& st = state();
  std::lock_guard<std::mutex> guard{st.mtx};
  return st.error;
}

uint64_t remote_value::closure_id() const {
  return state().id;
}

std::vector<step_result> fetch(const std::vector<remote_value>& values) {
  for (auto& v : values)
    v.wait();
  std::vector<step_result> result;
  result.reserve(values.size());
  for (auto& v : values)
    result.push_back(v.fetch());
  return result;
}

// -- cluster_coordinator ------------------------------------------------------

cluster_coordinator::cluster_coordinator(caf::actor_system& sys,
                                         dispatcher_actor dispatcher,
                                         uint64_t max_queued,
                                         uint64_t first_id)
  : sys_(sys),
    dispatcher_(std::move(dispatcher)),
    tracker_(std::make_shared<detail::closure_tracker>()) {
  tracker_->next_id = first_id;
  tracker_->first_id = first_id;
  tracker_->max_queued = std::max<uint64_t>(max_queued, 1);
}

cluster_coordinator::~cluster_coordinator() {
  // Closures still queued would keep their promises forever: cancel them.
  caf::anon_send(dispatcher_, cancel_atom_v);
}

void cluster_coordinator::cancel() {
  caf::anon_send(dispatcher_, cancel_atom_v);
}

void cluster_coordinator::raise_pending_error() {
  auto& t = *tracker_;
  if (!t.has_error)
    return;
  t.has_error = false;
  // Closures scheduled from now on belong to the next epoch: the error no
  // longer cancels them.
  ++t.epoch;
  t.cv.notify_all();
  if (t.error_transient)
    throw transient_failure(std::move(t.error_text));
  throw runtime_failure(std::move(t.error_text));
}

remote_value cluster_coordinator::schedule(const std::string& function) {
  return schedule(function, data_range{});
}

remote_value cluster_coordinator::schedule(const std::string& function,
                                           data_range range) {
  if (find_step_function(function) == nullptr) {
    std::string known;
    for (auto& name : step_function_names())
      known += (known.empty() ? "" : ", ") + name;
    throw unknown_step_function("schedule: unknown step function \""
                                + function + "\" (known: " + known + ")");
  }
  auto c = std::make_shared<detail::closure_state>();
  c->function = function;
  c->range = std::move(range);
  c->tracker = tracker_;
  {
    auto& t = *tracker_;
    std::unique_lock<std::mutex> guard{t.mtx};
    for (;;) {
      t.cv.wait(guard,
                [&] { return t.has_error || t.unfinished < t.max_queued; });
      if (!t.has_error)
        break;
      // TF: when schedule raises, no closure is running or queued.
      t.cv.wait(guard, [&] { return !t.has_error || t.unfinished == 0; });
      raise_pending_error(); // unless another thread raised it meanwhile
    }
    c->id = t.next_id++;
    c->epoch = t.epoch;
    t.unfinished_ids.insert(c->id);
    ++t.unfinished;
    ++t.counts.scheduled;
  }
  // Sent outside the lock: if an error of this epoch reaches the dispatcher
  // first, it cancels this closure on arrival (same epoch), and the error is
  // raised only after that (unfinished counts this closure).
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
  std::unique_lock<std::mutex> guard{tracker_->mtx};
  if (tracker_->has_error) {
    tracker_->cv.wait(guard, [&] {
      return !tracker_->has_error || tracker_->unfinished == 0;
    });
    raise_pending_error();
  }
  return tracker_->unfinished == 0;
}

move_totals cluster_coordinator::moves() const {
  move_totals out;
  caf::scoped_actor self{sys_};
  self->request(dispatcher_, std::chrono::seconds(10), move_atom_v)
    .receive(
      [&](uint64_t count, uint64_t floats, uint64_t rows, uint64_t stall_us) {
        out.count = count;
        out.floats = floats;
        out.table_rows = rows;
        out.longest_stall_ms = double(stall_us) / 1000.0;
      },
      [](caf::error&) {});
  return out;
}

closure_counts cluster_coordinator::counts() const {
  std::lock_guard<std::mutex> guard{tracker_->mtx};
  return tracker_->counts;
}

} // namespace actorps
