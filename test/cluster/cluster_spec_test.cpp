#include "cluster/spec/cluster_spec.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "core/error.hpp"

using namespace actorps;

namespace Catch {

template <>
struct StringMaker<host_port> {
  static std::string convert(const host_port& x) {
    return to_string(x);
  }
};

template <>
struct StringMaker<cluster_spec> {
  static std::string convert(const cluster_spec& x) {
    return x.to_json();
  }
};

} // namespace Catch

namespace {

host_port hp(const char* host, uint16_t port) {
  return host_port{host, port};
}

/// chief 127.0.0.1:2220, workers :2221 :2222, ps :2223 :2224, no task.
cluster_spec local_spec() {
  cluster_spec spec;
  spec.chief = {hp("127.0.0.1", 2220)};
  spec.worker = {hp("127.0.0.1", 2221), hp("127.0.0.1", 2222)};
  spec.ps = {hp("127.0.0.1", 2223), hp("127.0.0.1", 2224)};
  return spec;
}

cluster_spec with_task(cluster_spec spec, const char* type, uint32_t index) {
  spec.task = task_id{type, index};
  return spec;
}

const char* local_cluster_json = R"("cluster": {
  "chief": ["127.0.0.1:2220"],
  "worker": ["127.0.0.1:2221", "127.0.0.1:2222"],
  "ps": ["127.0.0.1:2223", "127.0.0.1:2224"]})";

std::string local_with(const std::string& rest) {
  return std::string{"{"} + local_cluster_json + rest + "}";
}

/// Sets an environment variable for one scope, then restores its old value.
class scoped_env {
public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (auto old = std::getenv(name))
      old_ = old;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }

  ~scoped_env() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

private:
  std::string name_;
  std::optional<std::string> old_;
};

struct good_case {
  std::string json;
  cluster_spec expected;
};

std::vector<good_case> good_cases() {
  cluster_spec ipv6;
  ipv6.chief = {hp("::1", 2220)};
  ipv6.worker = {hp("fe80::1", 2221), hp("2001:db8::7", 2222)};
  ipv6.ps = {hp("::1", 2223)};
  cluster_spec named;
  named.chief = {hp("chief.example.com", 2222)};
  named.worker = {hp("worker0.example.com", 2222),
                  hp("worker1.example.com", 2222)};
  named.ps = {hp("ps0.example.com", 1), hp("ps1.example.com", 65535)};
  named.task = task_id{"ps", 1};
  auto with_evaluator = local_spec();
  with_evaluator.evaluator = {hp("127.0.0.1", 2225)};
  return {
    // No task: e.g. a launcher that starts every member.
    {local_with(""), local_spec()},
    {local_with(R"(, "task": null)"), local_spec()},
    {local_with(R"(, "task": {"type": "chief", "index": 0})"),
     with_task(local_spec(), "chief", 0)},
    {local_with(R"(, "task": {"type": "worker", "index": 1})"),
     with_task(local_spec(), "worker", 1)},
    {local_with(R"(, "task": {"index": 0, "type": "ps"})"),
     with_task(local_spec(), "ps", 0)},
    // TF_CONFIG's "environment" and "rpc_layer" are accepted and ignored.
    {local_with(R"(, "task": {"type": "ps", "index": 1},
                   "environment": "cloud", "rpc_layer": "grpc")"),
     with_task(local_spec(), "ps", 1)},
    // A null role list counts as absent.
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "worker": ["127.0.0.1:2221", "127.0.0.1:2222"],
                     "ps": ["127.0.0.1:2223", "127.0.0.1:2224"],
                     "evaluator": null}})",
     local_spec()},
    {R"({"cluster": {"chief": ["[::1]:2220"],
                     "worker": ["[fe80::1]:2221", "[2001:db8::7]:2222"],
                     "ps": ["[::1]:2223"]}})",
     ipv6},
    {R"({"task": {"type": "ps", "index": 1},
         "cluster": {"ps": ["ps0.example.com:1", "ps1.example.com:65535"],
                     "worker": ["worker0.example.com:2222",
                                "worker1.example.com:2222"],
                     "chief": ["chief.example.com:2222"]}})",
     named},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "worker": ["127.0.0.1:2221", "127.0.0.1:2222"],
                     "ps": ["127.0.0.1:2223", "127.0.0.1:2224"],
                     "evaluator": ["127.0.0.1:2225"]},
         "task": {"type": "evaluator", "index": 0}})",
     with_task(with_evaluator, "evaluator", 0)},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "worker": ["127.0.0.1:2221", "127.0.0.1:2222"],
                     "ps": ["127.0.0.1:2223", "127.0.0.1:2224"],
                     "evaluator": []}})",
     local_spec()},
    // TF: an evaluator task need not be listed in the cluster.
    {local_with(R"(, "task": {"type": "evaluator", "index": 0})"),
     with_task(local_spec(), "evaluator", 0)},
  };
}

} // namespace

// -- addresses ----------------------------------------------------------------

TEST_CASE("parse_host_port reads host names, IPv4 and bracketed IPv6",
          "[cluster][cluster_spec]") {
  struct row {
    const char* text;
    const char* host;
    uint16_t port;
  };
  const std::vector<row> rows{
    {"127.0.0.1:2222", "127.0.0.1", 2222},
    {"localhost:1", "localhost", 1},
    {"ps-0.svc.cluster.local:65535", "ps-0.svc.cluster.local", 65535},
    {"[::1]:2222", "::1", 2222},
    {"[2001:db8::1]:8470", "2001:db8::1", 8470},
    {"host:02222", "host", 2222},
  };
  for (auto& r : rows) {
    INFO("address " << r.text);
    auto x = parse_host_port(r.text);
    CHECK(x.host == r.host);
    CHECK(x.port == r.port);
  }
}

TEST_CASE("to_string writes an address back the way parse_host_port reads it",
          "[cluster][cluster_spec]") {
  CHECK(to_string(hp("127.0.0.1", 2222)) == "127.0.0.1:2222");
  CHECK(to_string(hp("::1", 2222)) == "[::1]:2222");
  for (auto text : {"localhost:9", "[fe80::1]:80", "10.0.0.1:65535"})
    CHECK(to_string(parse_host_port(text)) == text);
}

TEST_CASE("parse_host_port rejects addresses without a usable host or port",
          "[cluster][cluster_spec]") {
  struct row {
    const char* text;
    const char* what; // must appear in the message
  };
  const std::vector<row> rows{
    {"localhost", "expected host:port"},
    {"", "expected host:port"},
    {"localhost:", "port is empty"},
    {":2222", "host is empty"},
    {"[]:2222", "host is empty"},
    {"localhost:http", "not a number"},
    {"localhost:-1", "not a number"},
    {"localhost:+22", "not a number"},
    {"localhost:22 ", "not a number"},
    {"localhost:0", "out of range"},
    {"localhost:65536", "out of range"},
    {"localhost:99999999999999999999", "out of range"},
    {"::1:2222", "brackets"},
    {"[::1]", "expected [ipv6]:port"},
    {"[::1:2222", "without ']'"},
    {"[::1]2222", "expected ':' after ']'"},
    {"local host:2222", "space"},
    {"grpc://localhost:2222", "scheme"},
    {"a/b:2222", "'/'"},
  };
  for (auto& r : rows) {
    INFO("address " << r.text);
    CHECK_THROWS_AS(parse_host_port(r.text), input_error);
    CHECK_THROWS_WITH(parse_host_port(r.text),
                      Catch::StartsWith("bad address \"" + std::string{r.text}
                                        + "\" (")
                        && Catch::Contains(r.what));
  }
}

// -- parsing ------------------------------------------------------------------

TEST_CASE("good cluster specs are read into their roles, addresses and task",
          "[cluster][cluster_spec]") {
  for (auto& c : good_cases()) {
    INFO("spec " << c.json);
    auto spec = parse_cluster_spec(c.json, "spec.json");
    CHECK(spec.chief == c.expected.chief);
    CHECK(spec.worker == c.expected.worker);
    CHECK(spec.ps == c.expected.ps);
    CHECK(spec.evaluator == c.expected.evaluator);
    REQUIRE(spec.task.has_value() == c.expected.task.has_value());
    if (spec.task) {
      CHECK(spec.task->type == c.expected.task->type);
      CHECK(spec.task->index == c.expected.task->index);
    }
  }
}

TEST_CASE("malformed cluster specs throw input_error naming the source and "
          "the field",
          "[cluster][cluster_spec]") {
  struct bad_case {
    std::string json;
    const char* field; // must appear in the message
    const char* what;  // must appear in the message too
  };
  const std::vector<bad_case> cases{
    // JSON and top level
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],})", "", "malformed JSON"},
    {"", "", "malformed JSON"},
    {"[]", "", "must be a JSON object"},
    {R"("cluster")", "", "must be a JSON object"},
    {R"({})", "cluster", "missing"},
    {R"({"cluster": null})", "cluster", "missing"},
    {R"({"cluster": ["127.0.0.1:2220"]})", "cluster", "must be an object"},
    {local_with(R"(, "clusterr": {})"), "clusterr", "unknown field"},
    {local_with(R"(, "session_master": "")"), "session_master",
     "unknown field"},
    // roles
    {R"({"cluster": {"master": ["127.0.0.1:2220"]}})", "cluster.master",
     "unknown role"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "worker": ["127.0.0.1:2221"],
                     "ps": ["127.0.0.1:2223"], "client": ["127.0.0.1:9"]}})",
     "cluster.client", "unknown role"},
    {R"({"cluster": {"chief": "127.0.0.1:2220"}})", "cluster.chief",
     "must be an array"},
    {R"({"cluster": {"chief": {"0": "127.0.0.1:2220"}}})", "cluster.chief",
     "must be an array"},
    {R"({"cluster": {"worker": ["127.0.0.1:2221", 2222]}})",
     "cluster.worker[1]", "must be a \"host:port\" string"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "worker": ["127.0.0.1:2221", "localhost"],
                     "ps": ["127.0.0.1:2223"]}})",
     "cluster.worker[1]", "bad address \"localhost\" (expected host:port)"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"], "worker": ["h:x"],
                     "ps": ["127.0.0.1:2223"]}})",
     "cluster.worker[0]", "not a number"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"], "worker": ["h:1"],
                     "ps": ["127.0.0.1:0"]}})",
     "cluster.ps[0]", "out of range"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"], "worker": ["h:1"],
                     "ps": ["127.0.0.1:70000"]}})",
     "cluster.ps[0]", "out of range"},
    {R"({"cluster": {"chief": [":2220"], "worker": ["h:1"],
                     "ps": ["p:1"]}})",
     "cluster.chief[0]", "host is empty"},
    // counts
    {R"({"cluster": {"worker": ["127.0.0.1:2221"],
                     "ps": ["127.0.0.1:2223"]}})",
     "cluster.chief", "exactly one chief"},
    {R"({"cluster": {"chief": [], "worker": ["127.0.0.1:2221"],
                     "ps": ["127.0.0.1:2223"]}})",
     "cluster.chief", "exactly one chief"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220", "127.0.0.1:2229"],
                     "worker": ["127.0.0.1:2221"],
                     "ps": ["127.0.0.1:2223"]}})",
     "cluster.chief", "has 2 addresses"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "ps": ["127.0.0.1:2223"]}})",
     "cluster.worker", "at least one worker"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"], "worker": [],
                     "ps": ["127.0.0.1:2223"]}})",
     "cluster.worker", "at least one worker"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "worker": ["127.0.0.1:2221"]}})",
     "cluster.ps", "at least one parameter server"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "worker": ["127.0.0.1:2221"], "ps": ["127.0.0.1:2223"],
                     "evaluator": ["127.0.0.1:2224", "127.0.0.1:2225"]}})",
     "cluster.evaluator", "at most one evaluator"},
    // duplicates, within a role and across roles
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "worker": ["127.0.0.1:2221", "127.0.0.1:2221"],
                     "ps": ["127.0.0.1:2223"]}})",
     "cluster.worker[1]", "is already cluster.worker[0]"},
    {R"({"cluster": {"chief": ["127.0.0.1:2220"],
                     "worker": ["127.0.0.1:2221"],
                     "ps": ["127.0.0.1:2223", "127.0.0.1:2220"]}})",
     "cluster.ps[1]", "is already cluster.chief[0]"},
    {R"({"cluster": {"chief": ["Node1:2220"], "worker": ["node1:2220"],
                     "ps": ["p:1"]}})",
     "cluster.worker[0]", "is already cluster.chief[0]"},
    // task
    {local_with(R"(, "task": [])"), "task", "must be an object"},
    {local_with(R"(, "task": {"type": "master", "index": 0})"), "task.type",
     "unknown role \"master\""},
    {local_with(R"(, "task": {"index": 0})"), "task.type", "missing"},
    {local_with(R"(, "task": {"type": 1, "index": 0})"), "task.type",
     "must be a string"},
    {local_with(R"(, "task": {"type": "worker"})"), "task.index", "missing"},
    {local_with(R"(, "task": {"type": "worker", "index": -1})"), "task.index",
     "must not be negative"},
    {local_with(R"(, "task": {"type": "worker", "index": 0.5})"),
     "task.index", "whole number"},
    {local_with(R"(, "task": {"type": "worker", "index": 1.0})"),
     "task.index", "whole number"},
    {local_with(R"(, "task": {"type": "worker", "index": "0"})"),
     "task.index", "whole number"},
    {local_with(R"(, "task": {"type": "worker", "index": 4294967296})"),
     "task.index", "out of range"},
    {local_with(R"(, "task": {"type": "worker", "index": 2})"), "task.index",
     "out of range"},
    {local_with(R"(, "task": {"type": "chief", "index": 1})"), "task.index",
     "out of range"},
    {local_with(R"(, "task": {"type": "evaluator", "index": 1})"),
     "task.index", "out of range"},
    {local_with(R"(, "task": {"type": "ps", "index": 0, "trial": "1"})"),
     "task.trial", "unknown field"},
  };
  for (auto& c : cases) {
    INFO("spec " << c.json);
    CHECK_THROWS_AS(parse_cluster_spec(c.json, "spec.json"), input_error);
    CHECK_THROWS_WITH(parse_cluster_spec(c.json, "spec.json"),
                      Catch::StartsWith("spec.json: ")
                        && Catch::Contains(c.field)
                        && Catch::Contains(c.what));
  }
}

TEST_CASE("a bad address is reported as source: field: bad address",
          "[cluster][cluster_spec]") {
  auto text = std::string{R"({"cluster": {"chief": ["127.0.0.1:2220"],
    "worker": ["127.0.0.1:2221", "localhost"], "ps": ["127.0.0.1:2223"]}})"};
  CHECK_THROWS_WITH(parse_cluster_spec(text, "TF_CONFIG"),
                    "TF_CONFIG: cluster.worker[1]: bad address \"localhost\" "
                    "(expected host:port)");
}

// -- sources ------------------------------------------------------------------

TEST_CASE("cluster_spec_from_env reads TF_CONFIG and names it in errors",
          "[cluster][cluster_spec]") {
  SECTION("set") {
    scoped_env env{"TF_CONFIG",
                   local_with(R"(, "task": {"type": "worker", "index": 1})")
                     .c_str()};
    CHECK(cluster_spec_from_env() == with_task(local_spec(), "worker", 1));
  }
  SECTION("unset") {
    scoped_env env{"TF_CONFIG", nullptr};
    CHECK_THROWS_AS(cluster_spec_from_env(), input_error);
    CHECK_THROWS_WITH(cluster_spec_from_env(),
                      Catch::StartsWith("TF_CONFIG: not set"));
  }
  SECTION("empty") {
    scoped_env env{"TF_CONFIG", " \n"};
    CHECK_THROWS_WITH(cluster_spec_from_env(),
                      Catch::StartsWith("TF_CONFIG: empty"));
  }
  SECTION("malformed") {
    scoped_env env{"TF_CONFIG", R"({"cluster": {"ps": "x"}})"};
    CHECK_THROWS_WITH(cluster_spec_from_env(),
                      Catch::StartsWith("TF_CONFIG: cluster.ps: "));
  }
  SECTION("another variable") {
    scoped_env env{"ACTORPS_TEST_CLUSTER", local_with("").c_str()};
    CHECK(cluster_spec_from_env("ACTORPS_TEST_CLUSTER") == local_spec());
  }
}

TEST_CASE("load_cluster_spec names a missing file", "[cluster][cluster_spec]") {
  const std::string path = "/nonexistent/actorps/cluster.json";
  CHECK_THROWS_AS(load_cluster_spec(path), input_error);
  CHECK_THROWS_WITH(load_cluster_spec(path), Catch::StartsWith(path + ": "));
}

TEST_CASE("load_cluster_spec reads a file and names it in errors",
          "[cluster][cluster_spec]") {
  const std::string path = "/tmp/actorps_cluster_spec_test_"
                           + std::to_string(getpid()) + ".json";
  {
    std::ofstream out{path};
    out << local_with(R"(, "task": {"type": "ps", "index": 0})");
  }
  CHECK(load_cluster_spec(path) == with_task(local_spec(), "ps", 0));
  {
    std::ofstream out{path};
    out << local_with(R"(, "task": {"type": "ps", "index": 2})");
  }
  CHECK_THROWS_WITH(load_cluster_spec(path),
                    Catch::StartsWith(path + ": task.index: "));
  std::remove(path.c_str());
}

#ifdef ACTORPS_SOURCE_DIR
TEST_CASE("configs/cluster_local.json loads", "[cluster][cluster_spec]") {
  auto spec = load_cluster_spec(ACTORPS_SOURCE_DIR
                                "/configs/cluster_local.json");
  CHECK(spec == with_task(local_spec(), "chief", 0));
}
#endif

// -- the spec object ----------------------------------------------------------

TEST_CASE("to_json and parse_cluster_spec round-trip every good spec",
          "[cluster][cluster_spec]") {
  for (auto& c : good_cases()) {
    INFO("spec " << c.json);
    auto spec = parse_cluster_spec(c.json, "spec.json");
    auto text = spec.to_json();
    INFO("to_json " << text);
    CHECK(text.find('\n') == std::string::npos);
    CHECK(parse_cluster_spec(text, "round trip") == spec);
  }
}

TEST_CASE("to_json writes TF_CONFIG's shape and leaves out empty parts",
          "[cluster][cluster_spec]") {
  auto spec = local_spec();
  spec.chief = {hp("::1", 2220)};
  CHECK(spec.to_json()
        == R"({"cluster":{"chief":["[::1]:2220"],)"
           R"("ps":["127.0.0.1:2223","127.0.0.1:2224"],)"
           R"("worker":["127.0.0.1:2221","127.0.0.1:2222"]}})");
  spec.task = task_id{"worker", 1};
  CHECK_THAT(spec.to_json(),
             Catch::EndsWith(R"("task":{"index":1,"type":"worker"}})"));
}

TEST_CASE("members returns the address list of a role and rejects unknown "
          "roles",
          "[cluster][cluster_spec]") {
  auto spec = local_spec();
  CHECK(spec.members("chief") == spec.chief);
  CHECK(spec.members("worker").size() == 2);
  CHECK(spec.members("ps")[1] == hp("127.0.0.1", 2224));
  CHECK(spec.members("evaluator").empty());
  CHECK_THROWS_AS(spec.members("master"), input_error);
  CHECK_THROWS_WITH(spec.members("master"), Catch::Contains("\"master\""));
}

TEST_CASE("validate rejects a spec that code or flags broke",
          "[cluster][cluster_spec]") {
  CHECK_NOTHROW(validate(local_spec(), "flags"));
  CHECK_NOTHROW(validate(with_task(local_spec(), "ps", 1), "flags"));
  CHECK_THROWS_WITH(validate(with_task(local_spec(), "ps", 2), "flags"),
                    Catch::StartsWith("flags: task.index: "));
  CHECK_THROWS_WITH(validate(with_task(local_spec(), "boss", 0), "flags"),
                    Catch::StartsWith("flags: task.type: "));
  auto spec = local_spec();
  spec.ps[1] = spec.worker[0];
  CHECK_THROWS_WITH(validate(spec, "flags"),
                    "flags: cluster.ps[1]: address \"127.0.0.1:2221\" is "
                    "already cluster.worker[0]");
  spec = local_spec();
  spec.worker[1].port = 0;
  CHECK_THROWS_WITH(validate(spec, "flags"),
                    Catch::StartsWith("flags: cluster.worker[1]: bad address")
                      && Catch::Contains("out of range"));
  spec = local_spec();
  spec.chief[0].host = "";
  CHECK_THROWS_WITH(validate(spec, "flags"),
                    Catch::StartsWith("flags: cluster.chief[0]: ")
                      && Catch::Contains("host is empty"));
  spec = local_spec();
  spec.ps.clear();
  CHECK_THROWS_WITH(validate(spec, "flags"),
                    Catch::StartsWith("flags: cluster.ps: "));
}
