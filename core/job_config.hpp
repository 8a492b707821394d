#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/fault_spec.hpp"
#include "core/options.hpp"
#include "core/partitioner.hpp"
#include "core/placement.hpp"
#include "core/table_policy.hpp"
#include "core/update_rule.hpp"

namespace actorps {

/// Transport security between the nodes of a multi-process cluster
/// (cluster.tls in the config; flags --tls, --tls-ca, --tls-cert,
/// --tls-key). See cluster/net/tls.hpp and docs/guide/security.md.
struct tls_settings {
  /// Plain TCP, asked for explicitly ("tls": "off", --tls off).
  bool off = false;
  /// A folder made by `actorps certs`: ca.pem, and <node>.pem / <node>.key
  /// of each node ("coordinator", "ps0", "worker1").
  std::string dir;
  /// Files named one by one; each overrides the one `dir` would give.
  std::string ca;
  std::string cert;
  std::string key;

  /// Whether the config or the flags said anything about TLS.
  bool given() const {
    return off || !dir.empty() || !ca.empty() || !cert.empty() || !key.empty();
  }
};

/// Everything a training job needs, read from a JSON file (see
/// configs/fashion_mnist.json for every field with its default). Unknown
/// fields, wrong types and out-of-range values are errors, never ignored.
/// A field's config key, flag, bounds and help are its row of the option
/// table (core/job_options.cpp); its default is its initialiser here.
struct job_config {
  // -- model ------------------------------------------------------------------
  /// Model name in the model registry ("mlp", "sparse_logistic_regression",
  /// "embedding_mlp").
  std::string model = "mlp";
  /// Layer widths of the model's dense tower, input first, output last
  /// (mlp: input features ... classes; embedding_mlp: the concatenated
  /// embeddings ... 1).
  /// Empty: the model's default for the data (mlp: dense width -> 256 -> 128
  /// -> classes).
  std::vector<uint64_t> layers;
  /// Seed of the variables' initial values (dense values and table rows).
  uint64_t init_seed = 42;
  /// The model section's other fields (e.g. "embedding_dim"), which the
  /// model checks itself.
  option_map model_options;

  // -- data -------------------------------------------------------------------
  /// Dataset name in the dataset registry ("fashion_mnist", "a9a", "libsvm",
  /// "movielens", "synthetic_ctr").
  std::string dataset = "fashion_mnist";
  /// Folder of the dataset's files.
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  /// Examples per step and worker.
  uint64_t batch_size = 64;
  /// Seed of the per-worker shuffles.
  uint64_t shuffle_seed = 1;
  /// How the training examples reach the workers: "static" (each worker
  /// reads its own slice, rows i % workers == index, TF's Dataset.shard) or
  /// "dynamic" (the coordinator hands out each epoch's examples, one batch
  /// per closure, to whichever worker is free; every worker can read the
  /// whole split: core/dataset_ranges.hpp). A stream is always handed out.
  std::string sharding = "static";
  /// Use only the first N training / test examples (0 = all).
  uint64_t train_limit = 0;
  uint64_t test_limit = 0;
  /// The data section's other fields (e.g. synthetic_ctr's "cardinalities"),
  /// which the dataset checks itself.
  option_map data_options;
  /// A stream instead of a dataset ("" = none): a folder of parts that the
  /// job trains on as they appear, each part once, with progressive
  /// evaluation (core/stream_source.hpp, stream_config_of()). The model's
  /// input schema is then the stream's (stream_format and its fields).
  std::string stream_dir;
  /// The parts' format ("ctr_csv" or "libsvm") and its fields (ctr_csv:
  /// dense features and sparse fields; libsvm: the number of features).
  std::string stream_format = "ctr_csv";
  uint64_t stream_dense_features = 13;
  uint64_t stream_fields = 26;
  uint64_t stream_num_features = 0;
  /// How often the folder is looked at while waiting (ms); the stream ends
  /// after this many parts (0: never) or after this long without a new
  /// part (ms, 0: never).
  uint64_t stream_poll_ms = 100;
  uint64_t stream_end_after = 0;
  uint64_t stream_idle_timeout_ms = 0;
  /// A malformed record of a part: "skip" (counted, logged) or "fail" (the
  /// job stops, exit 2).
  std::string on_bad_record = "skip";
  /// Progressive loss and AUC over every window of this many examples of a
  /// stream, besides each part's (0: parts only).
  uint64_t progressive_window = 0;

  // -- tables: admission and eviction (core/table_policy.hpp) ---------------------
  /// Every table shard of the job follows these (table_policy_of()): a key
  /// gets a row at its admit_after-th pull (0, 1: the first), counted by a
  /// count-min sketch of table_filter_counters one-byte counters ("sketch")
  /// or exactly ("exact"); a row not updated for table_steps_to_live pushes
  /// of its server, or whose L2 norm is below table_l2_threshold, goes
  /// (swept table_sweep_rows rows per push and shard); a shard holds at
  /// most table_max_rows rows and table_max_bytes bytes, evicting by
  /// table_evict ("lru" or "lfu") when full. 0 = none, for each. Tables
  /// named in table_overrides change some of these for themselves.
  uint64_t table_admit_after = 0;
  std::string table_filter = "sketch";
  uint64_t table_filter_counters = uint64_t{1} << 20;
  uint64_t table_steps_to_live = 0;
  float table_l2_threshold = 0.0f;
  uint64_t table_max_rows = 0;
  uint64_t table_max_bytes = 0;
  std::string table_evict = "lru";
  uint64_t table_sweep_rows = 256;
  /// Tables with a policy of their own (config tables.per_table, flag
  /// --table-policy; core/table_overrides.hpp): table (variable) name ->
  /// field -> value as a flag writes it ({"embedding/user":
  /// {"admit_after": "3"}}). A field is one of table_override_fields(),
  /// the table_* field of the same name without "table_"; a field absent
  /// keeps the job-wide value. Names are checked against the model at
  /// start (check_table_policy()).
  std::map<std::string, std::map<std::string, std::string>> table_overrides;

  // -- cluster ----------------------------------------------------------------
  uint32_t workers = 2;
  uint32_t ps = 2;
  /// Replica groups the variables are placed over (0 = one per starting
  /// parameter server). More groups than servers (at most
  /// max_groups_per_ps per server) lets a server that joins take a share
  /// of the job: group g starts on server g % ps (its backup, with
  /// replicas, on the next one), and a join moves groups to the new server
  /// until the servers' primaries differ by at most one.
  uint32_t groups = 0;
  /// Parameter servers `actorps launch` starts for the job, at least `ps`
  /// (0 = `ps`, and the joins of the plan): the ones past `ps` run idle
  /// until `actorps scale --ps` (or a join:ps of the plan) brings them in,
  /// since every node learns the servers' addresses from the cluster spec
  /// at its start.
  uint32_t max_ps = 0;
  /// CAF scheduler threads (0 = one per core in `actorps train`; one per
  /// process for the nodes of a multi-process cluster).
  uint32_t threads = 0;
  /// Multi-process clusters: how long the coordinator (and a worker, for its
  /// parameter servers) keeps retrying nodes that are not up yet, and how
  /// long a node waits for the coordinator, in milliseconds.
  uint64_t connect_timeout_ms = 30000;
  /// CAF heartbeats between nodes (0 = none) and the silence after which a
  /// peer counts as lost, in milliseconds.
  uint64_t heartbeat_interval_ms = 200;
  uint64_t heartbeat_timeout_ms = 1000;
  /// Whether a lost parameter server that cannot be restored (no checkpoint
  /// yet) starts again from the initial values. Off: the job fails, naming
  /// the server and the variables lost (TensorFlow raises UnavailableError).
  bool reset_lost_ps = false;
  /// Backups of every parameter-server group: 0 (none) or 1 (each group's
  /// shards also live on the next server, updated by chain replication; a
  /// lost primary's backup takes over with nothing lost). Needs >= 2 ps.
  uint32_t replicas = 0;
  /// With replicas: "chain" (a push is acknowledged once both copies applied
  /// it: nothing acknowledged is lost with the primary) or "async" (the
  /// primary acknowledges at once; its backup may lag by up to
  /// replication_lag updates, which are lost if the primary dies).
  std::string replication = "chain";
  /// async replication: the most forwarded updates a backup may not have
  /// applied yet; a push beyond it waits (1 .. 1000000).
  uint32_t replication_lag = 16;
  /// The wire format of the dense gradient in pushes (core/wire_format.hpp):
  /// "fp32" (plain floats), "bf16", "fp16", "topk:K" or "topk:RATIO" (with
  /// error feedback on the worker). Pushes say their format, so the servers
  /// need no setting of their own. "auto": each worker times a pull of the
  /// model in fp32 and bf16 at its start and uses the faster (see
  /// actors/format_probe.hpp); refused under simulate.
  std::string push_format = "fp32";
  /// The push format of particular dense variables, by name (e.g.
  /// {"dense_0/kernel": "topk:0.01"}); the others use push_format. Checked
  /// against the model at start (core/wire_plan.hpp).
  std::map<std::string, std::string> variable_formats;
  /// The wire format of the dense values in pull replies: "fp32", "bf16",
  /// "fp16", "int8" (no error feedback for values: quantized as they are)
  /// or "auto" (as push_format).
  std::string pull_format = "fp32";
  /// Overlap (async only): each push is followed at once by the next step's
  /// pull of dense values, so both directions of a worker's link carry data
  /// at the same time; at most one step of extra staleness
  /// (worker_options::overlap).
  bool overlap = false;
  /// Prefetch (async only; not with overlap): each push is followed at once
  /// by the next step's pull of dense values, which waits behind the push on
  /// the connection and in the server and so sees it: no round trip between
  /// a closure's end and the next one's pull. The values hold the worker's
  /// own push (overlap's lack it), but are read earlier than a pull at the
  /// next closure's start, so other workers' pushes make them staler (2
  /// workers: mean 0.6 -> 0.95) (worker_options::prefetch). Unless chosen
  /// (`prefetch_chosen`: true, false, --prefetch, --no-prefetch), "auto":
  /// resolve_prefetch() turns it on between processes (resolve_prefetch).
  bool prefetch = false;
  bool prefetch_chosen = false;
  /// Layer pushes (async only): each worker pushes a layer's gradient as
  /// soon as backpropagation produces it, last layer first, as pieces of its
  /// push, and sends pulls as urgent messages that pass queued pushes
  /// (worker_options::layer_pushes). Formats with error feedback (topk)
  /// are refused with it: their k is chosen over a whole run.
  bool layer_pushes = false;
  /// Priority pulls: a step pulls each group's dense values in slices, one
  /// per forward stage of the model (mlp: one per layer), first layers
  /// first, and runs each layer of the forward pass as soon as its values
  /// are in (worker_options::priority_pulls). Any consistency mode.
  bool priority_pulls = false;
  /// Multi-process clusters: a worker moves its pulls and pushes over a
  /// data channel to each ps (cluster/net/data_link.hpp) instead of CAF's BASP;
  /// a ps serves both. Off: everything over BASP.
  bool data_channel = true;
  /// How data channels move their frames (cluster/net/data_link.hpp):
  /// "auto" through shared memory between processes of one host
  /// (cluster/net/shm_segment.hpp; the TCP connection only wakes the ends)
  /// and over TCP otherwise; "tcp" always over TCP; "shm" through shared
  /// memory or not at all (a worker whose ps declines stops at start, exit
  /// 2). Per process (a worker offers, a ps accepts unless "tcp"), so not
  /// part of the job's fingerprint.
  std::string transport = "auto";
  /// A data channel with no request for this long is closed by its server
  /// (its thread ends); a worker closes its own after half of it and opens
  /// it again at its next request (cluster/net/data_link.hpp). 0: never.
  /// Per process, so not part of the job's fingerprint.
  uint32_t data_idle_timeout_ms = 60000;
  /// How the process's threads are scheduled (core/cpu_policy.hpp): "batch"
  /// (SCHED_BATCH: a thread woken by a message does not preempt a computing
  /// one) or "normal" (as started). Applied by `actorps train` and `actorps
  /// node`; per process, so not part of the job's fingerprint.
  std::string cpu_policy = "batch";
  /// How `actorps launch` places its nodes on this machine's CPUs
  /// (core/cpu_affinity.hpp): "auto" (each ps and worker restricted to a
  /// share of them) or "none". Only the local launcher applies it; not part
  /// of the job's fingerprint.
  std::string cpu_affinity = "auto";
  /// TLS between nodes (not part of the job's fingerprint).
  tls_settings tls;
  /// A file holding the job's secret (cluster/net/job_secret.hpp): every
  /// peer of a node proves it holds the same one. "": DIR/secret of
  /// tls.dir if that exists, else none. Not part of the job's fingerprint.
  std::string secret_file;

  // -- update rules / partitioner ---------------------------------------------
  /// The rule the parameter servers apply to dense variables.
  optimizer_config optimizer;
  /// The rule they apply to the rows of embedding tables (row-wise, lazy:
  /// only the rows a push touches move).
  optimizer_config table_optimizer{"adagrad", 0.05f, {}};
  /// fixed_shards with num_shards == 0 means one shard per parameter server.
  partitioner_config partitioner;
  /// How tables with a fixed vocabulary split their keys over shards.
  table_partition table_partition_strategy = table_partition::mod;

  // -- training ---------------------------------------------------------------
  uint32_t epochs = 10;
  /// Steps per worker per epoch; 0 = train rows / (batch_size * workers), so
  /// that one epoch of closures covers the training set once.
  uint64_t steps_per_epoch = 0;
  /// Consistency model: "async" (default: every push applied at once),
  /// "sync" (BSP: each server averages one push per worker, then applies) or
  /// "ssp" (stale-synchronous: a worker's pull waits while it is more than
  /// `staleness` pushes ahead of the slowest worker on that server).
  std::string mode = "async";
  /// ssp: the bound s on how far a worker may run ahead (>= 0).
  uint64_t staleness = 2;
  /// sync: how long a round waits for the last workers' pushes before it is
  /// closed with those it has (0 = forever), in milliseconds.
  uint64_t sync_round_timeout_ms = 1000;
  /// The job fails, saying why, when a step's loss is not finite or the
  /// mean loss of a window of steps climbs above this many times its lowest
  /// and above where it started (cluster/services/divergence_guard.hpp; 0 = off).
  float divergence_factor = 10;
  /// Closures queued at most before schedule() blocks (TF: bounded queue).
  uint64_t max_queued = 4096;
  /// Where the coordinator writes checkpoints ("" = none), after every
  /// `checkpoint_every_steps` steps (0 = only at epoch ends) and at each
  /// epoch end, keeping the newest `keep_checkpoints`.
  std::string checkpoint_dir;
  uint64_t checkpoint_every_steps = 0;
  uint32_t keep_checkpoints = 3;
  /// After each full checkpoint, up to this many delta checkpoints (each
  /// holding the dense variables and only the table rows changed since the
  /// previous checkpoint, with tombstones) before the next full one; 0:
  /// every checkpoint is full. keep_checkpoints counts full checkpoints,
  /// each kept with its deltas.
  uint32_t delta_checkpoints = 4;
  /// After every `export_every`-th checkpoint written, the coordinator also
  /// exports it as a servable model into `export_dir`/STEP (actorps export,
  /// docs/guide/serving.md; "" = no exports). Needs checkpoint_dir.
  std::string export_dir;
  uint32_t export_every = 1;
  /// Early stopping (Keras' EarlyStopping, cluster/services/fit_callbacks.hpp): the
  /// epoch metric watched ("" = off; e.g. "test_loss", "test_accuracy",
  /// "test_auc"), the epochs in a row without an improvement of more than
  /// `early_stopping_min_delta` (in the metric's units) that end training.
  std::string early_stopping_monitor;
  uint32_t early_stopping_patience = 3;
  float early_stopping_min_delta = 0;
  /// How often the coordinator restarts a lost worker (in one process: a
  /// new actor after 100 ms, doubling each time), per worker index.
  uint32_t restart_budget = 3;
  /// Closures the dispatcher hands each worker at once (1 .. 8): the worker
  /// runs one and queues the others, so it starts the next as soon as one
  /// ends instead of a round trip to the coordinator later. 0 (default):
  /// 2 between processes (node, launch), 1 in one process and under
  /// simulate, where that round trip costs next to nothing.
  uint32_t closures_per_worker = 0;

  // -- faults -------------------------------------------------------------------
  /// Failures to inject (the "faults" array; --fault flags add more).
  std::vector<fault_spec> faults;

  /// Where this config came from (file name, or "<string>"), for messages.
  std::string source = "<defaults>";
};

/// Parses a job config from JSON text.
/// @throws input_error naming `source` and the field: malformed JSON, unknown
///         field, wrong type, negative or zero count, unknown enum value.
job_config parse_job_config(const std::string& text,
                            const std::string& source = "<string>");

/// Reads and parses a job config file.
/// @throws input_error if the file is missing or unreadable, or as
///         parse_job_config.
job_config load_job_config(const std::string& path);

/// Checks cross-field constraints after flags changed fields (positive counts,
/// layer sizes, ...). @throws input_error naming the field.
void validate(const job_config& cfg);

/// cluster.groups may be at most this many times cluster.ps.
inline constexpr uint32_t max_groups_per_ps = 64;

/// The replica groups of job `cfg`: cluster.groups, or cluster.ps for 0.
inline uint32_t groups_of(const job_config& cfg) {
  return cfg.groups == 0 ? cfg.ps : cfg.groups;
}

/// The job-wide admission and eviction policy of `cfg`'s table shards (the
/// table_* fields; 0 = none), without table_overrides (for those:
/// table_policies_of(), core/table_overrides.hpp).
/// @throws input_error for a table_filter or table_evict that is not one of
///         its words.
table_policy table_policy_of(const job_config& cfg);

/// Asynchronous jobs of at least this many workers take staleness-aware
/// steps by default (optimizer_config::staleness_aware). Measured on
/// Fashion-MNIST's job, 2 epochs, two rounds each (default / aware test
/// accuracy): 4 workers 0.857, 0.865 / 0.865, 0.853; 16 workers 0.821,
/// 0.768 / 0.784, 0.798; 32 workers diverged, 0.675 / 0.763, 0.756; 64
/// workers diverged twice / 0.672, 0.706.
inline constexpr uint32_t staleness_aware_workers = 32;

/// Applies the default of staleness_aware to each update rule whose
/// setting was not chosen: on for async jobs of staleness_aware_workers or
/// more (not for ftrl, which cannot take it), off otherwise. Idempotent;
/// call it once cfg.workers and cfg.mode are final (the CLI does; train()
/// does for a config it gets unresolved).
void resolve_staleness_aware(job_config& cfg);

/// Applies the default of prefetch ("auto"), unless it was chosen: on when
/// workers and servers are processes of their own (`between_processes`:
/// launch, node) for async jobs without overlap or layer pushes, off in one
/// process. Measured on Fashion-MNIST, 2 ps and 2 workers, three rounds
/// each: `launch` 1.5x the samples/s with prefetch (a pull no longer waits
/// a round trip at each closure's start) at the same test accuracy
/// (0.864-0.870 against 0.864-0.870); `train` the same samples/s either way,
/// with staleness 0.1-0.2 -> 1.0 and 0.005 lower accuracy, so off there.
/// Returns why, for the log ("" if chosen).
std::string resolve_prefetch(job_config& cfg, bool between_processes);

/// Steps per worker per epoch for `train_rows` training examples.
uint64_t effective_steps_per_epoch(const job_config& cfg, uint64_t train_rows);

} // namespace actorps
