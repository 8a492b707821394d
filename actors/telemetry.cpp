#include "actors/telemetry.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "actors/messages.hpp"
#include "core/staleness_histogram.hpp"

namespace actorps::telemetry {

namespace detail {

std::atomic<bool> on{false};

} // namespace detail

namespace {

/// Latency buckets, seconds: 50 us (an in-process push of 1K floats is
/// ~10 us) to 10 s (a stalled server).
const prometheus::Histogram::BucketBoundaries latency_bounds = {
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
  0.05,    0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0};

/// The families of this file and, per parameter server, its two latency
/// histograms (Family::Add hashes the labels under a lock; a push should
/// not pay that).
struct store {
  std::shared_ptr<prometheus::Registry> reg
    = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Histogram>& pull_latency
    = prometheus::BuildHistogram()
        .Name("actorps_pull_latency_seconds")
        .Help("Round trip of a worker's pull from one parameter server, "
              "measured at the worker")
        .Register(*reg);
  prometheus::Family<prometheus::Histogram>& push_latency
    = prometheus::BuildHistogram()
        .Name("actorps_push_latency_seconds")
        .Help("Round trip of a worker's push to one parameter server until "
              "its ack (under sync: until the round closed), measured at "
              "the worker")
        .Register(*reg);
  prometheus::Family<prometheus::Histogram>& staleness
    = prometheus::BuildHistogram()
        .Name("actorps_staleness")
        .Help("Staleness of the pushes the parameter servers of this process "
              "applied: server clock at apply time minus the clock the "
              "gradient was read at")
        .Register(*reg);
  prometheus::Histogram* staleness_all = nullptr;
  prometheus::Family<prometheus::Gauge>& mailbox
    = prometheus::BuildGauge()
        .Name("actorps_mailbox_depth")
        .Help("Messages waiting in an actor's mailbox, sampled by the actor "
              "as it handles its busiest message")
        .Register(*reg);
  prometheus::Family<prometheus::Gauge>& closures
    = prometheus::BuildGauge()
        .Name("actorps_dispatcher_closures")
        .Help("Closures in the dispatcher: queued, or running on a worker")
        .Register(*reg);
  prometheus::Gauge* queued = nullptr;
  prometheus::Gauge* running = nullptr;
  prometheus::Family<prometheus::Counter>& failures
    = prometheus::BuildCounter()
        .Name("actorps_failures_total")
        .Help("Workers and parameter servers the coordinator lost")
        .Register(*reg);
  prometheus::Family<prometheus::Counter>& restarts
    = prometheus::BuildCounter()
        .Name("actorps_restarts_total")
        .Help("Lost workers and parameter servers that came back (restarted "
              "or reconnected)")
        .Register(*reg);

  std::mutex mtx;
  std::vector<prometheus::Histogram*> pulls; // by ps, guarded by mtx
  std::vector<prometheus::Histogram*> pushes;

  store() {
    std::vector<double> bounds(staleness_bounds.begin(),
                               staleness_bounds.end());
    staleness_all = &staleness.Add({}, bounds);
    queued = &closures.Add({{"state", "queued"}});
    running = &closures.Add({{"state", "running"}});
    // Present from the start, at 0, so that a scrape shows them.
    for (auto role : {"worker", "ps"}) {
      failures.Add({{"role", role}});
      restarts.Add({{"role", role}});
    }
  }

  prometheus::Histogram& latency(request_kind kind, uint32_t ps) {
    std::lock_guard<std::mutex> guard{mtx};
    auto& xs = kind == request_kind::pull ? pulls : pushes;
    if (xs.size() <= ps)
      xs.resize(ps + 1, nullptr);
    if (xs[ps] == nullptr) {
      auto& family = kind == request_kind::pull ? pull_latency : push_latency;
      xs[ps] = &family.Add({{"ps", std::to_string(ps)}}, latency_bounds);
    }
    return *xs[ps];
  }
};

/// Never destroyed: actors may still report while the process exits.
store& the_store() {
  static auto* s = new store;
  return *s;
}

} // namespace

prometheus::Registry& enable() {
  auto& reg = registry();
  detail::on.store(true, std::memory_order_relaxed);
  return reg;
}

prometheus::Registry& registry() {
  return *the_store().reg;
}

std::shared_ptr<prometheus::Registry> shared_registry() {
  return the_store().reg;
}

void request_latency(request_kind kind, uint32_t ps,
                     std::chrono::steady_clock::duration d) {
  if (!enabled())
    return;
  the_store().latency(kind, ps).Observe(
    std::chrono::duration<double>(d).count());
}

void record_staleness(ps_stats& stats, uint64_t s) {
  add_staleness(stats.staleness_buckets, s);
  if (enabled())
    the_store().staleness_all->Observe(static_cast<double>(s));
}

void mailbox_depth(const char* role, uint32_t index, size_t depth) {
  if (!enabled())
    return;
  the_store()
    .mailbox.Add({{"role", role}, {"index", std::to_string(index)}})
    .Set(static_cast<double>(depth));
}

void dispatcher_closures(size_t queued, size_t running) {
  if (!enabled())
    return;
  auto& st = the_store();
  st.queued->Set(static_cast<double>(queued));
  st.running->Set(static_cast<double>(running));
}

void count(node_event e) {
  if (!enabled())
    return;
  auto& st = the_store();
  switch (e) {
    case node_event::worker_lost:
      st.failures.Add({{"role", "worker"}}).Increment();
      break;
    case node_event::ps_lost:
      st.failures.Add({{"role", "ps"}}).Increment();
      break;
    case node_event::worker_back:
      st.restarts.Add({{"role", "worker"}}).Increment();
      break;
    case node_event::ps_back:
      st.restarts.Add({{"role", "ps"}}).Increment();
      break;
  }
}

} // namespace actorps::telemetry
