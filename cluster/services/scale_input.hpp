#pragma once

// The coordinator's end of `actorps scale` (apps/scale_desk.hpp): `launch`
// writes membership commands, one per line, to the coordinator's stdin,
// and this callback injects them into the running job between closures,
// as the fault/event plan would at its step, and prints the training
// speed before and after each.

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/services/fit.hpp"
#include "core/fault_spec.hpp"

namespace actorps {

/// Reads lines from `fd` on a thread of its own and acts on them on fit's
/// thread:
/// - an event of the plan without its step: `join:ps`, `leave:ps:N`,
///   `leave:worker:I` (parse_fault's syntax; injected at once through
///   cluster::inject);
/// - `mark TEXT`: nothing injected (a change made outside the coordinator,
///   e.g. a worker process started with --join); only the speed lines.
/// For each, it logs "scale: TEXT: X samples/s in the S s before" at once
/// (or since training started, if that is less)
/// and "scale: TEXT: Y samples/s in the S s after" S seconds later, or at
/// the end of training if that comes first (the examples of finished
/// closures over wall time; S = 3). A line it cannot
/// read is logged and ignored: the job goes on. The reader stops at EOF.
class scale_input : public fit_callback {
public:
  /// `fd` is not closed (stdin).
  explicit scale_input(int fd);
  ~scale_input() override;

  scale_input(const scale_input&) = delete;
  scale_input& operator=(const scale_input&) = delete;

  void on_train_begin(fit_state& st) override;
  void on_step_end(fit_state& st, const step_result& r) override;
  void on_wait(fit_state& st, uint64_t done) override;
  void on_pause(fit_state& st) override;
  void on_train_end(fit_state& st) override;
  std::chrono::milliseconds poll_interval(const fit_state& st) const override;

private:
  using clock = std::chrono::steady_clock;

  void read_lines();
  void act(fit_state& st);
  void stop();
  /// Examples finished in [from, to) by the samples seen so far.
  double examples_between(clock::time_point from, clock::time_point to) const;

  int fd_;
  std::thread reader_;
  std::atomic<bool> stopping_{false};
  std::mutex mtx_;
  std::vector<std::string> lines_; // guarded by mtx_
  /// (when, examples) of each finished closure of the last minute.
  std::deque<std::pair<clock::time_point, uint64_t>> samples_;
  /// Events whose "after" line is still due: (due, text, when).
  std::vector<std::pair<clock::time_point, std::string>> due_;
  /// When training started (on_train_begin).
  clock::time_point started_ = clock::now();
};

} // namespace actorps
