#pragma once

// `actorps serve`'s HTTP(S) server: TensorFlow Serving's REST API
// (https://www.tensorflow.org/tfx/serving/api_rest) on cpp-httplib (Debian's
// libcpp-httplib-dev), answering with the servable a model_watcher keeps
// current, through a predict_batcher. The endpoints, limits and error codes
// are in docs/reference/serving.md:
//
//   POST /v1/models/NAME[/versions/V]:predict   {"predictions": [...]}
//   GET  /v1/models/NAME[/versions/V]           model_version_status
//   GET  /v1/models/NAME[/versions/V]/metadata  the schema of an instance
//   GET  /healthz                               {"status": "ok", ...}
//   GET  /metrics                               Prometheus text format
//
// Every error is `{"error": MESSAGE}` with a 4xx or 5xx status.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "cluster/serve/model_watcher.hpp"
#include "cluster/serve/predict_batcher.hpp"
#include "cluster/serve/predict_request.hpp"
#include "cluster/serve/serve_metrics.hpp"

namespace httplib {
class Server;
} // namespace httplib

namespace actorps {

/// How the server listens and what it accepts (`actorps serve` flags).
struct serve_options {
  /// The address to bind ("0.0.0.0": every interface).
  std::string host = "127.0.0.1";
  /// TCP port; 0 picks a free one (see prediction_server::port()). 8501 is
  /// TensorFlow Serving's REST port.
  uint16_t port = 8501;
  /// The model's name in the paths; empty: the export's (servable::name).
  std::string name;
  /// Request bodies larger than this get 413 before they are parsed.
  uint64_t max_body_bytes = 4 << 20;
  /// Instances per request, nesting.
  request_limits limits;
  /// Batching of concurrent requests.
  batching_options batching;
  /// Threads answering HTTP connections (each holds one connection while
  /// it is open, up to keep_alive_s idle).
  uint32_t http_threads = 32;
  /// A client that sends nothing for this long while a request is due is
  /// dropped; an answer that cannot be written for this long is abandoned.
  std::chrono::seconds read_timeout{5};
  std::chrono::seconds write_timeout{5};
  /// An idle kept-alive connection is closed after this.
  std::chrono::seconds keep_alive{5};
  /// A kept-alive connection is closed after this many requests, so that
  /// connections beyond http_threads take turns.
  uint32_t keep_alive_requests = 100;
  /// PEM certificate and key: HTTPS; empty: HTTP.
  std::string tls_cert;
  std::string tls_key;
  /// A CA certificate: clients must present a certificate it issued
  /// (mutual TLS); empty: any client. Needs tls_cert and tls_key.
  std::string tls_client_ca;
};

/// Serves predictions while it lives, on a thread of its own plus the
/// connection threads.
class prediction_server {
public:
  /// Binds and starts answering.
  /// @param models   where the current version comes from; must outlive
  ///                 the server.
  /// @param metrics  what it counts; must outlive the server.
  /// @throws input_error "--host: cannot resolve ...", "--port: cannot
  ///         listen on HOST:PORT ...", "--tls-...: ..." naming the files.
  prediction_server(const model_watcher& models, serve_metrics& metrics,
                    const serve_options& opts);

  /// Stops accepting, answers what was asked, joins the threads.
  ~prediction_server();

  prediction_server(const prediction_server&) = delete;
  prediction_server& operator=(const prediction_server&) = delete;

  uint16_t port() const noexcept {
    return port_;
  }

  /// "https" or "http".
  const char* scheme() const noexcept {
    return tls_ ? "https" : "http";
  }

  /// The model name the paths take.
  const std::string& name() const noexcept {
    return name_;
  }

private:
  void routes();

  const model_watcher& models_;
  serve_metrics& metrics_;
  serve_options opts_;
  std::string name_;
  std::unique_ptr<predict_batcher> batcher_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
  bool tls_ = false;
};

} // namespace actorps
