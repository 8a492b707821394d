#include "cluster/job/stop_request.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>

#include <signal.h>

#include <fmt/format.h>

namespace actorps {

namespace {

// A lock-free atomic is async-signal-safe (checked below).
std::atomic<bool> requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void on_stop_signal(int) {
  request_stop();
}

} // namespace

void request_stop() noexcept {
  requested.store(true);
}

bool stop_requested() noexcept {
  return requested.load();
}

void clear_stop_request() noexcept {
  requested.store(false);
}

void stop_on_signals() {
  struct sigaction act = {};
  act.sa_handler = on_stop_signal;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  for (auto sig : {SIGTERM, SIGUSR1})
    if (::sigaction(sig, &act, nullptr) != 0)
      throw runtime_failure(fmt::format("cannot handle signal {}: {}", sig,
                                        std::strerror(errno)));
}

stopped_on_request::stopped_on_request(uint64_t global_step,
                                       std::string checkpoint_dir)
  : runtime_failure(
    checkpoint_dir.empty()
      ? fmt::format("stopped on request (SIGTERM or SIGUSR1) at step {}; no "
                    "checkpoint was written (no --checkpoint-dir), so the job "
                    "cannot resume",
                    global_step)
      : fmt::format("stopped on request (SIGTERM or SIGUSR1) at step {}; "
                    "checkpoint in {}: continue with --resume",
                    global_step, checkpoint_dir)),
    global_step_(global_step),
    checkpoint_dir_(std::move(checkpoint_dir)) {
  // nop
}

} // namespace actorps
