#pragma once

// The one type-id block of every message and atom actorps sends. Register it
// on every node with `cfg.add_message_types<caf::id_block::actorps>()` before
// the actor_system exists (see cluster/local_cluster.hpp).

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "caf/actor_control_block.hpp"
#include "caf/atom.hpp"
#include "caf/deserializer.hpp"
#include "caf/error.hpp"
#include "caf/meta/type_name.hpp"
#include "caf/sec.hpp"
#include "caf/serializer.hpp"
#include "caf/type_id.hpp"

#include "core/float_vector.hpp"

namespace actorps {

/// Error codes of actorps actors (category atom "actorps").
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
};

} // namespace actorps

CAF_ERROR_CODE_ENUM(actorps::errc, "actorps")

namespace actorps {

/// Renders an errc for people ("shape_mismatch", ...).
std::string to_string(errc x);

/// Dense floats as one contiguous block. Across the network the payload is
/// copied as raw bytes in one block, instead of CAF 0.17's element-by-element
/// encoding of std::vector<float> (see caf-0.17-notes.md, section 3). Bytes
/// travel in the host's order: all nodes of a cluster must share endianness.
struct float_buffer {
  float_vector values;

  /// Largest buffer a peer may send: 2^28 floats (1 GiB).
  static constexpr size_t max_floats = size_t{1} << 28;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, float_buffer& x) {
  if constexpr (std::is_same<Inspector, caf::serializer>::value) {
    size_t n = x.values.size();
    if (auto err = f.begin_sequence(n))
      return err;
    if (n > 0)
      if (auto err = f.apply_raw(n * sizeof(float), x.values.data()))
        return err;
    return f.end_sequence();
  } else if constexpr (std::is_same<Inspector, caf::deserializer>::value) {
    size_t n = 0;
    if (auto err = f.begin_sequence(n))
      return err;
    if (n > float_buffer::max_floats)
      return caf::make_error(caf::sec::invalid_argument,
                             "float_buffer larger than 1 GiB");
    x.values.resize(n);
    if (n > 0)
      if (auto err = f.apply_raw(n * sizeof(float), x.values.data()))
        return err;
    return f.end_sequence();
  } else {
    return f(caf::meta::type_name("actorps::float_buffer"), x.values);
  }
}

/// Identifies one update: worker, worker incarnation, closure. A parameter
/// server applies at most one push per closure id (a closure re-run on
/// another worker after its first one was lost counts as the same update).
struct update_id {
  uint32_t worker = 0;
  uint32_t incarnation = 0;
  uint64_t closure = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, update_id& x) {
  return f(caf::meta::type_name("actorps::update_id"), x.worker, x.incarnation,
           x.closure);
}

/// coordinator -> ps: create one shard of a variable, rows [row_begin,
/// row_end) x cols, with its initial values (row-major).
struct create_shard {
  std::string variable;
  uint32_t shard = 0;
  uint64_t row_begin = 0;
  uint64_t row_end = 0;
  uint64_t cols = 0;
  float_buffer values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, create_shard& x) {
  return f(caf::meta::type_name("actorps::create_shard"), x.variable, x.shard,
           x.row_begin, x.row_end, x.cols, x.values);
}

/// ps -> worker: every shard the server holds, one after another in creation
/// order, and the server clock they were read at.
struct pull_reply {
  uint64_t clock = 0;
  float_buffer values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pull_reply& x) {
  return f(caf::meta::type_name("actorps::pull_reply"), x.clock, x.values);
}

/// worker -> ps: a gradient for every shard of the server (same layout as
/// pull_reply::values), computed on values read at `read_clock`.
struct push_request {
  uint64_t read_clock = 0;
  update_id id;
  float_buffer gradient;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_request& x) {
  return f(caf::meta::type_name("actorps::push_request"), x.read_clock, x.id,
           x.gradient);
}

/// ps -> anyone: counters of one parameter server.
struct ps_stats {
  uint64_t clock = 0;           ///< updates applied (sync: rounds)
  uint64_t pushes = 0;          ///< pushes accepted (not duplicates)
  uint64_t duplicates = 0;      ///< pushes discarded as already applied
  uint64_t staleness_sum = 0;   ///< sum over applied pushes
  uint64_t staleness_max = 0;   ///< largest staleness seen
  uint64_t floats = 0;          ///< floats held
  uint64_t shards = 0;          ///< shards held
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ps_stats& x) {
  return f(caf::meta::type_name("actorps::ps_stats"), x.clock, x.pushes,
           x.duplicates,
           x.staleness_sum, x.staleness_max, x.floats, x.shards);
}

/// ps -> coordinator: everything a parameter server holds, for a checkpoint;
/// coordinator -> ps: the same, to restore one.
struct ps_snapshot {
  uint64_t clock = 0;           ///< updates applied
  uint64_t optimizer_steps = 0; ///< the optimizer's step count (Adam's t)
  float_buffer values;          ///< every shard, in buffer order
  std::vector<float_buffer> slots; ///< optimizer slots, each like values
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ps_snapshot& x) {
  return f(caf::meta::type_name("actorps::ps_snapshot"), x.clock,
           x.optimizer_steps, x.values, x.slots);
}

/// coordinator -> worker: run step function `function` as closure `id`.
struct closure_request {
  uint64_t id = 0;
  std::string function;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, closure_request& x) {
  return f(caf::meta::type_name("actorps::closure_request"), x.id, x.function);
}

/// worker -> coordinator: what one closure did. Times in seconds.
struct step_result {
  uint64_t closure = 0;
  uint32_t worker = 0;
  double loss = 0;       ///< mean loss of the step's minibatch
  uint64_t samples = 0;  ///< examples processed
  double pull_s = 0;     ///< from first pull sent to last reply
  double compute_s = 0;  ///< forward + backward
  double push_s = 0;     ///< from first push sent to last ack
  /// The worker's data position after this step (for checkpoints).
  uint64_t data_epoch = 0;
  uint64_t data_offset = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_result& x) {
  return f(caf::meta::type_name("actorps::step_result"), x.closure, x.worker,
           x.loss, x.samples, x.pull_s, x.compute_s, x.push_s, x.data_epoch,
           x.data_offset);
}

/// What a node believes the job is, field by field, each as canonical text
/// (see cluster/handshake.hpp). Two nodes belong to the same job exactly when
/// every field is equal.
struct job_fingerprint {
  std::string model;        ///< e.g. "mlp 784-256-128-10, init seed 42"
  std::string variables;    ///< names and shapes, e.g. "dense_0/kernel 784x256, ..."
  std::string partitioning; ///< every shard: rows and parameter server
  std::string optimizer;    ///< the update rule the servers apply
  std::string consistency;  ///< "async", "sync" or "ssp staleness 2"
  std::string cluster;      ///< "2 workers, 2 ps"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_fingerprint& x) {
  return f(caf::meta::type_name("actorps::job_fingerprint"), x.model,
           x.variables, x.partitioning, x.optimizer, x.consistency, x.cluster);
}

/// The first message between two nodes, in both directions: who the sender
/// is and what it runs.
struct handshake {
  uint32_t protocol = 0; ///< actorps wire protocol version
  std::string build;     ///< actorps version and source revision
  std::string role;      ///< "chief", "worker" or "ps"
  uint32_t index = 0;    ///< position in the role's address list
  job_fingerprint job;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, handshake& x) {
  return f(caf::meta::type_name("actorps::handshake"), x.protocol, x.build,
           x.role, x.index, x.job);
}

/// A node's answer to an accepted handshake: its own handshake and the actor
/// of its role (a ps_actor or worker_actor).
struct node_welcome {
  handshake node;
  caf::strong_actor_ptr role_actor;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_welcome& x) {
  return f(caf::meta::type_name("actorps::node_welcome"), x.node,
           x.role_actor);
}

namespace detail {
struct closure_state;
} // namespace detail

/// In-process only: the shared state behind a remote_value, handed to the
/// coordinator actor by cluster_coordinator::schedule.
using closure_ptr = std::shared_ptr<detail::closure_state>;

} // namespace actorps

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorps::closure_ptr)

CAF_BEGIN_TYPE_ID_BLOCK(actorps, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(actorps, (actorps::float_buffer))
  CAF_ADD_TYPE_ID(actorps, (actorps::update_id))
  CAF_ADD_TYPE_ID(actorps, (actorps::create_shard))
  CAF_ADD_TYPE_ID(actorps, (actorps::pull_reply))
  CAF_ADD_TYPE_ID(actorps, (actorps::push_request))
  CAF_ADD_TYPE_ID(actorps, (actorps::ps_stats))
  CAF_ADD_TYPE_ID(actorps, (actorps::closure_request))
  CAF_ADD_TYPE_ID(actorps, (actorps::step_result))
  CAF_ADD_TYPE_ID(actorps, (actorps::job_fingerprint))
  CAF_ADD_TYPE_ID(actorps, (actorps::handshake))
  CAF_ADD_TYPE_ID(actorps, (actorps::node_welcome))
  CAF_ADD_TYPE_ID(actorps, (actorps::ps_snapshot))
  CAF_ADD_ATOM(actorps, actorps, create_atom, "create")
  CAF_ADD_ATOM(actorps, actorps, pull_atom, "pull")
  CAF_ADD_ATOM(actorps, actorps, push_atom, "push")
  CAF_ADD_ATOM(actorps, actorps, stats_atom, "stats")
  CAF_ADD_ATOM(actorps, actorps, run_atom, "run")
  CAF_ADD_ATOM(actorps, actorps, schedule_atom, "schedule")
  CAF_ADD_ATOM(actorps, actorps, cancel_atom, "cancel")
  CAF_ADD_ATOM(actorps, actorps, hello_atom, "hello")
  CAF_ADD_ATOM(actorps, actorps, shutdown_atom, "shutdown")
  CAF_ADD_ATOM(actorps, actorps, ping_atom, "ping")
  CAF_ADD_ATOM(actorps, actorps, lost_atom, "lost")
  CAF_ADD_ATOM(actorps, actorps, save_atom, "save")
  CAF_ADD_ATOM(actorps, actorps, restore_atom, "restore")
  CAF_ADD_ATOM(actorps, actorps, seek_atom, "seek")
  CAF_ADD_ATOM(actorps, actorps, freeze_atom, "freeze")
  CAF_ADD_ATOM(actorps, actorps, kill_atom, "kill")
  CAF_ADD_ATOM(actorps, actorps, replace_atom, "replace")
  CAF_ADD_ATOM(actorps, actorps, chaos_atom, "chaos")
  CAF_ADD_ATOM(actorps, actorps, retry_atom, "retry")
CAF_END_TYPE_ID_BLOCK(actorps)
