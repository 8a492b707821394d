// actorps-serve-load: a load generator for `actorps serve` (a closed loop:
// each connection sends its next request when the answer to the last one
// has come), for the serving numbers of docs/measurements.md.
//
//   actorps-serve-load --port P --model NAME --body FILE
//                      [--host H] [--connections C] [--seconds S]
//                      [--watch-versions]
//
// Every connection is kept alive and POSTs FILE to
// /v1/models/NAME:predict as fast as it is answered, for S seconds. Prints
// requests, failures (any answer but 200, or none), requests/s,
// instances/s and the latency percentiles p50, p90, p99 and max (ms, from
// sending to the whole answer, on the client), as one line of text and one
// JSON line. With --watch-versions, a thread asks GET /v1/models/NAME every
// 50 ms and the versions it saw are printed too (a reload under load).
// Exit status 0 if no request failed, 1 otherwise, 2 for bad flags.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

struct load_options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string model;
  std::string body_file;
  int connections = 8;
  double seconds = 10;
  bool watch_versions = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  fmt::print(stderr,
             "actorps-serve-load: {}\nusage: actorps-serve-load --port P "
             "--model NAME --body FILE [--host H] [--connections C] "
             "[--seconds S] [--watch-versions]\n",
             what);
  std::exit(2);
}

load_options parse(int argc, char** argv) {
  load_options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--watch-versions") {
      o.watch_versions = true;
      continue;
    }
    if (i + 1 >= argc)
      usage_error(a + ": missing value");
    std::string v = argv[++i];
    try {
      if (a == "--host")
        o.host = v;
      else if (a == "--port")
        o.port = std::stoi(v);
      else if (a == "--model")
        o.model = v;
      else if (a == "--body")
        o.body_file = v;
      else if (a == "--connections")
        o.connections = std::stoi(v);
      else if (a == "--seconds")
        o.seconds = std::stod(v);
      else
        usage_error("unknown flag " + a);
    } catch (const std::logic_error&) {
      usage_error(a + ": not a number: " + v);
    }
  }
  if (o.port <= 0 || o.port > 65535 || o.model.empty() || o.body_file.empty()
      || o.connections < 1 || o.seconds <= 0)
    usage_error("--port, --model and --body are required; --connections "
                ">= 1, --seconds > 0");
  return o;
}

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty())
    return 0;
  auto i = static_cast<size_t>(q * double(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

} // namespace

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
  std::ifstream in{o.body_file};
  if (!in)
    usage_error("cannot read " + o.body_file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto body = ss.str();
  uint64_t instances = 0;
  {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("instances") && j["instances"].is_array())
      instances = j["instances"].size();
    if (instances == 0)
      usage_error(o.body_file + ": not a {\"instances\": [...]} body");
  }
  auto path = "/v1/models/" + o.model + ":predict";
  auto deadline = clock_type::now()
                  + std::chrono::duration_cast<clock_type::duration>(
                    std::chrono::duration<double>(o.seconds));
  std::atomic<bool> stop{false};
  std::mutex mtx;
  std::vector<double> latencies_ms;
  uint64_t failures = 0;
  std::string first_failure;
  std::set<std::string> versions;
  std::thread watcher;
  if (o.watch_versions)
    watcher = std::thread{[&] {
      httplib::Client cli{o.host, o.port};
      cli.set_keep_alive(true);
      while (!stop) {
        if (auto r = cli.Get(("/v1/models/" + o.model).c_str());
            r && r->status == 200) {
          auto j = nlohmann::json::parse(r->body, nullptr, false);
          if (j.is_object())
            try {
              std::lock_guard<std::mutex> guard{mtx};
              versions.insert(
                j["model_version_status"][0]["version"].get<std::string>());
            } catch (const std::exception&) {
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
      }
    }};
  auto started = clock_type::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < o.connections; ++c)
    threads.emplace_back([&] {
      httplib::Client cli{o.host, o.port};
      cli.set_keep_alive(true);
      // Without, the body waits for the ACK of the headers (Nagle), which
      // the server delays by up to 40 ms.
      cli.set_tcp_nodelay(true);
      cli.set_read_timeout(30, 0);
      std::vector<double> mine;
      uint64_t failed = 0;
      std::string why;
      while (clock_type::now() < deadline) {
        auto t0 = clock_type::now();
        auto r = cli.Post(path.c_str(), body, "application/json");
        auto t1 = clock_type::now();
        if (!r || r->status != 200) {
          ++failed;
          if (why.empty())
            why = r ? fmt::format("{} {}", r->status, r->body)
                    : httplib::to_string(r.error());
          continue;
        }
        mine.push_back(std::chrono::duration<double, std::milli>(t1 - t0)
                         .count());
      }
      std::lock_guard<std::mutex> guard{mtx};
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
      failures += failed;
      if (first_failure.empty())
        first_failure = why;
    });
  for (auto& t : threads)
    t.join();
  auto elapsed = std::chrono::duration<double>(clock_type::now() - started)
                   .count();
  stop = true;
  if (watcher.joinable())
    watcher.join();
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto ok = latencies_ms.size();
  auto rps = double(ok) / elapsed;
  std::string seen;
  for (auto& v : versions)
    seen += (seen.empty() ? "" : ",") + v;
  fmt::print("{} connections, {} instances per request, {:.1f} s: {} "
             "requests, {} failed, {:.0f} requests/s, {:.0f} instances/s, "
             "latency ms p50 {:.3f} p90 {:.3f} p99 {:.3f} max {:.3f}{}\n",
             o.connections, instances, elapsed, ok + failures, failures, rps,
             rps * double(instances), percentile(latencies_ms, 0.5),
             percentile(latencies_ms, 0.9), percentile(latencies_ms, 0.99),
             latencies_ms.empty() ? 0.0 : latencies_ms.back(),
             o.watch_versions ? ", versions seen " + seen : std::string{});
  nlohmann::json j = {{"connections", o.connections},
                      {"instances_per_request", instances},
                      {"seconds", elapsed},
                      {"requests", ok + failures},
                      {"failed", failures},
                      {"requests_per_second", rps},
                      {"p50_ms", percentile(latencies_ms, 0.5)},
                      {"p90_ms", percentile(latencies_ms, 0.9)},
                      {"p99_ms", percentile(latencies_ms, 0.99)},
                      {"versions_seen", versions}};
  fmt::print("{}\n", j.dump());
  if (failures > 0)
    fmt::print(stderr, "first failure: {}\n", first_failure);
  return failures == 0 ? 0 : 1;
}
