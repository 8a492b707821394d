#include "cluster/services/metrics_endpoint.hpp"

#include <algorithm>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "actors/cluster_coordinator.hpp"
#include "actors/telemetry.hpp"
#include "cluster/job/cluster.hpp"
#include "cluster/job/job_setup.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

// -- metrics_endpoint -----------------------------------------------------------

namespace {

/// `host` as civetweb's listening address wants it: a numeric IPv4 address,
/// or an IPv6 one in brackets; a name is resolved (its first address).
/// @throws input_error naming the host if it does not resolve.
std::string numeric_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
    throw input_error(fmt::format("--metrics-address: cannot resolve {}: {}",
                                  host, ::gai_strerror(rc)));
  char text[INET6_ADDRSTRLEN] = {0};
  bool v6 = found->ai_family == AF_INET6;
  ::getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof(text),
                nullptr, 0, NI_NUMERICHOST);
  ::freeaddrinfo(found);
  return v6 ? fmt::format("[{}]", text) : std::string{text};
}

} // namespace

/// Whether `a` and `b` are equal, in a time that depends on their length
/// only (a comparison that stops at the first difference would tell how
/// much of a guess was right).
static bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

metrics_endpoint::metrics_endpoint(uint16_t port, const std::string& host,
                                   const std::string& credentials) {
  auto address = fmt::format("{}:{}", numeric_host(host), port);
  telemetry::enable();
  try {
    // Several threads, and a connection that sends no request within 2 s
    // is closed: idle connections must not hold up a scrape (civetweb
    // serves one connection per thread).
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
      "listening_ports", address, "num_threads",
      std::to_string(metrics_threads), "request_timeout_ms", "2000"});
  } catch (const std::exception& e) {
    throw input_error(fmt::format("--metrics-port: cannot listen on {} (is "
                                  "the port in use?): {}",
                                  address, e.what()));
  }
  if (!credentials.empty()) {
    auto colon = credentials.find(':');
    auto user = credentials.substr(0, colon);
    auto password = credentials.substr(colon + 1);
    exposer_->RegisterAuth(
      [user, password](const std::string& u, const std::string& p) {
        return same_secret(u, user) & same_secret(p, password);
      },
      "actorps");
  }
  exposer_->RegisterCollectable(telemetry::shared_registry());
  auto ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? port : static_cast<uint16_t>(ports.front());
}

metrics_endpoint::~metrics_endpoint() {
  // nop: the Exposer stops its thread
}

std::unique_ptr<metrics_endpoint>
open_metrics_endpoint(int port, const std::string& host, const char* role,
                      int index, const std::string& auth_file) {
  if (port < 0)
    return nullptr;
  if (port > 65535)
    throw input_error(fmt::format("--metrics-port: {} is not a TCP port "
                                  "(0-65535)",
                                  port));
  std::string credentials;
  if (!auth_file.empty()) {
    std::ifstream in{auth_file};
    if (!in || !std::getline(in, credentials))
      throw input_error(fmt::format("--metrics-auth: cannot read {}",
                                    auth_file));
    if (!credentials.empty() && credentials.back() == '\r')
      credentials.pop_back();
    auto colon = credentials.find(':');
    if (colon == std::string::npos || colon == 0
        || colon + 1 == credentials.size())
      throw input_error(fmt::format("--metrics-auth: {}: its first line must "
                                    "be USER:PASSWORD",
                                    auth_file));
  }
  auto ep = std::make_unique<metrics_endpoint>(static_cast<uint16_t>(port),
                                               host, credentials);
  log::info(role, index, "metrics on http://{}:{}/metrics{}", host, ep->port(),
            credentials.empty() ? "" : " (basic authentication)");
  return ep;
}

int metrics_port_of(int base, const cluster_spec& spec, const task_id& task) {
  if (base <= 0)
    return base;
  int64_t offset = 0;
  if (task.type == "ps")
    offset = 1 + int64_t{task.index};
  else if (task.type == "worker")
    offset = 1 + int64_t(spec.ps.size()) + task.index;
  else if (task.type == "evaluator")
    offset = 1 + int64_t(spec.ps.size() + spec.worker.size());
  auto port = int64_t{base} + offset;
  if (port > 65535)
    throw input_error(fmt::format("--metrics-port: {} + {} for {} {} is past "
                                  "65535; give a lower port",
                                  base, offset, task.type, task.index));
  return static_cast<int>(port);
}

// -- prometheus_callback ----------------------------------------------------------

namespace {

prometheus::Counter& counter(const char* name, const char* help) {
  return prometheus::BuildCounter()
    .Name(name)
    .Help(help)
    .Register(telemetry::enable())
    .Add({});
}

prometheus::Gauge& gauge(const char* name, const char* help) {
  return prometheus::BuildGauge()
    .Name(name)
    .Help(help)
    .Register(telemetry::enable())
    .Add({});
}

constexpr const char* closure_states[] = {"scheduled", "finished", "failed",
                                          "cancelled", "reexecuted"};

} // namespace

prometheus_callback::prometheus_callback()
  : steps_(counter("actorps_steps_total",
                   "Training steps (closures) finished, as fit saw them")),
    samples_(counter("actorps_samples_total", "Training examples processed")),
    closures_(prometheus::BuildCounter()
                .Name("actorps_closures_total")
                .Help("The coordinator's closures by what became of them: "
                      "scheduled, finished, failed, cancelled, and extra "
                      "runs after a lost worker (reexecuted)")
                .Register(telemetry::enable())),
    rate_(gauge("actorps_samples_per_second",
                "Training examples per second over the last second or so")),
    epoch_(gauge("actorps_epoch", "Epochs completed")),
    global_step_(gauge("actorps_global_step",
                       "Closures finished in the whole job at the last pause")),
    epoch_metric_(prometheus::BuildGauge()
                    .Name("actorps_epoch_metric")
                    .Help("The last epoch's metrics: train_loss, test_loss, "
                          "test_accuracy or test_auc, samples_per_sec")
                    .Register(telemetry::enable())) {
  for (auto state : closure_states)
    closures_.Add({{"state", state}});
}

void prometheus_callback::on_train_begin(fit_state& st) {
  auto c = st.cl->coordinator().counts();
  uint64_t now[] = {c.scheduled, c.finished, c.failed, c.cancelled,
                    c.reexecuted};
  std::copy(std::begin(now), std::end(now), std::begin(seen_));
  window_start_ = steady_clock::now();
  window_samples_ = 0;
  epoch_.Set(st.progress.epoch);
  global_step_.Set(static_cast<double>(st.progress.global_step));
}

void prometheus_callback::on_step_end(fit_state&, const step_result& r) {
  steps_.Increment();
  samples_.Increment(static_cast<double>(r.samples));
  window_samples_ += r.samples;
}

void prometheus_callback::on_wait(fit_state& st, uint64_t) {
  update(st);
}

void prometheus_callback::on_pause(fit_state& st) {
  update(st);
  global_step_.Set(static_cast<double>(st.progress.global_step));
}

void prometheus_callback::on_epoch_end(fit_state& st, epoch_metrics& m) {
  epoch_.Set(m.epoch);
  epoch_metric_.Add({{"metric", "train_loss"}}).Set(m.train_loss);
  epoch_metric_.Add({{"metric", "samples_per_sec"}}).Set(m.samples_per_sec);
  for (auto& [name, value] : m.test)
    epoch_metric_.Add({{"metric", name}}).Set(value);
  update(st);
}

void prometheus_callback::on_train_end(fit_state& st) {
  update(st);
  rate_.Set(0);
}

void prometheus_callback::update(fit_state& st) {
  auto c = st.cl->coordinator().counts();
  uint64_t now[] = {c.scheduled, c.finished, c.failed, c.cancelled,
                    c.reexecuted};
  for (size_t i = 0; i < std::size(now); ++i) {
    if (now[i] > seen_[i])
      closures_.Add({{"state", closure_states[i]}})
        .Increment(static_cast<double>(now[i] - seen_[i]));
    seen_[i] = now[i];
  }
  auto t = steady_clock::now();
  auto dt = std::chrono::duration<double>(t - window_start_).count();
  if (dt >= 1.0) {
    rate_.Set(double(window_samples_) / dt);
    window_samples_ = 0;
    window_start_ = t;
  }
}

} // namespace actorps
