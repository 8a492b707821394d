#pragma once

// What the actors of this process report for a metrics endpoint
// (cluster/services/metrics_endpoint.hpp): request latencies, staleness, mailbox
// depths, the dispatcher's queue, failures and restarts. The numbers live in
// one process-wide prometheus-cpp registry (a well-kept Debian library:
// prometheus-cpp-dev), which the endpoint serves in Prometheus' text format.
//
// Every hook is a no-op, one relaxed atomic load, until enable() is called
// (by a metrics endpoint); after that it stays on for the process. Hooks are
// thread-safe and may be called from any actor. Each process records what
// its own actors do: in `actorps train` every role; in a multi-process job
// the ps nodes their servers' staleness and mailboxes, the worker nodes their
// latencies, the chief its dispatcher's queue and the job's progress.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace prometheus {
class Registry;
} // namespace prometheus

namespace actorps {

struct ps_stats;

namespace telemetry {

namespace detail {

extern std::atomic<bool> on;

} // namespace detail

/// Whether the hooks record.
inline bool enabled() noexcept {
  return detail::on.load(std::memory_order_relaxed);
}

/// Turns the hooks on for the rest of the process's life and returns the
/// registry they record into. Idempotent.
prometheus::Registry& enable();

/// The process-wide registry (created on first use, never destroyed, so
/// that an actor finishing late never sees it gone). Other layers add their
/// own families to it (fit's progress, the evaluator's results).
prometheus::Registry& registry();

/// The same registry as a shared_ptr (for prometheus::Exposer, which holds
/// weak pointers); it is never released.
std::shared_ptr<prometheus::Registry> shared_registry();

// -- hooks ---------------------------------------------------------------------

/// Which request a latency belongs to.
enum class request_kind : uint8_t { pull, push };

/// A worker's `kind` request to parameter server `ps` took `d`, from sending
/// to its reply (histograms actorps_pull_latency_seconds and
/// actorps_push_latency_seconds, label ps).
void request_latency(request_kind kind, uint32_t ps,
                     std::chrono::steady_clock::duration d);

/// A parameter server applied a push of staleness `s`: counts it in the
/// server's own histogram (stats.staleness_buckets, core/
/// staleness_histogram.hpp; always, for the final report) and, when
/// enabled, in the histogram actorps_staleness.
void record_staleness(ps_stats& stats, uint64_t s);

/// The mailbox of `role` number `index` held `depth` messages (gauge
/// actorps_mailbox_depth, labels role and index).
void mailbox_depth(const char* role, uint32_t index, size_t depth);

/// Samples `self`'s mailbox from inside the actor (CAF 0.17's
/// `mailbox().size()` may only be called by the actor itself). The depth is
/// as of the last message the actor handled at this hook.
template <class Self>
void sample_mailbox(Self* self, const char* role, uint32_t index) {
  if (enabled())
    mailbox_depth(role, index, self->mailbox().size());
}

/// The dispatcher holds `queued` closures in its queue and `running` on
/// workers (gauges actorps_closures_queued and actorps_closures_running).
void dispatcher_closures(size_t queued, size_t running);

/// Samples the dispatcher's queue, the closures its workers hold (per
/// worker, a record whose `running` is a container of closure pointers)
/// and its mailbox when it goes out of scope: one line at the top of a
/// function samples at every return.
template <class Self, class Queue, class Workers>
class dispatcher_sampler {
public:
  dispatcher_sampler(Self* self, const Queue& queue, const Workers& workers)
    : self_(self), queue_(queue), workers_(workers) {
    // nop
  }

  dispatcher_sampler(const dispatcher_sampler&) = delete;
  dispatcher_sampler& operator=(const dispatcher_sampler&) = delete;

  ~dispatcher_sampler() {
    if (!enabled())
      return;
    size_t busy = 0;
    for (auto& worker : workers_)
      busy += worker.running.size();
    dispatcher_closures(queue_.size(), busy);
    mailbox_depth("dispatcher", 0, self_->mailbox().size());
  }

private:
  Self* self_;
  const Queue& queue_;
  const Workers& workers_;
};

/// Node events the coordinator sees (counters actorps_failures_total and
/// actorps_restarts_total, label role).
enum class node_event : uint8_t { worker_lost, worker_back, ps_lost, ps_back };

void count(node_event e);

} // namespace telemetry

} // namespace actorps
