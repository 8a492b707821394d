#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace actorps {

/// One network endpoint of a cluster member. `host` is a host name or an IP
/// address as written, IPv6 without its brackets ("::1"); `port` is a TCP
/// port in [1, 65535].
struct host_port {
  std::string host;
  uint16_t port = 0;
};

bool operator==(const host_port& x, const host_port& y);
bool operator!=(const host_port& x, const host_port& y);

/// Renders an endpoint as it is written in a cluster spec: "host:port", with
/// an IPv6 host in brackets ("[::1]:2222").
std::string to_string(const host_port& x);

/// Parses "host:port", "[ipv6]:port" (e.g. "127.0.0.1:2222", "[::1]:2222").
/// The host is not resolved; it must be non-empty, without whitespace, and an
/// IPv6 host must be in brackets. The port must be decimal digits in
/// [1, 65535]: port 0 ("any free port") names no address others could reach.
/// @throws input_error `bad address "<text>" (<reason>)`, without a source:
///         callers prefix the file and field.
host_port parse_host_port(const std::string& text);

/// The role and index of this process in its cluster (TF_CONFIG's "task").
struct task_id {
  /// "chief", "worker", "ps" or "evaluator".
  std::string type;
  /// Position in the role's address list, 0-based.
  uint32_t index = 0;
};

bool operator==(const task_id& x, const task_id& y);
bool operator!=(const task_id& x, const task_id& y);

/// The members of a cluster and, optionally, which of them this process is,
/// in the shape of TensorFlow's TF_CONFIG:
///
///     {"cluster": {"chief": ["host:port"], "worker": ["host:port", ...],
///                  "ps": ["host:port", ...], "evaluator": ["host:port"]},
///      "task": {"type": "worker", "index": 0}}
///
/// Invariants after parse_cluster_spec or validate: exactly one chief (the
/// coordinator), at least one worker and one ps, at most one evaluator, no
/// address twice, and `task`, if set, names a member. The one exception is
/// TensorFlow's: a task of type "evaluator" with index 0 is valid when the
/// cluster lists no evaluator (a sidecar evaluator needs no address).
struct cluster_spec {
  std::vector<host_port> chief;
  std::vector<host_port> worker;
  std::vector<host_port> ps;
  /// Optional; empty when the cluster runs no evaluator.
  std::vector<host_port> evaluator;
  /// Which member this process is; unset when TF_CONFIG has no "task".
  std::optional<task_id> task;

  /// The address list of `role` ("chief", "worker", "ps", "evaluator").
  /// @throws input_error `unknown role "<role>" (...)` for any other name.
  const std::vector<host_port>& members(const std::string& role) const;

  /// Serializes to TF_CONFIG JSON on one line (fit for an environment
  /// variable); "evaluator" and "task" are left out when empty. Parsing the
  /// result gives back an equal spec.
  std::string to_json() const;
};

bool operator==(const cluster_spec& x, const cluster_spec& y);
bool operator!=(const cluster_spec& x, const cluster_spec& y);

/// Parses a cluster spec from TF_CONFIG-shaped JSON text, then validates it.
/// Top-level fields other than "cluster" and "task" are errors, except
/// "environment" and "rpc_layer", which TF_CONFIG allows and this ignores.
/// A field set to null counts as absent.
/// @param source file name or environment variable, for messages.
/// @throws input_error `<source>: <field>: <what>` with field like
///         `cluster.worker[1]` or `task.index`: malformed JSON, "cluster"
///         missing or not an object, unknown role, a role that is not an
///         array of strings, a bad address, or as validate.
cluster_spec parse_cluster_spec(const std::string& json_text,
                                const std::string& source = "<string>");

/// Reads and parses a cluster spec file.
/// @throws input_error naming `path` if it is missing or unreadable, or as
///         parse_cluster_spec.
cluster_spec load_cluster_spec(const std::string& path);

/// Parses the cluster spec in the environment variable `variable`.
/// @throws input_error naming the variable if it is unset or empty, or as
///         parse_cluster_spec with the variable's name as source.
/// @note Reads the environment with getenv: not safe against a concurrent
///       setenv in another thread.
cluster_spec cluster_spec_from_env(const std::string& variable = "TF_CONFIG");

/// Checks the invariants of cluster_spec, e.g. after flags (`--role`,
/// `--index`) set the task of a spec read from a file.
/// @throws input_error `<source>: <field>: <what>`: no or several chiefs
///         (`cluster.chief`), no worker or ps, more than one evaluator, port 0
///         or empty host, an address listed twice (both places named), a task
///         whose type is unknown or absent from the cluster (`task.type`) or
///         whose index is out of range (`task.index`).
void validate(const cluster_spec& spec, const std::string& source);

} // namespace actorps
