#pragma once

// Every message actorps sends; their type ids and the atoms are in
// actors/message_ids.hpp, included at the end.

#include <cstdint>
#include <limits>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "caf/actor_control_block.hpp"
#include "caf/atom.hpp"
#include "caf/binary_deserializer.hpp"
#include "caf/deserializer.hpp"
#include "caf/error.hpp"
#include "caf/meta/type_name.hpp"
#include "caf/sec.hpp"
#include "caf/serializer.hpp"
#include "caf/type_id.hpp"

#include "core/data_range.hpp"
#include "core/errc.hpp"
#include "core/float_vector.hpp"
#include "core/wire_format.hpp"
#include "actors/ps_stats.hpp"

CAF_ERROR_CODE_ENUM(actorps::errc, "actorps")

namespace actorps {

namespace detail {

/// Serialises a vector of trivially copyable T as one raw block (the
/// element count, then the bytes), refusing more than `max` elements from a
/// peer. CAF 0.17 encodes std::vector<float> element by element, 7-14x
/// slower (caf-0.17-notes.md, section 3).
template <class T>
caf::error save_raw(caf::serializer& f, const T* xs, size_t n) {
  static_assert(std::is_trivially_copyable<T>::value);
  if (auto err = f.begin_sequence(n))
    return err;
  // apply_raw only reads when serialising.
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(T), const_cast<T*>(xs)))
      return err;
  return f.end_sequence();
}

template <class Inspector, class Vector>
typename Inspector::result_type
inspect_raw(Inspector& f, Vector& xs, size_t max, const char* what) {
  using value_type = typename Vector::value_type;
  static_assert(std::is_trivially_copyable<value_type>::value);
  if constexpr (std::is_same<Inspector, caf::serializer>::value) {
    return save_raw(f, xs.data(), xs.size());
  } else {
    size_t n = 0;
    if (auto err = f.begin_sequence(n))
      return err;
    if (n > max)
      return caf::make_error(caf::sec::invalid_argument, what);
    // A peer's few bytes must not make this process allocate up to `max`
    // elements (1 GiB) before the read fails: from a buffer, as BASP and
    // the data channel read, the count must fit in what is left.
    if (auto* buf = dynamic_cast<caf::binary_deserializer*>(&f);
        buf != nullptr && n > buf->remaining() / sizeof(value_type))
      return caf::make_error(caf::sec::invalid_argument,
                             "a count larger than the message");
    xs.resize(n);
    if (n > 0)
      if (auto err = f.apply_raw(n * sizeof(value_type), xs.data()))
        return err;
    return f.end_sequence();
  }
}

} // namespace detail

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
  if constexpr (std::is_same<Inspector, caf::serializer>::value
                || std::is_same<Inspector, caf::deserializer>::value)
    return detail::inspect_raw(f, x.values, float_buffer::max_floats,
                               "float_buffer larger than 1 GiB");
  else
    return f(caf::meta::type_name("actorps::float_buffer"), x.values);
}

/// A tensor in a wire format (core/wire_format.hpp) on the wire: its size
/// fields, then the payload as one raw block (at most 1 GiB from a peer).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, encoded_tensor& x) {
  if constexpr (std::is_same<Inspector, caf::serializer>::value
                || std::is_same<Inspector, caf::deserializer>::value) {
    if (auto err = f(x.n, x.k))
      return err;
    return detail::inspect_raw(f, x.bytes, size_t{1} << 30,
                               "encoded tensor larger than 1 GiB");
  } else {
    return f(caf::meta::type_name("actorps::encoded_tensor"), x.n, x.k);
  }
}

/// 64-bit keys (of embedding-table rows) as one contiguous block, like
/// float_buffer.
struct key_buffer {
  std::vector<uint64_t> keys;

  /// Largest buffer a peer may send: 2^27 keys (1 GiB).
  static constexpr size_t max_keys = size_t{1} << 27;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, key_buffer& x) {
  if constexpr (std::is_same<Inspector, caf::serializer>::value
                || std::is_same<Inspector, caf::deserializer>::value)
    return detail::inspect_raw(f, x.keys, key_buffer::max_keys,
                               "key_buffer larger than 1 GiB");
  else
    return f(caf::meta::type_name("actorps::key_buffer"), x.keys);
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

/// chief (job setup) -> ps: create one shard of a variable.
/// - dense (`table` false): rows [row_begin, row_end) x cols with their
///   initial values (row-major), appended to the server's dense region.
/// - table: shard `shard` (its shard id in the placement) of an embedding
///   table with rows of `cols` floats, keys below `vocabulary` (0 =
///   unbounded), new rows U(-init_scale, init_scale) from (seed, variable,
///   key); `values` empty.
struct create_shard {
  /// The replica group (the placement's ps index of the shard) it belongs to.
  uint32_t group = 0;
  std::string variable;
  uint32_t shard = 0;
  bool table = false;
  uint64_t row_begin = 0;
  uint64_t row_end = 0;
  uint64_t cols = 0;
  uint64_t vocabulary = 0;
  float init_scale = 0;
  uint64_t seed = 0;
  float_buffer values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, create_shard& x) {
  return f(caf::meta::type_name("actorps::create_shard"), x.group, x.variable,
           x.shard,
           x.table, x.row_begin, x.row_end, x.cols, x.vocabulary,
           x.init_scale, x.seed, x.values);
}

/// Rows of one table shard by key: in a pull request the keys asked for
/// (`values` empty); in a pull reply the rows of those keys (keys.size() x
/// dim floats, row i for keys[i]; `keys` empty, the request has them); in a
/// push the unique keys and their row gradients (keys.size() x dim).
struct table_rows {
  /// Shard id: the shard's position in the job's placement.
  uint32_t shard = 0;
  key_buffer keys;
  float_buffer values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_rows& x) {
  return f(caf::meta::type_name("actorps::table_rows"), x.shard, x.keys,
           x.values);
}

/// worker -> ps: what one step reads from one server: its whole dense region
/// (if `dense`) and, per table shard, the batch's unique keys that shard
/// holds.
struct pull_request {
  /// The replica group read (the placement's ps index) and the view of it
  /// the reader knows (see replica_config).
  uint32_t group = 0;
  uint64_t view = 0;
  /// The reader's worker index (no_worker: the chief's evaluation; never
  /// held back under ssp).
  uint32_t worker = 0;
  bool dense = true;
  std::vector<table_rows> tables;
  /// Whether rows not held yet are created (workers: yes; evaluation reads
  /// initial values without storing them).
  bool create = true;
  /// The wire format the dense values should come back in ("bf16",
  /// "fp16"; empty: floats). Formats with error feedback (topk) are refused.
  std::string format;
  /// Sent as an urgent message (cluster.layer_pushes: the next forward pass
  /// waits for these values): the server's mailbox takes it ahead of the
  /// pushes queued there. Across processes the data channel's session on
  /// the server sends it on as urgent too (BASP keeps a message's
  /// priority by itself).
  bool urgent = false;
  /// A slice of the dense region (cluster.priority_pulls): with `dense`,
  /// only its floats [offset, offset + count) come back (count >= 1,
  /// inside the region, else bad_message); without `slice`, all of them.
  bool slice = false;
  uint64_t offset = 0;
  uint64_t count = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pull_request& x) {
  return f(caf::meta::type_name("actorps::pull_request"), x.group, x.view,
           x.worker, x.dense, x.tables, x.create, x.format, x.urgent, x.slice,
           x.offset, x.count);
}

/// ps -> worker: the dense region (empty unless asked for) and the rows of
/// each table of the request (tables[i] answers request.tables[i]), read at
/// server clock `clock`.
struct pull_reply {
  uint64_t clock = 0;
  float_buffer values;
  std::vector<table_rows> tables;
  /// When the request named a format: the dense values encoded in it
  /// (`values` is then empty).
  std::string format;
  encoded_tensor encoded;
  /// Sender side only, for a reader in another process: the dense values
  /// as the server's copy-on-write snapshot (dense_region::snapshot), sent
  /// in place of `values` (which is then empty) with the same bytes, so
  /// the reply needs no copy of its own. Never read in-process, never
  /// received: the receiver gets `values`. Of it, the floats
  /// [shared_offset, shared_offset + shared_count) are sent (a slice).
  std::shared_ptr<const std::vector<float>> shared_values;
  uint64_t shared_offset = 0;
  uint64_t shared_count = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pull_reply& x) {
  if constexpr (std::is_same<Inspector, caf::serializer>::value) {
    if (x.shared_values) {
      auto* v = x.shared_values->data() + x.shared_offset;
      if (auto err = f(x.clock))
        return err;
      if (auto err = detail::save_raw(f, v, x.shared_count))
        return err;
      return f(x.tables, x.format, x.encoded);
    }
  }
  return f(caf::meta::type_name("actorps::pull_reply"), x.clock, x.values,
           x.tables, x.format, x.encoded);
}

/// Floats [offset, offset + tensor.n) of a group's dense region encoded in
/// wire format `format` (e.g. "bf16", "topk:0.01"): one run of a push.
struct encoded_part {
  uint64_t offset = 0;
  std::string format;
  encoded_tensor tensor;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, encoded_part& x) {
  return f(caf::meta::type_name("actorps::encoded_part"), x.offset, x.format,
           x.tensor);
}

/// worker -> ps: one step's update of one server, computed on values read
/// at `read_clock`: a gradient for the whole dense region (same layout as
/// pull_reply::values; empty if the server has no dense shard) and, per
/// table shard the batch touched, unique keys with their row gradients.
struct push_request {
  /// The replica group updated and the view of it the sender knows.
  uint32_t group = 0;
  uint64_t view = 0;
  uint64_t read_clock = 0;
  update_id id;
  /// The dense gradient of the group's region: as floats in `gradient`, or
  /// encoded in `parts` (runs in their variables' wire formats, in region
  /// order, covering it exactly; core/wire_plan.hpp), which the server
  /// decodes before anything else.
  float_buffer gradient;
  std::vector<encoded_part> parts;
  std::vector<table_rows> tables;
  /// One piece of a push sent in pieces (cluster.layer_pushes, async
  /// only): the dense floats (or parts) cover the run of the region from
  /// `offset` on instead of all of it; the server applies each piece as it
  /// comes and counts the update (its id applied, the clock one up) once
  /// its pieces cover the region (actors/ps_pieces.hpp).
  bool piece = false;
  uint64_t offset = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_request& x) {
  return f(caf::meta::type_name("actorps::push_request"), x.group, x.view,
           x.read_clock, x.id, x.gradient, x.parts, x.tables, x.piece,
           x.offset);
}

/// Everything one table shard holds, for a checkpoint: row i is keys[i],
/// values[i * dim ..), slots[s][i * dim ..), with steps[i] updates applied.
/// With `delta`, only the rows created or updated since the shard's last
/// mark (table_store::export_changed) and in `removed` the keys that left
/// it since (removed_since_mark).
struct table_snapshot {
  uint32_t shard = 0;
  key_buffer keys;
  float_buffer values;
  std::vector<float_buffer> slots;
  key_buffer steps;
  bool delta = false;
  key_buffer removed;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_snapshot& x) {
  return f(caf::meta::type_name("actorps::table_snapshot"), x.shard, x.keys,
           x.values, x.slots, x.steps, x.delta, x.removed);
}

/// ps -> chief (its checkpointer): everything a parameter server holds, for a
/// checkpoint; chief -> ps: the same, to restore one.
struct ps_snapshot {
  uint64_t clock = 0;           ///< updates applied
  uint64_t optimizer_steps = 0; ///< the dense region's step count (Adam's t)
  float_buffer values;          ///< the dense region
  std::vector<float_buffer> slots; ///< its optimizer slots, each like values
  std::vector<table_snapshot> tables; ///< every table shard held
  /// Replication only (an install on a new backup; empty in checkpoints):
  /// the closure ids applied, pushes counted, and ssp's per-worker clocks.
  key_buffer applied;
  uint64_t pushes = 0;
  key_buffer worker_clocks;
  /// Replication only: the pushes in pieces of which some arrived
  /// (actors/ps_pieces.hpp, encode_partials).
  key_buffer partials;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ps_snapshot& x) {
  return f(caf::meta::type_name("actorps::ps_snapshot"), x.clock,
           x.optimizer_steps, x.values, x.slots, x.tables, x.applied,
           x.pushes, x.worker_clocks, x.partials);
}

/// chief (job setup) or dispatcher (failover) -> ps: the role of this server
/// in replica group `group` as of view `view` (views count the group's role
/// changes; requests naming another view are refused with errc::stale_view,
/// which fences a deposed primary). A primary with a `backup` forwards every
/// update to it and acknowledges an update only once the backup applied it
/// (chain replication, Li et al., OSDI 2014, section 4.3; van Renesse &
/// Schneider, OSDI 2004); with `install`, it first sends the backup a copy
/// of its state.
/// A primary without a backup applies alone. A backup serves no reads or
/// pushes, only its primary's forwards.
struct replica_config {
  uint32_t group = 0;
  uint64_t view = 0;
  bool primary = true;
  caf::strong_actor_ptr backup;
  bool install = false;
  /// The backup's ps index (across processes the primary dials it
  /// directly); the largest value: not given.
  uint32_t backup_ps = std::numeric_limits<uint32_t>::max();
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_config& x) {
  return f(caf::meta::type_name("actorps::replica_config"), x.group, x.view,
           x.primary, x.backup, x.install, x.backup_ps);
}

/// primary -> backup: one update as the primary applied it: the pushes it
/// contains (their update ids; under sync a whole round), the gradient
/// (`update`, multiplied by `scale` when applied: 1 / pushes for a sync
/// round's sum) and the primary's clock after it.
struct replicate_request {
  uint32_t group = 0;
  uint64_t view = 0;
  uint64_t clock = 0;
  std::vector<update_id> ids;
  float scale = 1.0f;
  push_request update;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replicate_request& x) {
  return f(caf::meta::type_name("actorps::replicate_request"), x.group, x.view,
           x.clock, x.ids, x.scale, x.update);
}

/// dispatcher -> worker: where replica group `group` is served now: by
/// parameter server `ps` (index), as `actor`, at view `view`.
struct group_route {
  uint32_t group = 0;
  uint32_t ps = 0;
  uint64_t view = 0;
  caf::strong_actor_ptr actor;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_route& x) {
  return f(caf::meta::type_name("actorps::group_route"), x.group, x.ps, x.view,
           x.actor);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, data_range& x) {
  return f(caf::meta::type_name("actorps::data_range"), x.part, x.name,
           x.begin, x.end, x.progressive);
}

/// dispatcher -> worker: run step function `function` as closure `id`, on
/// the examples of `range` (empty: the next batch of the worker's own
/// source).
struct closure_request {
  uint64_t id = 0;
  std::string function;
  data_range range;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, closure_request& x) {
  return f(caf::meta::type_name("actorps::closure_request"), x.id, x.function,
           x.range);
}

/// worker -> dispatcher: what one closure did. Times in seconds.
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
  /// Unique table keys the step pulled (and pushed), over all tables.
  uint64_t keys = 0;
  /// Payload bytes of the step's pulls (replies) and pushes: floats and
  /// keys, without message headers.
  uint64_t bytes_pulled = 0;
  uint64_t bytes_pushed = 0;
  /// Peak resident memory of the worker's process so far, bytes.
  uint64_t peak_rss_bytes = 0;
  /// Groups whose dense values came from a pull sent ahead (overlap,
  /// prefetch).
  uint32_t pulls_ahead = 0;
  /// Pieces of the step's pushes sent during its compute (layer pushes).
  uint32_t early_pieces = 0;
  /// Forward stages run before the step's last pulled values arrived
  /// (priority pulls).
  uint32_t early_stages = 0;
  /// Between processes: the worker's data channels to its servers through
  /// shared memory and over TCP when the step ended (the rest go over
  /// BASP; 0 and 0 in one process).
  uint32_t links_shm = 0;
  uint32_t links_tcp = 0;
  /// Progressive evaluation (a closure with a data_range: test, then
  /// train): each example's score (the logit of a binary model), computed
  /// with the values pulled before this step's update, and its label.
  /// Empty for other closures and models without a binary score.
  std::vector<float> scores;
  std::vector<int32_t> labels;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_result& x) {
  return f(caf::meta::type_name("actorps::step_result"), x.closure, x.worker,
           x.loss, x.samples, x.pull_s, x.compute_s, x.push_s, x.data_epoch,
           x.data_offset, x.keys, x.bytes_pulled, x.bytes_pushed,
           x.peak_rss_bytes, x.pulls_ahead, x.early_pieces, x.early_stages,
           x.links_shm, x.links_tcp, x.scores, x.labels);
}

/// What a node believes the job is, field by field, each as canonical text
/// (see cluster/net/handshake.hpp). Two nodes belong to the same job exactly when
/// every field is equal.
struct job_fingerprint {
  std::string model;        ///< e.g. "mlp 784-256-128-10, init seed 42"
  std::string variables;    ///< names and shapes, e.g. "dense_0/kernel 784x256, ..."
  std::string partitioning; ///< every shard: rows and parameter server
  std::string optimizer;    ///< the update rule the servers apply
  std::string consistency;  ///< "async", "sync" or "ssp staleness 2"
  std::string cluster;      ///< "2 workers, 2 ps"
  /// What makes data positions meaningful: dataset and its options, train
  /// limit, batch size, shuffle seed (not the folder, which may differ
  /// between machines).
  std::string data;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_fingerprint& x) {
  return f(caf::meta::type_name("actorps::job_fingerprint"), x.model,
           x.variables, x.partitioning, x.optimizer, x.consistency, x.cluster,
           x.data);
}

/// The first message between two nodes, in both directions: who the sender
/// is and what it runs.
struct handshake {
  uint32_t protocol = 0; ///< actorps wire protocol version
  std::string build;     ///< actorps version and source revision
  std::string role;      ///< "chief", "worker" or "ps"
  uint32_t index = 0;    ///< position in the role's address list
  /// New at every start of the node's process (random): a peer that meets
  /// a node again tells a paused one (same incarnation, state intact) from a
  /// restarted one (new incarnation, state lost).
  uint64_t incarnation = 0;
  job_fingerprint job;
  /// With TLS: the ticket the receiver's gate issued on the connection the
  /// sender dialled (cluster/net/tls.hpp); the receiver checks that the
  /// certificate it was issued to names `role` and `index`. Empty otherwise.
  std::string ticket;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, handshake& x) {
  return f(caf::meta::type_name("actorps::handshake"), x.protocol, x.build,
           x.role, x.index, x.incarnation, x.job, x.ticket);
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
/// dispatcher by cluster_coordinator::schedule.
using closure_ptr = std::shared_ptr<detail::closure_state>;

} // namespace actorps

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorps::closure_ptr)

#include "actors/message_ids.hpp"
