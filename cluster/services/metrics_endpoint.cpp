#include "cluster/services/metrics_endpoint.hpp"

#include <algorithm>
#include <exception>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "actors/cluster_coordinator.hpp"
#include "actors/telemetry.hpp"
#include "cluster/job/cluster.hpp"
#include "cluster/job/job_setup.hpp"
#include "cluster/net/tls.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"

namespace actorps {

// -- metrics_endpoint -----------------------------------------------------------

namespace {

/// Refuses a host that does not resolve, with a message naming it (the
/// server's own bind would only fail).
void check_resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
    throw input_error(fmt::format("--metrics-address: cannot resolve {}: {}",
                                  host, ::gai_strerror(rc)));
  ::freeaddrinfo(found);
}

/// Whether `a` and `b` are equal, in a time that depends on their length
/// only (a comparison that stops at the first difference would tell how
/// much of a guess was right).
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

/// The Authorization header values `access` accepts (none: anyone).
std::vector<std::string> accepted_headers(const metrics_access& access) {
  std::vector<std::string> out;
  if (!access.basic.empty()) {
    auto colon = access.basic.find(':');
    out.push_back(httplib::make_basic_authentication_header(
                    access.basic.substr(0, colon),
                    access.basic.substr(colon + 1))
                    .second);
  }
  if (!access.token.empty())
    out.push_back("Bearer " + access.token);
  return out;
}

} // namespace

metrics_endpoint::metrics_endpoint(uint16_t port,
                                   const metrics_access& access) {
  check_resolves(access.host);
  tls_ = !access.cert.empty();
  if (tls_) {
    auto* ca = access.client_ca.empty() ? nullptr : access.client_ca.c_str();
    auto server = std::make_unique<httplib::SSLServer>(
      access.cert.c_str(), access.key.c_str(), ca);
    if (!server->is_valid())
      throw input_error(fmt::format(
        "--metrics-tls: cannot serve HTTPS with certificate {}, key {}{}{} "
        "(unreadable, not PEM, or the key does not match)",
        access.cert, access.key, ca ? " and client CA " : "",
        ca ? access.client_ca : std::string{}));
    server_ = std::move(server);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  auto& srv = *server_;
  // Several threads, and a connection that sends no request within 2 s is
  // closed: idle connections must not hold up a scrape (each connection
  // holds a thread while it waits).
  srv.new_task_queue = [] { return new httplib::ThreadPool(metrics_threads); };
  srv.set_read_timeout(2, 0);
  srv.set_write_timeout(5, 0);
  srv.set_keep_alive_timeout(2);
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which
  // a second process could bind the same port and take half the scrapes
  // (and a taken port would not be refused).
  srv.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  auto accepted = accepted_headers(access);
  telemetry::enable();
  auto registry = telemetry::shared_registry();
  srv.Get("/metrics", [accepted, registry](const httplib::Request& req,
                                           httplib::Response& res) {
    if (!accepted.empty()) {
      auto given = req.get_header_value("Authorization");
      bool ok = false;
      for (auto& a : accepted)
        ok |= same_secret(given, a);
      if (!ok) {
        res.status = 401;
        res.set_header("WWW-Authenticate", "Basic realm=\"actorps\"");
        res.set_content("unauthorized\n", "text/plain");
        return;
      }
    }
    prometheus::TextSerializer text;
    res.set_content(text.Serialize(registry->Collect()),
                    "text/plain; version=0.0.4");
  });
  int bound = port == 0 ? srv.bind_to_any_port(access.host)
                        : (srv.bind_to_port(access.host, port) ? port : -1);
  if (bound <= 0)
    throw input_error(fmt::format("--metrics-port: cannot listen on {}:{} (is "
                                  "the port in use, or the address not this "
                                  "machine's?)",
                                  access.host, port));
  port_ = static_cast<uint16_t>(bound);
  thread_ = std::thread{[this] { server_->listen_after_bind(); }};
}

metrics_endpoint::~metrics_endpoint() {
  server_->stop();
  if (thread_.joinable())
    thread_.join();
}

namespace {

/// The first line of `file` (without a CR), for `flag`'s messages.
std::string first_line(const std::string& file, const char* flag) {
  std::ifstream in{file};
  std::string line;
  if (!in || !std::getline(in, line))
    throw input_error(fmt::format("{}: cannot read {}", flag, file));
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  return line;
}

} // namespace

std::unique_ptr<metrics_endpoint>
open_metrics_endpoint(int port, const metrics_settings& settings,
                      const std::string& default_host, const char* role,
                      int index, const tls_settings& tls,
                      const node_identity& me) {
  if (port < 0)
    return nullptr;
  if (port > 65535)
    throw input_error(fmt::format("--metrics-port: {} is not a TCP port "
                                  "(0-65535)",
                                  port));
  metrics_access access;
  access.host = settings.address.empty() ? default_host : settings.address;
  std::vector<std::string> how;
  if (!settings.auth_file.empty()) {
    access.basic = first_line(settings.auth_file, "--metrics-auth");
    auto colon = access.basic.find(':');
    if (colon == std::string::npos || colon == 0
        || colon + 1 == access.basic.size())
      throw input_error(fmt::format("--metrics-auth: {}: its first line must "
                                    "be USER:PASSWORD",
                                    settings.auth_file));
    how.push_back("basic authentication");
  }
  if (!settings.token_file.empty()) {
    access.token = first_line(settings.token_file, "--metrics-token");
    if (access.token.empty()
        || access.token.find_first_of(" \t") != std::string::npos)
      throw input_error(fmt::format("--metrics-token: {}: its first line must "
                                    "be the token (not empty, no spaces)",
                                    settings.token_file));
    how.push_back("bearer token");
  }
  const auto& mode = settings.tls;
  if (!mode.empty() && mode != "off") {
    if (mode != "on" && mode != "mutual")
      throw input_error(fmt::format("--metrics-tls: \"{}\" is not a mode "
                                    "(off, on, mutual)",
                                    mode));
    if (tls.off || !tls.given())
      throw input_error("--metrics-tls: the job has no certificates (give "
                        "--tls DIR, or --tls-cert and --tls-key; not --tls "
                        "off)");
    auto files = node_tls_files(tls, me);
    access.cert = files.cert;
    access.key = files.key;
    if (mode == "mutual")
      access.client_ca = files.ca;
    how.push_back(mode == "mutual" ? "mutual TLS" : "TLS");
  }
  auto ep = std::make_unique<metrics_endpoint>(static_cast<uint16_t>(port),
                                               access);
  std::string said;
  for (auto& h : how)
    said += (said.empty() ? " (" : ", ") + h;
  if (!said.empty())
    said += ")";
  log::info(role, index, "metrics on {}://{}:{}/metrics{}", ep->scheme(),
            access.host, ep->port(), said);
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
                    .Register(telemetry::enable())),
    table_gauge_(prometheus::BuildGauge()
                   .Name("actorps_tables")
                   .Help("Embedding tables over all servers at the last "
                         "epoch (or stream part): rows, bytes, and since the "
                         "servers started rows admitted, keys pulled before "
                         "their admission (pulled_unadmitted), "
                         "gradients_dropped, evicted_ttl, evicted_l2, "
                         "evicted_budget; of one table with the label "
                         "table, of all without it")
                   .Register(telemetry::enable())),
    window_gauge_(prometheus::BuildGauge()
                    .Name("actorps_progressive_window")
                    .Help("A stream's last progressive window (test, then "
                          "train; data.progressive_window examples): loss "
                          "and auc")
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
  // The tables' rows and what admission and eviction did, summed over the
  // servers (one stats round trip per epoch, or per part of a stream): the
  // job's (label `what` only) and each table's (labels `table` and `what`).
  try {
    auto servers = st.cl->stats();
    table_stats job;
    std::vector<table_stats> tables;
    for (auto& s : servers) {
      job.add(table_stats{"", s.table_rows, s.table_bytes, s.rows_admitted,
                          s.keys_rejected, s.gradients_dropped, s.evicted_ttl,
                          s.evicted_l2, s.evicted_budget});
      add_table_stats(tables, s.tables);
    }
    constexpr const char* names[] = {
      "rows",        "bytes",      "admitted",      "pulled_unadmitted",
      "gradients_dropped", "evicted_ttl", "evicted_l2", "evicted_budget"};
    auto set = [&](std::map<std::string, std::string> labels,
                   const table_stats& t) {
      uint64_t now[] = {t.rows,        t.bytes,      t.admitted,
                        t.rejected,    t.gradients_dropped,
                        t.evicted_ttl, t.evicted_l2, t.evicted_budget};
      for (size_t i = 0; i < 8; ++i) {
        labels["what"] = names[i];
        table_gauge_.Add(labels).Set(double(now[i]));
      }
    };
    set({}, job);
    for (auto& t : tables)
      set({{"table", t.variable}}, t);
  } catch (const std::exception&) {
    // a lost server: its numbers come with the next epoch
  }
  epoch_.Set(m.epoch);
  epoch_metric_.Add({{"metric", "train_loss"}}).Set(m.train_loss);
  epoch_metric_.Add({{"metric", "samples_per_sec"}}).Set(m.samples_per_sec);
  for (auto& [name, value] : m.test)
    epoch_metric_.Add({{"metric", name}}).Set(value);
  update(st);
}

void prometheus_callback::on_window(fit_state&, const window_metrics& w) {
  window_gauge_.Add({{"metric", "loss"}}).Set(w.loss);
  window_gauge_.Add({{"metric", "auc"}}).Set(w.auc);
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
