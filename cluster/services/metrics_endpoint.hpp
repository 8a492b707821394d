#pragma once

// Watching a job live: an HTTP endpoint that serves this process's metrics
// in Prometheus' text format (prometheus-cpp's Exposer, from Debian's
// prometheus-cpp-dev), and the fit callback that keeps the job's progress
// there. What the actors themselves record (latencies, staleness, mailboxes,
// the dispatcher's queue, failures and restarts) comes from
// actors/telemetry.hpp.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cluster/spec/cluster_spec.hpp"
#include "cluster/services/fit.hpp"

namespace prometheus {
class Exposer;
template <class T>
class Family;
class Counter;
class Gauge;
} // namespace prometheus

namespace actorps {

/// Serves http://HOST:PORT/metrics (Prometheus' text exposition format,
/// version 0.0.4) from civetweb threads (metrics_threads of them, so that
/// idle connections do not hold up a scrape) for as long as it lives, and
/// turns the actors' telemetry hooks on (telemetry::enable) for the rest
/// of the process's life. Plain HTTP without authentication: bind it to an
/// address only those who may read the job's metrics can reach.
class metrics_endpoint {
public:
  /// @param port  TCP port; 0 picks a free one (see port()).
  /// @param host  address to bind (open_metrics_endpoint: 127.0.0.1 in one
  ///              process, a node's own address in a cluster, unless
  ///              --metrics-address says otherwise; "0.0.0.0" is every
  ///              interface).
  /// @throws input_error "--metrics-port: cannot listen on HOST:PORT ..." if
  ///         the port cannot be bound (in use, no permission, an address
  ///         this machine does not have).
  /// @param credentials  "USER:PASSWORD": scrapes must carry them (HTTP
  ///              basic authentication, Prometheus' `basic_auth`); empty:
  ///              none asked for.
  explicit metrics_endpoint(uint16_t port,
                            const std::string& host = "127.0.0.1",
                            const std::string& credentials = {});

  ~metrics_endpoint();

  metrics_endpoint(const metrics_endpoint&) = delete;
  metrics_endpoint& operator=(const metrics_endpoint&) = delete;

  /// The port it listens on.
  uint16_t port() const noexcept {
    return port_;
  }

private:
  std::unique_ptr<prometheus::Exposer> exposer_;
  uint16_t port_ = 0;
};

/// Civetweb threads of a metrics endpoint: connections served at once (a
/// connection that sends no request within 2 s is closed).
inline constexpr int metrics_threads = 8;

/// Starts a metrics endpoint on `host` if `port` >= 0 (0: a free port) and
/// logs its URL for `role` `index` ("metrics on
/// http://127.0.0.1:9400/metrics"); nullptr for a negative port. With
/// `auth_file`, scrapes must authenticate with the "USER:PASSWORD" on its
/// first line (read here: a secret never goes on a command line).
/// @throws input_error as metrics_endpoint, or naming `auth_file` if it
///         cannot be read or its first line is not USER:PASSWORD.
std::unique_ptr<metrics_endpoint>
open_metrics_endpoint(int port, const std::string& host, const char* role,
                      int index, const std::string& auth_file = {});

/// The metrics port of member `task` of `spec` when the cluster's nodes
/// serve from `base`, so that nodes sharing a host do not collide: the chief
/// `base`, ps i base + 1 + i, worker i base + 1 + ps + i, the evaluator base
/// + 1 + ps + workers. A negative base (no endpoint) and 0 (each node picks a
/// free port) are returned as they are.
/// @throws input_error if the port would exceed 65535.
int metrics_port_of(int base, const cluster_spec& spec, const task_id& task);

/// Keeps the job's progress on the metrics endpoint while fit runs:
/// counters actorps_steps_total and actorps_samples_total (closures and
/// examples trained), actorps_closures_total{state} (the coordinator's
/// closure counts: scheduled, finished, failed, cancelled, reexecuted),
/// gauges actorps_samples_per_second (over the last second or so),
/// actorps_epoch and actorps_global_step, and actorps_epoch_metric{metric}
/// (the last epoch's train_loss and test metrics). Enables telemetry.
class prometheus_callback : public fit_callback {
public:
  prometheus_callback();

  void on_train_begin(fit_state& st) override;
  void on_step_end(fit_state& st, const step_result& r) override;
  void on_wait(fit_state& st, uint64_t done) override;
  void on_pause(fit_state& st) override;
  void on_epoch_end(fit_state& st, epoch_metrics& m) override;
  void on_train_end(fit_state& st) override;

private:
  using steady_clock = std::chrono::steady_clock;

  /// Brings the closure counters and the rate up to date.
  void update(fit_state& st);

  prometheus::Counter& steps_;
  prometheus::Counter& samples_;
  prometheus::Family<prometheus::Counter>& closures_;
  prometheus::Gauge& rate_;
  prometheus::Gauge& epoch_;
  prometheus::Gauge& global_step_;
  prometheus::Family<prometheus::Gauge>& epoch_metric_;
  /// The closure counts already added to the counters.
  uint64_t seen_[5] = {0, 0, 0, 0, 0};
  /// Samples since window_start_.
  uint64_t window_samples_ = 0;
  steady_clock::time_point window_start_;
};

} // namespace actorps
