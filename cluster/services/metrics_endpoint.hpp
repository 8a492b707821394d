#pragma once

// Watching a job live: an HTTP(S) endpoint that serves this process's
// metrics in Prometheus' text format (prometheus-cpp's registry and text
// serializer, from Debian's prometheus-cpp-dev, served by cpp-httplib, from
// libcpp-httplib-dev), and the fit callback that keeps the job's progress
// there. What the actors themselves record (latencies, staleness, mailboxes,
// the dispatcher's queue, failures and restarts) comes from
// actors/telemetry.hpp.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "cluster/spec/cluster_spec.hpp"
#include "cluster/services/fit.hpp"

namespace httplib {
class Server;
} // namespace httplib

namespace prometheus {
template <class T>
class Family;
class Counter;
class Gauge;
} // namespace prometheus

namespace actorps {

struct tls_settings;
struct node_identity;

/// Who may scrape a metrics endpoint, and over what.
struct metrics_access {
  /// The address to bind ("0.0.0.0": every interface; a name is resolved).
  std::string host = "127.0.0.1";
  /// "USER:PASSWORD": scrapes must carry them (HTTP basic authentication,
  /// Prometheus' `basic_auth`); empty: not asked for.
  std::string basic;
  /// A bearer token: scrapes must send `Authorization: Bearer TOKEN`
  /// (Prometheus' `authorization: {credentials_file: ...}`); empty: not
  /// asked for. With both, either is accepted.
  std::string token;
  /// PEM certificate and key: serve HTTPS with them (the node's own, from
  /// the cluster's certificates); empty: plain HTTP.
  std::string cert;
  std::string key;
  /// A CA certificate: scrapers must present a client certificate it issued
  /// (mutual TLS, Prometheus' `tls_config: {cert_file, key_file}`); empty:
  /// any client. Needs cert and key.
  std::string client_ca;
};

/// Serves https?://HOST:PORT/metrics (Prometheus' text exposition format,
/// version 0.0.4) from a pool of metrics_threads threads (so that idle
/// connections do not hold up a scrape; a connection that sends no request
/// within 2 s is closed) for as long as it lives, and turns the actors'
/// telemetry hooks on (telemetry::enable) for the rest of the process's
/// life. A scrape without the credentials `access` asks for gets 401; every
/// other path 404.
class metrics_endpoint {
public:
  /// @param port  TCP port; 0 picks a free one (see port()).
  /// @throws input_error "--metrics-address: cannot resolve HOST ..." or
  ///         "--metrics-port: cannot listen on HOST:PORT ..." if the port
  ///         cannot be bound (in use, no permission, an address this machine
  ///         does not have), "--metrics-tls: ..." naming a certificate, key
  ///         or CA file that cannot be used.
  metrics_endpoint(uint16_t port, const metrics_access& access);

  ~metrics_endpoint();

  metrics_endpoint(const metrics_endpoint&) = delete;
  metrics_endpoint& operator=(const metrics_endpoint&) = delete;

  /// The port it listens on.
  uint16_t port() const noexcept {
    return port_;
  }

  /// "https" or "http".
  const char* scheme() const noexcept {
    return tls_ ? "https" : "http";
  }

private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
  bool tls_ = false;
};

/// Threads of a metrics endpoint: connections served at once.
inline constexpr int metrics_threads = 8;

/// How a process's metrics endpoint is reached, as the flags say (the
/// train_options fields of the same names).
struct metrics_settings {
  /// --metrics-address ("" = the caller's default).
  std::string address;
  /// --metrics-auth FILE: its first line is USER:PASSWORD.
  std::string auth_file;
  /// --metrics-token FILE: its first line is the bearer token.
  std::string token_file;
  /// --metrics-tls: "" or "off" (plain HTTP), "on" (HTTPS with the node's
  /// certificate), "mutual" (and scrapers present a certificate of the
  /// cluster's CA).
  std::string tls;
};

/// Starts a metrics endpoint if `port` >= 0 (0: a free port) and logs its
/// URL for `role` `index` ("metrics on https://127.0.0.1:9400/metrics
/// (bearer token, TLS)"); nullptr for a negative port. Binds
/// settings.address, or `default_host` if it is empty. Secrets are read
/// from files here (never from a command line). With settings.tls, the
/// certificate and key are node `me`'s of `tls` (node_tls_files).
/// @throws input_error as metrics_endpoint; naming the file if a secret
///         cannot be read or is malformed (auth: USER:PASSWORD; token: not
///         empty, no spaces); "--metrics-tls: ..." for an unknown mode or
///         when the job has no certificates (tls off or not given).
std::unique_ptr<metrics_endpoint>
open_metrics_endpoint(int port, const metrics_settings& settings,
                      const std::string& default_host, const char* role,
                      int index, const tls_settings& tls,
                      const node_identity& me);

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
/// (the last epoch's train_loss and test metrics; a stream's
/// progressive_loss and progressive_auc per part), and actorps_tables{what}
/// (rows, bytes, admission and eviction counts over all servers, at each
/// epoch's end; actorps_tables{table, what} the same of each table).
/// Enables telemetry.
class prometheus_callback : public fit_callback {
public:
  prometheus_callback();

  void on_train_begin(fit_state& st) override;
  void on_step_end(fit_state& st, const step_result& r) override;
  void on_wait(fit_state& st, uint64_t done) override;
  void on_pause(fit_state& st) override;
  void on_epoch_end(fit_state& st, epoch_metrics& m) override;
  void on_train_end(fit_state& st) override;
  /// actorps_progressive_window{metric="loss"|"auc"}: the last window's.
  void on_window(fit_state& st, const window_metrics& w) override;

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
  prometheus::Family<prometheus::Gauge>& table_gauge_;
  prometheus::Family<prometheus::Gauge>& window_gauge_;
  /// The closure counts already added to the counters.
  uint64_t seen_[5] = {0, 0, 0, 0, 0};
  /// Samples since window_start_.
  uint64_t window_samples_ = 0;
  steady_clock::time_point window_start_;
};

} // namespace actorps
