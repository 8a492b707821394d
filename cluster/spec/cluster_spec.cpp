#include "cluster/spec/cluster_spec.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace actorps {

namespace {

using json = nlohmann::json;

/// TF's roles (tf.distribute's _validate_cluster_spec); "client" and custom
/// job names are not roles of a parameter-server cluster.
constexpr const char* roles[] = {"chief", "worker", "ps", "evaluator"};
constexpr const char* roles_list = "chief, worker, ps, evaluator";

bool is_role(const std::string& name) {
  return std::any_of(std::begin(roles), std::end(roles),
                     [&](const char* r) { return name == r; });
}

/// The address list of `role` in `spec`, or nullptr for an unknown role.
/// Spec is `cluster_spec` or `const cluster_spec`.
template <class Spec>
auto members_of(Spec& spec, const std::string& role) -> decltype(&spec.chief) {
  if (role == "chief")
    return &spec.chief;
  if (role == "worker")
    return &spec.worker;
  if (role == "ps")
    return &spec.ps;
  if (role == "evaluator")
    return &spec.evaluator;
  return nullptr;
}

[[noreturn]] void fail(const std::string& source, const std::string& field,
                       const std::string& what) {
  if (field.empty())
    throw input_error(fmt::format("{}: {}", source, what));
  throw input_error(fmt::format("{}: {}: {}", source, field, what));
}

/// Why `host` cannot be a host name or address, or an empty string.
std::string host_problem(const std::string& host) {
  if (host.empty())
    return "host is empty";
  for (unsigned char c : host) {
    if (std::isspace(c) || std::iscntrl(c))
      return "host contains a space or control character";
    if (c == '[' || c == ']' || c == '/')
      return fmt::format("host contains '{}'", static_cast<char>(c));
  }
  return {};
}

/// Key under which two addresses count as the same: host names are
/// case-insensitive (RFC 4343). No resolution: "localhost" and "127.0.0.1"
/// differ here.
std::string address_key(const host_port& x) {
  auto host = x.host;
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return to_string(host_port{host, x.port});
}

/// Reads task.index: a non-negative JSON integer that fits uint32_t.
uint32_t read_index(const json& v, const std::string& source) {
  if (v.is_number_integer() && !v.is_number_unsigned()
      && v.get<int64_t>() < 0)
    fail(source, "task.index",
         fmt::format("must not be negative, got {}", v.get<int64_t>()));
  if (!v.is_number_integer())
    fail(source, "task.index",
         fmt::format("must be a whole number, got {}", v.dump()));
  auto x = v.get<uint64_t>();
  if (x > std::numeric_limits<uint32_t>::max())
    fail(source, "task.index", fmt::format("{} is out of range", x));
  return static_cast<uint32_t>(x);
}

} // namespace

// -- host_port ----------------------------------------------------------------

bool operator==(const host_port& x, const host_port& y) {
  return x.host == y.host && x.port == y.port;
}

bool operator!=(const host_port& x, const host_port& y) {
  return !(x == y);
}

std::string to_string(const host_port& x) {
  if (x.host.find(':') != std::string::npos)
    return fmt::format("[{}]:{}", x.host, x.port);
  return fmt::format("{}:{}", x.host, x.port);
}

host_port parse_host_port(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return input_error(fmt::format("bad address \"{}\" ({})", text, why));
  };
  if (text.find("://") != std::string::npos)
    throw bad("expected host:port without a scheme; TF_CONFIG's rpc_layer "
              "names the protocol");
  std::string host;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos)
      throw bad("'[' without ']'; expected [ipv6]:port");
    host = text.substr(1, close - 1);
    if (close + 1 == text.size())
      throw bad("expected [ipv6]:port");
    if (text[close + 1] != ':')
      throw bad("expected ':' after ']'");
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos)
      throw bad("expected host:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos)
      throw bad("an IPv6 host must be in brackets, e.g. [::1]:2222");
  }
  if (auto why = host_problem(host); !why.empty())
    throw bad(why);
  if (port.empty())
    throw bad("port is empty");
  if (!std::all_of(port.begin(), port.end(),
                   [](unsigned char c) { return std::isdigit(c); }))
    throw bad(fmt::format("port \"{}\" is not a number", port));
  // At most 5 digits before converting, so that stoul cannot overflow.
  auto value = port.size() > 5 ? 0ul : std::stoul(port);
  if (value < 1 || value > 65535)
    throw bad(fmt::format("port {} is out of range [1, 65535]", port));
  return host_port{host, static_cast<uint16_t>(value)};
}

// -- task_id ------------------------------------------------------------------

bool operator==(const task_id& x, const task_id& y) {
  return x.type == y.type && x.index == y.index;
}

bool operator!=(const task_id& x, const task_id& y) {
  return !(x == y);
}

// -- cluster_spec -------------------------------------------------------------

const std::vector<host_port>&
cluster_spec::members(const std::string& role) const {
  if (auto xs = members_of(*this, role))
    return *xs;
  throw input_error(
    fmt::format("unknown role \"{}\" (known: {})", role, roles_list));
}

std::string cluster_spec::to_json() const {
  json cluster = json::object();
  for (auto role : roles) {
    auto& xs = members(role);
    if (xs.empty() && std::string{role} == "evaluator")
      continue;
    json list = json::array();
    for (auto& x : xs)
      list.push_back(to_string(x));
    cluster[role] = std::move(list);
  }
  json doc{{"cluster", std::move(cluster)}};
  if (task)
    doc["task"] = json{{"type", task->type}, {"index", task->index}};
  return doc.dump();
}

bool operator==(const cluster_spec& x, const cluster_spec& y) {
  return x.chief == y.chief && x.worker == y.worker && x.ps == y.ps
         && x.evaluator == y.evaluator && x.task == y.task;
}

bool operator!=(const cluster_spec& x, const cluster_spec& y) {
  return !(x == y);
}

// -- parsing ------------------------------------------------------------------

cluster_spec parse_cluster_spec(const std::string& json_text,
                                const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3,
    // ..." or, for a number too large for a double ("1e400"),
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    std::string msg = e.what();
    auto pos = msg.find("] ");
    fail(source, "",
         fmt::format("malformed JSON: {}", pos == std::string::npos
                                               ? msg
                                               : msg.substr(pos + 2)));
  }
  if (!doc.is_object())
    fail(source, "", "must be a JSON object with a \"cluster\" field");
  for (auto& kv : doc.items()) {
    auto& key = kv.key();
    if (key != "cluster" && key != "task" && key != "environment"
        && key != "rpc_layer")
      fail(source, key,
           "unknown field (known: cluster, task, environment, rpc_layer)");
  }
  cluster_spec spec;
  // -- cluster ----------------------------------------------------------------
  auto cluster = doc.find("cluster");
  if (cluster == doc.end() || cluster->is_null())
    fail(source, "cluster", "missing");
  if (!cluster->is_object())
    fail(source, "cluster", "must be an object mapping roles to address lists");
  for (auto& kv : cluster->items()) {
    auto field = "cluster." + kv.key();
    auto* xs = members_of(spec, kv.key());
    if (xs == nullptr)
      fail(source, field, fmt::format("unknown role (known: {})", roles_list));
    auto& list = kv.value();
    if (list.is_null())
      continue;
    if (!list.is_array())
      fail(source, field, "must be an array of \"host:port\" strings");
    for (size_t i = 0; i < list.size(); ++i) {
      auto item = fmt::format("{}[{}]", field, i);
      if (!list[i].is_string())
        fail(source, item,
             fmt::format("must be a \"host:port\" string, got {}",
                         list[i].dump()));
      try {
        xs->push_back(parse_host_port(list[i].get<std::string>()));
      } catch (const input_error& e) {
        fail(source, item, e.what());
      }
    }
  }
  // -- task -------------------------------------------------------------------
  auto task = doc.find("task");
  if (task != doc.end() && !task->is_null()) {
    if (!task->is_object())
      fail(source, "task", "must be an object with \"type\" and \"index\"");
    for (auto& kv : task->items())
      if (kv.key() != "type" && kv.key() != "index")
        fail(source, "task." + kv.key(), "unknown field (known: type, index)");
    task_id id;
    auto type = task->find("type");
    if (type == task->end() || type->is_null())
      fail(source, "task.type", "missing");
    if (!type->is_string())
      fail(source, "task.type",
           fmt::format("must be a string, got {}", type->dump()));
    id.type = type->get<std::string>();
    auto index = task->find("index");
    if (index == task->end() || index->is_null())
      fail(source, "task.index", "missing");
    id.index = read_index(*index, source);
    spec.task = std::move(id);
  }
  validate(spec, source);
  return spec;
}

cluster_spec load_cluster_spec(const std::string& path) {
  return parse_cluster_spec(read_text_file(path, "cluster spec file"), path);
}

cluster_spec cluster_spec_from_env(const std::string& variable) {
  auto value = std::getenv(variable.c_str());
  if (value == nullptr)
    throw input_error(fmt::format(
      "{}: not set (expected the cluster spec as TF_CONFIG JSON)", variable));
  std::string text{value};
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw input_error(fmt::format(
      "{}: empty (expected the cluster spec as TF_CONFIG JSON)", variable));
  return parse_cluster_spec(text, variable);
}

// -- validation ---------------------------------------------------------------

void validate(const cluster_spec& spec, const std::string& source) {
  // Exactly one chief: TF allows none, but here the chief is the coordinator.
  if (spec.chief.empty())
    fail(source, "cluster.chief",
         "missing: exactly one chief (the coordinator) is required");
  if (spec.chief.size() > 1)
    fail(source, "cluster.chief",
         fmt::format("has {} addresses: exactly one chief (the coordinator) "
                     "is required",
                     spec.chief.size()));
  if (spec.worker.empty())
    fail(source, "cluster.worker", "missing: at least one worker is required");
  if (spec.ps.empty())
    fail(source, "cluster.ps",
         "missing: at least one parameter server is required");
  if (spec.evaluator.size() > 1)
    fail(source, "cluster.evaluator",
         fmt::format("has {} addresses: at most one evaluator is allowed",
                     spec.evaluator.size()));
  // Addresses: well formed (a spec built in code skipped parse_host_port) and
  // each listed once across the whole cluster.
  std::map<std::string, std::string> seen; // address key -> field
  for (auto role : roles) {
    auto& xs = spec.members(role);
    for (size_t i = 0; i < xs.size(); ++i) {
      auto field = fmt::format("cluster.{}[{}]", role, i);
      if (auto why = host_problem(xs[i].host); !why.empty())
        fail(source, field,
             fmt::format("bad address \"{}\" ({})", to_string(xs[i]), why));
      if (xs[i].port == 0)
        fail(source, field,
             fmt::format("bad address \"{}\" (port 0 is out of range "
                         "[1, 65535])",
                         to_string(xs[i])));
      auto [at, fresh] = seen.emplace(address_key(xs[i]), field);
      if (!fresh)
        fail(source, field,
             fmt::format("address \"{}\" is already {}", to_string(xs[i]),
                         at->second));
    }
  }
  if (!spec.task)
    return;
  auto& task = *spec.task;
  if (!is_role(task.type))
    fail(source, "task.type",
         fmt::format("unknown role \"{}\" (known: {})", task.type, roles_list));
  // Chief, worker and ps are never empty here; an evaluator may be missing
  // from the cluster (TF: a sidecar evaluator has no address), and is then
  // the one evaluator, index 0.
  auto count = spec.members(task.type).size();
  if (task.type == "evaluator" && count == 0)
    count = 1;
  if (task.index >= count)
    fail(source, "task.index",
         fmt::format("{} is out of range for role \"{}\" with {} {} "
                     "(valid: 0 to {})",
                     task.index, task.type, count,
                     count == 1 ? "member" : "members", count - 1));
}

} // namespace actorps
