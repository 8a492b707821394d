#include "cluster/serve/prediction_server.hpp"

#include <exception>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <sys/socket.h>

#include "core/error.hpp"

namespace actorps {

namespace {

using json = nlohmann::json;

constexpr const char* json_type = "application/json";

void answer_error(httplib::Response& res, int status,
                  const std::string& message) {
  res.status = status;
  res.set_content(error_json(message), json_type);
}

/// The endpoint a path belongs to, for the metrics' label.
std::string endpoint_of(const std::string& path) {
  auto ends_with = [&](const char* tail) {
    std::string t{tail};
    return path.size() >= t.size()
           && path.compare(path.size() - t.size(), t.size(), t) == 0;
  };
  if (path.rfind("/v1/models/", 0) == 0) {
    if (ends_with(":predict"))
      return "predict";
    if (ends_with("/metadata"))
      return "metadata";
    return "model";
  }
  if (path == "/healthz")
    return "health";
  if (path == "/metrics")
    return "metrics";
  return "other";
}

/// TensorFlow Serving's GetModelStatus answer for a version that serves.
std::string status_json(uint64_t version) {
  json j = {{"model_version_status",
             json::array({{{"version", std::to_string(version)},
                           {"state", "AVAILABLE"},
                           {"status",
                            {{"error_code", "OK"}, {"error_message", ""}}}}})}};
  return j.dump(1);
}

std::string metadata_json(const std::string& name, const servable& model) {
  const auto& s = model.schema();
  json fields = json::array();
  for (auto& f : s.fields)
    fields.push_back({{"name", f.name},
                      {"vocabulary", f.vocabulary},
                      {"weighted", f.weighted}});
  json j = {
    {"model_spec",
     {{"name", name}, {"version", std::to_string(model.version())}}},
    {"metadata",
     {{"dense", s.dense_dim},
      {"fields", fields},
      {"labels", s.labels == label_kind::binary ? "binary" : "multiclass"},
      {"classes", s.classes},
      {"outputs_per_example", model.outputs_per_example()}}}};
  return j.dump(1);
}

} // namespace

prediction_server::prediction_server(const model_watcher& models,
                                     serve_metrics& metrics,
                                     const serve_options& opts)
  : models_(models), metrics_(metrics), opts_(opts) {
  name_ = opts_.name.empty() ? models_.current()->name() : opts_.name;
  tls_ = !opts_.tls_cert.empty();
  if (tls_) {
    auto* ca = opts_.tls_client_ca.empty() ? nullptr
                                           : opts_.tls_client_ca.c_str();
    auto server = std::make_unique<httplib::SSLServer>(
      opts_.tls_cert.c_str(), opts_.tls_key.c_str(), ca);
    if (!server->is_valid())
      throw input_error(fmt::format(
        "--tls: cannot serve HTTPS with certificate {}, key {}{}{} "
        "(unreadable, not PEM, or the key does not match)",
        opts_.tls_cert, opts_.tls_key, ca ? " and client CA " : "",
        ca ? opts_.tls_client_ca : std::string{}));
    server_ = std::move(server);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  batcher_ = std::make_unique<predict_batcher>(
    opts_.batching, &metrics_.counters(),
    [this](uint64_t rows) { metrics_.batch(rows); });
  metrics_.watch_queue([this] { return batcher_->queued_rows(); });
  auto& srv = *server_;
  auto threads = opts_.http_threads == 0 ? 1u : opts_.http_threads;
  srv.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  srv.set_payload_max_length(opts_.max_body_bytes);
  srv.set_read_timeout(opts_.read_timeout);
  srv.set_write_timeout(opts_.write_timeout);
  srv.set_keep_alive_timeout(opts_.keep_alive.count());
  // A kept-alive connection holds a thread of the pool: after this many
  // requests it is closed ("Connection: close"; the client reconnects and
  // queues behind the others), so that more clients than threads take
  // turns instead of waiting for one to leave (cpp-httplib's default, 5,
  // costs a reconnection every 5 requests).
  srv.set_keep_alive_max_count(opts_.keep_alive_requests);
  srv.set_tcp_nodelay(true);
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which
  // a second server could bind the same port and take half the requests.
  int listening = -1;
  srv.set_socket_options([&listening](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening = sock;
  });
  routes();
  int bound = opts_.port == 0
                ? srv.bind_to_any_port(opts_.host)
                : (srv.bind_to_port(opts_.host, opts_.port) ? opts_.port : -1);
  if (bound <= 0)
    throw input_error(fmt::format("--port: cannot listen on {}:{} (is the "
                                  "port in use, or the address not this "
                                  "machine's?)",
                                  opts_.host, opts_.port));
  // Debian's cpp-httplib listens with a backlog of 5: clients that
  // reconnect together (kept-alive connections closed after the same
  // number of requests) overflow it, and each dropped connection waits
  // for its SYN's retransmission, 1 s. Linux takes a second listen() on a
  // listening socket as a new backlog.
  if (listening >= 0)
    ::listen(listening, 1024);
  srv.set_socket_options([](int) {}); // (it held a reference to `listening`)
  port_ = static_cast<uint16_t>(bound);
  thread_ = std::thread{[this] { server_->listen_after_bind(); }};
}

prediction_server::~prediction_server() {
  server_->stop();
  if (thread_.joinable())
    thread_.join();
  // The connection threads are gone (the pool is joined when listening
  // ends): nobody waits on the batcher any more.
  batcher_.reset();
}

void prediction_server::routes() {
  auto& srv = *server_;
  // Checks NAME and the optional version of a path against what serves;
  // answers 404 and returns null when they do not match.
  auto resolve = [this](const httplib::Request& req, httplib::Response& res)
    -> std::shared_ptr<const servable> {
    auto model = models_.current();
    const auto& name = req.matches[1].str();
    if (name != name_) {
      answer_error(res, 404,
                   fmt::format("model \"{}\" is not served here (this "
                               "server serves \"{}\")",
                               name.substr(0, 40), name_));
      return nullptr;
    }
    if (req.matches.size() > 2 && req.matches[2].matched) {
      const auto& v = req.matches[2].str();
      if (v != std::to_string(model->version())) {
        answer_error(res, 404,
                     fmt::format("version {} of \"{}\" is not served (version "
                                 "{} is)",
                                 v.substr(0, 20), name_, model->version()));
        return nullptr;
      }
    }
    return model;
  };
  // The body is read here, not by cpp-httplib before the handler: it
  // would parse a body sent as application/x-www-form-urlencoded (curl -d's
  // default type) as a form and refuse one over 8 KiB with 413.
  srv.Post(R"(/v1/models/([^/:]+)(?:/versions/([0-9]+))?:predict)",
           [this, resolve](const httplib::Request& req,
                           httplib::Response& res,
                           const httplib::ContentReader& content) {
             if (req.is_multipart_form_data()) {
               answer_error(res, 400, "a predict body is JSON, not "
                                      "multipart form data");
               return;
             }
             std::string body;
             bool read = content([&body](const char* data, size_t n) {
               body.append(data, n);
               return true;
             });
             if (!read) {
               if (res.status == 413)
                 answer_error(res, 413,
                              fmt::format("the request body is larger than "
                                          "{} bytes (--max-body-bytes)",
                                          opts_.max_body_bytes));
               else
                 answer_error(res, 400, "the request body could not be "
                                        "read (cut short, or not sent "
                                        "within the read timeout)");
               return;
             }
             auto start = std::chrono::steady_clock::now();
             auto model = resolve(req, res);
             if (!model)
               return;
             try {
               auto batch = parse_predict_request(body, model->schema(),
                                                  opts_.limits);
               auto a = batcher_->predict(model, std::move(batch));
               res.set_content(predictions_json(a.predictions.data(),
                                                a.predictions.size()
                                                  / a.outputs,
                                                a.outputs),
                               json_type);
             } catch (const request_error& e) {
               answer_error(res, e.status(), e.what());
             }
             metrics_.latency(std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count());
           });
  srv.Get(R"(/v1/models/([^/:]+)(?:/versions/([0-9]+))?)",
          [resolve](const httplib::Request& req, httplib::Response& res) {
            if (auto model = resolve(req, res))
              res.set_content(status_json(model->version()), json_type);
          });
  srv.Get(R"(/v1/models/([^/:]+)(?:/versions/([0-9]+))?/metadata)",
          [this, resolve](const httplib::Request& req,
                          httplib::Response& res) {
            if (auto model = resolve(req, res))
              res.set_content(metadata_json(name_, *model), json_type);
          });
  srv.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    auto model = models_.current();
    json j = {{"status", "ok"},
              {"model", name_},
              {"version", std::to_string(model->version())}};
    res.set_content(j.dump(), json_type);
  });
  srv.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.scrape(), "text/plain; version=0.0.4");
  });
  // What cpp-httplib answers itself (no route: 404; a body over the limit:
  // 413; a request it cannot read: 400) gets a JSON body too.
  srv.set_error_handler(httplib::Server::HandlerWithResponse{
    [this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty())
      return httplib::Server::HandlerResponse::Unhandled;
    std::string what;
    switch (res.status) {
      case 404:
        what = fmt::format("no such endpoint: {} {} (docs/reference/"
                           "serving.md lists them)",
                           req.method.substr(0, 10), req.path.substr(0, 80));
        break;
      case 413:
        what = fmt::format("the request body is larger than {} bytes "
                           "(--max-body-bytes)",
                           opts_.max_body_bytes);
        break;
      case 400:
        what = "a request that is not HTTP/1.1 as expected";
        break;
      default:
        what = fmt::format("HTTP status {}", res.status);
    }
    answer_error(res, res.status, what);
    return httplib::Server::HandlerResponse::Handled;
  }});
  srv.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                               std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    answer_error(res, 500, "internal error: " + what);
  });
  srv.set_logger([this](const httplib::Request& req,
                        const httplib::Response& res) {
    metrics_.answered(endpoint_of(req.path), res.status);
  });
}

} // namespace actorps
