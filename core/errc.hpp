#pragma once

// The error codes of actorps (in core/, so that core can name
// them; actors/messages.hpp makes them CAF errors of category "actorps").
// Each code has one meaning.

#include <cstdint>
#include <string>

namespace actorps {

/// Error codes of actorps (CAF category atom "actorps").
enum class errc : uint8_t {
  /// A pushed gradient or created shard has the wrong number of floats.
  shape_mismatch = 1,
  /// A closure names a step function the worker does not know.
  unknown_function,
  /// A parameter server was asked for values before it holds any shard.
  no_shards,
  /// The step function failed on the worker (message in the context).
  step_failed,
  /// The closure was cancelled before it ran (an earlier closure failed).
  cancelled,
  /// A pull or push names a worker index the server was not told about.
  unknown_worker,
  /// A node of another job, build or protocol version asked to join (the
  /// context says what differs).
  handshake_refused,
  /// A parameter server this worker needs is unreachable (its process died,
  /// stopped or lost its connection).
  ps_lost,
  /// No worker is left to run closures.
  no_workers,
  /// A pull or push names a variable (table shard) the server does not hold.
  unknown_variable,
  /// A key is outside a fixed-vocabulary table's [0, vocabulary).
  key_out_of_range,
  /// A message from a peer is malformed (sizes that do not fit each other).
  bad_message,
  /// A request names a view of a replica group other than the server's: the
  /// group's primary changed (a failover) or this server does not serve it
  /// (a backup, or a deposed primary). The sender needs the current routes.
  stale_view,
  /// The server holds no replica of the group a request names.
  unknown_group,
  /// The sender may not send this message: its authenticated role may not
  /// (cluster/net/authorization.hpp), it never introduced itself, or it claims
  /// another worker's index (the context names the sender and the message).
  not_authorized,
};

/// Renders an errc for people ("shape_mismatch", ...).
std::string to_string(errc x);

} // namespace actorps
