// `actorps serve`'s HTTP server (cluster/serve/prediction_server.hpp) on
// 127.0.0.1 and a free port, answering with a test double: each endpoint,
// each error case as a JSON error with its status, and the metrics.

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "cluster/serve/prediction_server.hpp"
#include "test/cluster/serve_double.hpp"

using namespace actorps;
using json = nlohmann::json;

namespace {

/// A model folder with version 7 of the double, a watcher that does not
/// poll, and a server on a free port of 127.0.0.1.
struct serve_fixture {
  std::string dir;
  serve_metrics metrics;
  std::unique_ptr<model_watcher> models;
  std::unique_ptr<prediction_server> server;
  std::unique_ptr<httplib::Client> client;

  explicit serve_fixture(serve_options opts = {}) {
    char tmpl[] = "/tmp/actorps-serve-XXXXXX";
    dir = ::mkdtemp(tmpl);
    test::add_version(dir, 7);
    models = std::make_unique<model_watcher>(
      dir, [](const std::string& d) { return test::load_double(d); },
      std::chrono::milliseconds{0},
      [this](uint64_t v, const std::string& e) { metrics.loaded(v, e); });
    opts.port = 0;
    server = std::make_unique<prediction_server>(*models, metrics, opts);
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    client->set_read_timeout(30, 0);
  }

  ~serve_fixture() {
    client.reset();
    server.reset();
    models.reset();
    std::filesystem::remove_all(dir);
  }

  httplib::Result post(const std::string& path, const std::string& body) {
    return client->Post(path.c_str(), body, "application/json");
  }
};

/// The error message of a JSON error answer ("" if it is not one).
std::string error_of(const httplib::Result& r) {
  auto j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_string())
    return "";
  return j["error"].get<std::string>();
}

constexpr const char* good = R"({"instances": [{"dense": [1, 2], "user": [3], "tags": {"4": 0.5}}, {"dense": [0, 0]}]})";

} // namespace

TEST_CASE("a predict request is answered with the version's predictions in TensorFlow Serving's shape", "[serve]") {
  serve_fixture fx;
  auto r = fx.post("/v1/models/double:predict", good);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->get_header_value("Content-Type") == "application/json");
  auto j = json::parse(r->body);
  CHECK(j == json::parse(R"({"predictions": [[7, 8], [7, 0]]})"));
  // With the version in the path, the same.
  r = fx.post("/v1/models/double/versions/7:predict", good);
  REQUIRE(r);
  CHECK(r->status == 200);
}

TEST_CASE("the model status, metadata and health endpoints name the version serving", "[serve]") {
  serve_fixture fx;
  auto r = fx.client->Get("/v1/models/double");
  REQUIRE(r);
  CHECK(r->status == 200);
  auto s = json::parse(r->body)["model_version_status"][0];
  CHECK(s["version"] == "7");
  CHECK(s["state"] == "AVAILABLE");
  CHECK(s["status"]["error_code"] == "OK");
  r = fx.client->Get("/v1/models/double/versions/7");
  REQUIRE(r);
  CHECK(r->status == 200);
  r = fx.client->Get("/v1/models/double/metadata");
  REQUIRE(r);
  auto m = json::parse(r->body)["metadata"];
  CHECK(m["dense"] == 2);
  CHECK(m["fields"][0]["name"] == "user");
  CHECK(m["fields"][0]["vocabulary"] == 10);
  CHECK(m["fields"][1]["weighted"] == true);
  CHECK(m["outputs_per_example"] == 2);
  r = fx.client->Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(json::parse(r->body)["version"] == "7");
}

TEST_CASE("each bad request gets its status and a JSON error naming the problem", "[serve]") {
  serve_options opts;
  opts.max_body_bytes = 1000;
  opts.limits.max_instances = 3;
  serve_fixture fx{opts};
  struct bad {
    const char* what;
    const char* path;
    std::string body;
    int status;
    const char* says;
  };
  const std::vector<bad> cases = {
    {"malformed JSON", "/v1/models/double:predict", "{\"instances\": [", 400,
     "malformed JSON"},
    {"wrong number of features", "/v1/models/double:predict",
     R"({"instances": [{"dense": [1]}]})", 400,
     "instance 0: 1 dense features; this model takes 2"},
    {"wrong type of a feature", "/v1/models/double:predict",
     R"({"instances": [{"dense": [1, true]}]})", 400,
     "dense feature 1 is true"},
    {"a key outside the vocabulary", "/v1/models/double:predict",
     R"({"instances": [{"dense": [1, 2], "user": 12}]})", 400,
     "field \"user\": key 12 is outside its vocabulary [0, 10)"},
    {"an unknown model", "/v1/models/other:predict", good, 404,
     "model \"other\" is not served here (this server serves \"double\")"},
    {"a version not serving", "/v1/models/double/versions/6:predict", good,
     404, "version 6 of \"double\" is not served (version 7 is)"},
    {"too many instances", "/v1/models/double:predict",
     R"({"instances": [[1,2],[1,2],[1,2],[1,2]]})", 413,
     "4 instances; at most 3"},
    {"an oversized body", "/v1/models/double:predict",
     std::string(2000, ' '), 413, "larger than 1000 bytes"},
    {"an unknown endpoint", "/v1/models/double:classify", good, 404,
     "no such endpoint: POST /v1/models/double:classify"},
  };
  for (auto& c : cases) {
    INFO(c.what);
    auto r = fx.post(c.path, c.body);
    REQUIRE(r);
    CHECK(r->status == c.status);
    CHECK_THAT(error_of(r), Catch::Contains(c.says));
  }
  auto r = fx.client->Get("/v1/models/other");
  REQUIRE(r);
  CHECK(r->status == 404);
  CHECK_THAT(error_of(r), Catch::Contains("not served here"));
  // Still answering.
  r = fx.post("/v1/models/double:predict", good);
  REQUIRE(r);
  CHECK(r->status == 200);
}

TEST_CASE("a client that stops sending mid-request is dropped after the read timeout while others are answered", "[serve]") {
  serve_options opts;
  opts.read_timeout = std::chrono::seconds{1};
  opts.keep_alive = std::chrono::seconds{1};
  serve_fixture fx{opts};
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(fx.server->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
          == 0);
  // The bound of this wait, not a timing: the server must close first.
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string half = "POST /v1/models/double:predict HTTP/1.1\r\nHost: x\r\n"
                     "Content-Length: 100\r\n\r\n{\"instances\"";
  REQUIRE(::send(fd, half.data(), half.size(), 0) == ssize_t(half.size()));
  auto r = fx.post("/v1/models/double:predict", good);
  REQUIRE(r);
  CHECK(r->status == 200);
  char buf[512];
  ssize_t n;
  std::string got;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0)
    got.append(buf, size_t(n));
  // 0: the server closed the connection (-1 would be our 30 s bound).
  CHECK(n == 0);
  ::close(fd);
}

TEST_CASE("a full queue answers 503 and the requests queued before it are answered", "[serve]") {
  serve_options opts;
  opts.batching.threads = 1;
  opts.batching.max_wait = std::chrono::microseconds{0};
  opts.batching.max_queued_rows = 2;
  serve_fixture fx{opts};
  auto model = std::static_pointer_cast<const test::double_servable>(
    fx.models->current());
  model->set_gate(false);
  auto one = R"({"instances": [{"dense": [1, 2]}]})";
  auto two = R"({"instances": [{"dense": [1, 2]}, {"dense": [3, 4]}]})";
  // Another client each: A runs (held at the gate), B waits in the queue.
  httplib::Client ca{"127.0.0.1", fx.server->port()};
  httplib::Client cb{"127.0.0.1", fx.server->port()};
  int status_a = 0, status_b = 0;
  std::thread a{[&] {
    if (auto r = ca.Post("/v1/models/double:predict", one, "application/json"))
      status_a = r->status;
  }};
  std::thread b;
  bool entered = model->wait_entered(1);
  bool queued = false;
  if (entered) {
    b = std::thread{[&] {
      if (auto r = cb.Post("/v1/models/double:predict", two,
                           "application/json"))
        status_b = r->status;
    }};
    // Until B is queued (bounded: 30 s).
    for (int i = 0; i < 3000 && !queued; ++i) {
      auto m = fx.client->Get("/metrics");
      queued = m
               && m->body.find("actorps_serve_queued_rows 2")
                    != std::string::npos;
      if (!queued)
        std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
  }
  int status_c = 0;
  std::string error_c;
  if (queued) {
    auto r = fx.post("/v1/models/double:predict", one);
    status_c = r ? r->status : -1;
    error_c = r ? error_of(r) : "";
  }
  model->set_gate(true);
  a.join();
  if (b.joinable())
    b.join();
  REQUIRE(entered);
  REQUIRE(queued);
  CHECK(status_c == 503);
  CHECK_THAT(error_c, Catch::Contains("overloaded: 2 rows queued"));
  CHECK(status_a == 200);
  CHECK(status_b == 200);
}

TEST_CASE("the metrics count answers by endpoint and code, batches, examples and the version", "[serve]") {
  serve_fixture fx;
  fx.post("/v1/models/double:predict", good);
  fx.post("/v1/models/double:predict", "{");
  fx.client->Get("/nothing");
  auto r = fx.client->Get("/metrics");
  REQUIRE(r);
  CHECK(r->status == 200);
  auto& t = r->body;
  CHECK_THAT(t, Catch::Contains(R"(actorps_serve_requests_total{code="200",endpoint="predict"} 1)"));
  CHECK_THAT(t, Catch::Contains(R"(actorps_serve_requests_total{code="400",endpoint="predict"} 1)"));
  CHECK_THAT(t, Catch::Contains(R"(actorps_serve_requests_total{code="404",endpoint="other"} 1)"));
  CHECK_THAT(t, Catch::Contains(R"(actorps_serve_errors_total{endpoint="predict"} 1)"));
  CHECK_THAT(t, Catch::Contains("actorps_serve_examples_total 2"));
  CHECK_THAT(t, Catch::Contains("actorps_serve_batch_rows_count 1"));
  CHECK_THAT(t, Catch::Contains("actorps_serve_request_seconds_count 2"));
  CHECK_THAT(t, Catch::Contains("actorps_serve_model_version 7"));
  CHECK_THAT(t, Catch::Contains(R"(actorps_serve_version_loads_total{result="loaded"} 1)"));
}
