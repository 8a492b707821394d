// Live updates (cluster/serve/model_watcher.hpp): the newest version that
// loads serves, a refused one leaves the one before serving, and versions
// swapped while client threads hammer the server fail no request and mix no
// two versions in one answer.

#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cluster/serve/prediction_server.hpp"
#include "core/error.hpp"
#include "test/cluster/serve_double.hpp"

using namespace actorps;
using json = nlohmann::json;

namespace {

struct temp_model_dir {
  std::string path;
  temp_model_dir() {
    char tmpl[] = "/tmp/actorps-serve-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~temp_model_dir() {
    std::filesystem::remove_all(path);
  }
};

servable_loader double_loader(std::chrono::milliseconds delay = {}) {
  return [delay](const std::string& d) { return test::load_double(d, delay); };
}

} // namespace

TEST_CASE("the versions of a model folder are its numbered subfolders with a manifest, temporary ones left out", "[serve]") {
  temp_model_dir dir;
  test::add_version(dir.path, 12);
  test::add_version(dir.path, 3);
  std::filesystem::create_directories(dir.path + "/.tmp-40");
  std::filesystem::create_directories(dir.path + "/notes");
  std::filesystem::create_directories(dir.path + "/013");
  std::ofstream{dir.path + "/013/manifest.json"} << "{}";
  std::filesystem::create_directories(dir.path + "/14"); // no manifest
  std::ofstream{dir.path + "/99"} << "a file, not a version";
  CHECK(export_versions(dir.path) == std::vector<uint64_t>{3, 12});
  CHECK_THROWS_WITH(export_versions(dir.path + "/missing"),
                    Catch::Contains("cannot list the export's versions"));
}

TEST_CASE("the watcher serves the newest version that loads and refuses a corrupt one", "[serve]") {
  temp_model_dir dir;
  SECTION("an empty folder is an error naming it") {
    CHECK_THROWS_WITH(model_watcher(dir.path, double_loader(),
                                    std::chrono::milliseconds{0}),
                      Catch::Contains("no version to serve"));
  }
  SECTION("a corrupt newest version at start: the one before it serves") {
    test::add_version(dir.path, 5);
    test::add_version(dir.path, 9, true);
    std::vector<std::string> seen;
    model_watcher w{dir.path, double_loader(), std::chrono::milliseconds{0},
                    [&](uint64_t v, const std::string& e) {
                      seen.push_back(std::to_string(v) + ":" + e);
                    }};
    CHECK(w.current()->version() == 5);
    REQUIRE(seen.size() == 2);
    CHECK_THAT(seen[0], Catch::StartsWith("9:") && Catch::Contains("checksum mismatch"));
    CHECK(seen[1] == "5:");
  }
  SECTION("only corrupt versions: an error") {
    test::add_version(dir.path, 9, true);
    CHECK_THROWS_WITH(model_watcher(dir.path, double_loader(),
                                    std::chrono::milliseconds{0}),
                      Catch::Contains("no version loads"));
  }
  SECTION("a newer version swaps in, a corrupt one is refused once, an older one is ignored") {
    test::add_version(dir.path, 5);
    int refusals = 0;
    model_watcher w{dir.path, double_loader(), std::chrono::milliseconds{0},
                    [&](uint64_t, const std::string& e) {
                      refusals += e.empty() ? 0 : 1;
                    }};
    auto held = w.current();
    test::add_version(dir.path, 8);
    CHECK(w.poll_once());
    CHECK(w.current()->version() == 8);
    // A request holding the old one still has it, unchanged.
    CHECK(held->version() == 5);
    test::add_version(dir.path, 10, true);
    CHECK_FALSE(w.poll_once());
    CHECK_FALSE(w.poll_once());
    CHECK(refusals == 1);
    CHECK(w.current()->version() == 8);
    test::add_version(dir.path, 7);
    CHECK_FALSE(w.poll_once());
    CHECK(w.current()->version() == 8);
    test::add_version(dir.path, 11);
    CHECK(w.poll_once());
    CHECK(w.current()->version() == 11);
  }
  SECTION("a loader that reports another version than the folder's is refused") {
    test::add_version(dir.path, 5);
    auto liar = [](const std::string&) -> std::shared_ptr<const servable> {
      return std::make_shared<test::double_servable>(6);
    };
    CHECK_THROWS_WITH(model_watcher(dir.path, liar,
                                    std::chrono::milliseconds{0}),
                      Catch::Contains("no version loads"));
  }
}

TEST_CASE("versions swapped while clients hammer the server fail no request and mix no versions", "[serve]") {
  temp_model_dir dir;
  test::add_version(dir.path, 1);
  serve_metrics metrics;
  // Polls every 5 ms; each load takes 20 ms, as a real one takes time.
  model_watcher models{dir.path, double_loader(std::chrono::milliseconds{20}),
                       std::chrono::milliseconds{5},
                       [&](uint64_t v, const std::string& e) {
                         metrics.loaded(v, e);
                       }};
  serve_options opts;
  opts.port = 0;
  opts.batching.max_wait = std::chrono::microseconds{500};
  prediction_server server{models, metrics, opts};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> answered{0};
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> mixed{0};
  std::mutex seen_mtx;
  std::set<uint64_t> versions_seen;
  std::vector<std::string> problems;
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c)
    clients.emplace_back([&, c] {
      httplib::Client cli{"127.0.0.1", server.port()};
      cli.set_read_timeout(30, 0);
      for (uint64_t i = 0; !stop; ++i) {
        // Instance k of this request: dense [c, i], user k, so each row's
        // sum says whose row it is.
        uint64_t rows = 1 + (i % 4);
        json inst = json::array();
        for (uint64_t k = 0; k < rows; ++k)
          inst.push_back({{"dense", {c, i}}, {"user", k}});
        auto r = cli.Post("/v1/models/double:predict",
                          json{{"instances", inst}}.dump(),
                          "application/json");
        if (!r || r->status != 200) {
          ++failures;
          std::lock_guard<std::mutex> guard{seen_mtx};
          problems.push_back(r ? r->body : httplib::to_string(r.error()));
          continue;
        }
        auto p = json::parse(r->body)["predictions"];
        auto v = p[0][0].get<double>();
        bool ok = p.size() == rows;
        for (uint64_t k = 0; ok && k < rows; ++k)
          ok = p[k][0].get<double>() == v
               && p[k][1].get<double>() == double(c + i + k);
        if (!ok)
          ++mixed;
        ++answered;
        std::lock_guard<std::mutex> guard{seen_mtx};
        versions_seen.insert(uint64_t(v));
      }
    });
  // Ten new versions, one corrupt, each while requests run. After each
  // swap, 20 more answers before the next version (bounded waits): at most
  // 6 of them (one per client) can come from requests that started before
  // the swap, so every version that loaded answers some.
  auto wait_for = [](auto done) {
    for (int i = 0; i < 3000 && !done(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
  };
  for (uint64_t v = 2; v <= 11; ++v) {
    test::add_version(dir.path, v, v == 6);
    if (v != 6)
      wait_for([&] { return models.current()->version() == v; });
    auto before = answered.load();
    wait_for([&] { return answered.load() >= before + 20; });
  }
  stop = true;
  for (auto& t : clients)
    t.join();
  INFO("first problem: " << (problems.empty() ? "" : problems.front()));
  CHECK(failures == 0);
  CHECK(mixed == 0);
  CHECK(answered > 200);
  CHECK(models.current()->version() == 11);
  // Every version that loaded answered, the corrupt one never.
  CHECK(versions_seen == std::set<uint64_t>{1, 2, 3, 4, 5, 7, 8, 9, 10, 11});
}
