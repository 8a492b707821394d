#include "core/job_options.hpp"

#include <limits>

#include "core/error.hpp"
#include "core/partitioner.hpp"
#include "core/placement.hpp"
#include "core/table_overrides.hpp"

namespace actorps {

namespace {

constexpr uint64_t any = std::numeric_limits<uint64_t>::max();
constexpr uint64_t mebi = uint64_t{1} << 20;

job_option row(const char* key, const char* flag, option_field f,
               const char* value_name, const char* help) {
  job_option o;
  o.key = key;
  o.flag = flag;
  o.field = f;
  o.value_name = value_name;
  o.help = help;
  return o;
}

/// A bool; its flag, if any, is a switch that sets true.
job_option boolean(const char* key, const char* flag, option_field f,
                   const char* help) {
  return row(key, flag, f, "", help);
}

/// A bool whose flag takes on or off.
job_option on_off(const char* key, const char* flag, option_field f,
                  const char* help) {
  return row(key, flag, f, "on|off", help);
}

job_option whole(const char* key, const char* flag, option_field f,
                 uint64_t lo, uint64_t hi, const char* help) {
  auto o = row(key, flag, f, "N", help);
  o.min = lo;
  o.max = hi;
  return o;
}

job_option real(const char* key, const char* flag, option_field f, double lo,
                double hi, const char* help) {
  auto o = row(key, flag, f, "X", help);
  o.min_real = lo;
  o.max_real = hi;
  return o;
}

job_option text(const char* key, const char* flag, option_field f,
                const char* value_name, const char* help) {
  return row(key, flag, f, value_name, help);
}

job_option word(const char* key, const char* flag, option_field f,
                std::vector<std::string> words, const char* help) {
  std::string value_name;
  for (auto& w : words)
    value_name += (value_name.empty() ? "" : "|") + w;
  auto o = row(key, flag, f, value_name.c_str(), help);
  o.words = std::move(words);
  return o;
}

/// A row parse_job_config reads by hand; `set` sets it from its flag.
job_option by_hand(const char* key, const char* flag, const char* value_name,
                   const char* shape, const char* default_text,
                   void (*set)(job_config&, const std::string&),
                   const char* help) {
  auto o = row(key, flag, std::monostate{}, value_name, help);
  o.shape = shape;
  o.default_text = default_text;
  o.set_flag = set;
  return o;
}

/// A text row whose flag also sets TLS on again (after an earlier --tls off).
template <std::string tls_settings::*File>
void set_tls_file(job_config& cfg, const std::string& value) {
  cfg.tls.*File = value;
  cfg.tls.off = false;
}

std::vector<job_option> make_table() {
  using job = job_config;
  using rule = optimizer_config;
  using part = partitioner_config;
  return {
    // -- model ----------------------------------------------------------------
    text("model.type", "", field<&job::model>, "NAME",
         "model name in the model registry: mlp, sparse_logistic_regression, "
         "embedding_mlp"),
    by_hand("model.layers", "", "", "array of integers (1 .. 1048576)",
            "[]", nullptr,
            "layer widths of the model's dense tower, input first, output "
            "last ([]: the model's default for the data; mlp: input -> 256 "
            "-> 128 -> classes)"),
    whole("model.seed", "--seed", field<&job::init_seed>, 0, any,
          "seed of the variables' initial values"),
    // -- data -----------------------------------------------------------------
    text("data.dataset", "", field<&job::dataset>, "NAME",
         "dataset name in the dataset registry: fashion_mnist, a9a, libsvm, "
         "movielens, synthetic_ctr"),
    text("data.dir", "--data-dir", field<&job::data_dir>, "DIR",
         "folder of the dataset's files"),
    whole("data.batch_size", "--batch-size", field<&job::batch_size>, 1, mebi,
          "examples per step and worker"),
    whole("data.shuffle_seed", "", field<&job::shuffle_seed>, 0, any,
          "seed of the per-worker shuffles"),
    word("data.sharding", "--sharding", field<&job::sharding>,
         {"static", "dynamic"},
         "static: each worker trains its own slice of the training split; "
         "dynamic: the coordinator hands out each epoch's batches to "
         "whichever worker is free, so workers can join, leave or be lost "
         "and every example is still trained once per epoch (each worker "
         "holds the whole split; docs/guide/elasticity.md)"),
    whole("data.train_limit", "--train-limit", field<&job::train_limit>, 0,
          any, "use only the first N training examples (0 = all)"),
    whole("data.test_limit", "--test-limit", field<&job::test_limit>, 0, any,
          "use only the first N test examples (0 = all)"),
    text("data.stream_dir", "--data-stream", field<&job::stream_dir>, "DIR",
         "train on a stream instead: the parts in DIR, in name order as each "
         "is complete (NAME.done), each once, with progressive evaluation "
         "(\"\" = none; docs/guide/streams.md)"),
    word("data.stream_format", "", field<&job::stream_format>,
         {"ctr_csv", "libsvm"}, "the parts' format"),
    whole("data.stream_dense_features", "",
          field<&job::stream_dense_features>, 0, 1024,
          "ctr_csv parts: dense features per example (columns I1..Id)"),
    whole("data.stream_fields", "", field<&job::stream_fields>, 1, 1024,
          "ctr_csv parts: sparse fields per example (columns C1..Cn)"),
    whole("data.stream_num_features", "", field<&job::stream_num_features>, 0,
          uint64_t{1} << 40, "libsvm parts: the number of features"),
    whole("data.stream_poll_ms", "", field<&job::stream_poll_ms>, 1, 60000,
          "how often the stream's folder is looked at while waiting (ms)"),
    whole("data.stream_end_after", "--stream-end-after",
          field<&job::stream_end_after>, 0, any,
          "the stream ends after N parts (0 = never)"),
    whole("data.stream_idle_timeout_ms", "--stream-idle-timeout-ms",
          field<&job::stream_idle_timeout_ms>, 0, any,
          "the stream ends after this long without a new part (ms; 0 = "
          "never)"),
    word("data.on_bad_record", "", field<&job::on_bad_record>,
         {"skip", "fail"},
         "a malformed record of a stream's part: skip (counted and logged) "
         "or fail (the job stops, exit 2)"),
    whole("data.progressive_window", "--progressive-window",
          field<&job::progressive_window>, 0, any,
          "a stream's progressive loss and AUC also over every window of N "
          "examples (rounded up to whole batches; 0 = per part only)"),
    // -- tables: admission and eviction -----------------------------------------
    whole("tables.admit_after", "--admit-after",
          field<&job::table_admit_after>, 0, 255,
          "a key gets a row at its Nth pull (0, 1: the first); before, "
          "pulls get its initial row and its gradients are dropped"),
    word("tables.filter", "", field<&job::table_filter>, {"sketch", "exact"},
         "how pulls of keys without a row are counted: a count-min sketch "
         "(fixed memory, may admit early) or exactly (small tables)"),
    whole("tables.filter_counters", "", field<&job::table_filter_counters>,
          4, uint64_t{1} << 34,
          "one-byte counters of each shard's sketch (4 rows of N/4)"),
    whole("tables.steps_to_live", "--steps-to-live",
          field<&job::table_steps_to_live>, 0, any,
          "a row not updated for N pushes of its server goes (0 = never)"),
    real("tables.l2_threshold", "", field<&job::table_l2_threshold>, 0, 1e30,
         "a row whose L2 norm is below X goes (0 = never)"),
    whole("tables.max_rows", "--table-max-rows", field<&job::table_max_rows>,
          0, any, "rows a table shard holds at most (0 = no limit)"),
    whole("tables.max_bytes", "--table-max-bytes",
          field<&job::table_max_bytes>, 0, any,
          "bytes a table shard's rows and filter take at most (0 = no "
          "limit)"),
    word("tables.evict", "--evict", field<&job::table_evict>, {"lru", "lfu"},
         "which row a full shard gives up: least recently or least "
         "frequently used (with decay)"),
    whole("tables.sweep_rows", "", field<&job::table_sweep_rows>, 1, mebi,
          "rows each push sweeps per shard for steps_to_live and "
          "l2_threshold"),
    by_hand("tables.per_table", "--table-policy", "TABLE.FIELD=V",
            "object {\"TABLE\": {\"FIELD\": value}}", "{}",
            &set_table_policy_flag,
            "tables with a policy of their own, by variable name: any of "
            "admit_after, filter, filter_counters, steps_to_live, "
            "l2_threshold, max_rows, max_bytes, evict, each over the "
            "job-wide value (the flag is repeatable)"),
    // -- cluster --------------------------------------------------------------
    whole("cluster.workers", "--workers", field<&job::workers>, 1, 1024,
          "number of workers (actorps simulate: up to 100000)"),
    whole("cluster.ps", "--ps", field<&job::ps>, 1, 1024,
          "number of parameter servers"),
    whole("cluster.groups", "--groups", field<&job::groups>, 0, 65536,
          "replica groups the variables are placed over (0 = one per ps; "
          "more than cluster.ps, at most 64 per ps: group g starts on ps "
          "g % ps, and a ps that joins takes groups from the busiest)"),
    whole("cluster.max_ps", "--max-ps", field<&job::max_ps>, 0, 1024,
          "parameter servers launch starts for actorps scale --ps, idle "
          "past cluster.ps until scaled to (0 = cluster.ps)"),
    whole("cluster.threads", "--threads", field<&job::threads>, 0, 1024,
          "CAF scheduler threads (0 = one per core in train, one per process "
          "for the nodes of a cluster)"),
    whole("cluster.restart_budget", "", field<&job::restart_budget>, 0, 1000,
          "restarts of a lost worker, per worker index (in one process: a "
          "new actor after 100 ms, doubling each time)"),
    whole("cluster.closures_per_worker", "--closures-per-worker",
          field<&job::closures_per_worker>, 0, 8,
          "closures a worker holds at once, one running (0 = 2 between "
          "processes, 1 in one process and under simulate)"),
    whole("cluster.connect_timeout_ms", "", field<&job::connect_timeout_ms>, 1,
          3600000,
          "how long nodes that are not up yet are retried and a node waits "
          "for the coordinator, in ms"),
    whole("cluster.heartbeat_interval_ms", "",
          field<&job::heartbeat_interval_ms>, 0, 600000,
          "CAF heartbeats between nodes, in ms (0 = none)"),
    whole("cluster.heartbeat_timeout_ms", "",
          field<&job::heartbeat_timeout_ms>, 1, 3600000,
          "silence after which a peer counts as lost, in ms (suspected after "
          "half of it); above heartbeat_interval_ms"),
    boolean("cluster.reset_lost_ps", "", field<&job::reset_lost_ps>,
            "a lost ps that cannot be restored starts again from the initial "
            "values (false: the job fails, naming it)"),
    whole("cluster.replicas", "--replicas", field<&job::replicas>, 0, 1,
          "backups of every ps's shards on the next ps (chain replication; "
          "needs cluster.ps >= 2)"),
    word("cluster.replication", "--replication", field<&job::replication>,
         {"chain", "async"},
         "chain: a push is acknowledged once both copies applied it; async: "
         "at once, the backup up to replication_lag updates behind"),
    whole("cluster.replication_lag", "--replication-lag",
          field<&job::replication_lag>, 1, 1000000,
          "async replication: updates a backup may lack; a push beyond them "
          "waits"),
    text("cluster.push_format", "--push-format", field<&job::push_format>, "F",
         "the dense gradient in pushes: fp32, bf16, fp16, int8 or topk:K, "
         "topk:RATIO (with error feedback), or auto (each worker times fp32 "
         "and bf16 pulls at its start and takes the faster)"),
    by_hand("cluster.variable_formats", "--variable-format", "V=F",
            "object {\"VARIABLE\": \"FORMAT\"}", "{}",
            [](job_config& cfg, const std::string& value) {
              auto eq = value.find('=');
              if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
                throw input_error("--variable-format " + value
                                  + ": expected VARIABLE=FORMAT, e.g. "
                                    "dense_0/kernel=topk:0.01");
              cfg.variable_formats[value.substr(0, eq)] = value.substr(eq + 1);
            },
            "the push format of one variable instead of push_format (the "
            "flag is repeatable)"),
    text("cluster.pull_format", "--pull-format", field<&job::pull_format>, "F",
         "the dense values in pull replies: fp32, bf16, fp16, int8 or auto"),
    boolean("cluster.overlap", "--overlap", field<&job::overlap>,
            "async: each push is followed at once by the next step's pull of "
            "dense values"),
    by_hand("cluster.prefetch", "--prefetch", "", "true, false or \"auto\"",
            "\"auto\"",
            [](job_config& cfg, const std::string&) {
              cfg.prefetch = true;
              cfg.prefetch_chosen = true;
            },
            "async, not with overlap: the next step's pull of dense values "
            "goes right behind each push; auto: on between processes "
            "(launch, node), off in one (--prefetch, --no-prefetch)"),
    boolean("cluster.layer_pushes", "--layer-pushes",
            field<&job::layer_pushes>,
            "async: each layer's gradient is pushed as backpropagation "
            "produces it; pulls go ahead of queued pushes"),
    boolean("cluster.priority_pulls", "--priority-pulls",
            field<&job::priority_pulls>,
            "each layer's values are pulled as a slice, first layers first, "
            "and the forward pass runs each layer as its slice arrives"),
    on_off("cluster.data_channel", "--data-channel", field<&job::data_channel>,
           "between processes, pulls and pushes go over a data channel "
           "beside CAF's BASP"),
    word("cluster.transport", "--transport", field<&job::transport>,
         {"auto", "tcp", "shm"},
         "how data channels move their frames: auto (through shared memory "
         "between processes of one host, else TCP), tcp, or shm (shared "
         "memory or the worker stops at start)"),
    whole("cluster.data_idle_timeout_ms", "",
          field<&job::data_idle_timeout_ms>, 0, 86400000,
          "a data channel with no request for this long is closed by its "
          "server; a worker closes its own after half of it (0: never)"),
    word("cluster.cpu_policy", "--cpu-policy", field<&job::cpu_policy>,
         {"batch", "normal"},
         "batch: this process's threads run as SCHED_BATCH (a thread woken "
         "by a message does not preempt a computing one); normal: as started"),
    word("cluster.cpu_affinity", "--cpu-affinity", field<&job::cpu_affinity>,
         {"auto", "none"},
         "launch: auto restricts each ps and worker to a share of this "
         "machine's CPUs; none lets the kernel place them"),
    by_hand("cluster.tls", "--tls", "DIR|off",
            "\"off\" or an object of dir, ca, cert, key", "",
            [](job_config& cfg, const std::string& value) {
              cfg.tls = tls_settings{};
              if (value == "off")
                cfg.tls.off = true;
              else
                cfg.tls.dir = value;
            },
            "mutual TLS between the processes of a cluster with the "
            "certificates of a folder made by actorps certs, or off (none: "
            "node refuses to start, launch makes throw-away ones)"),
    text("cluster.tls.dir", "", field<&job::tls, &tls_settings::dir>, "DIR",
         "a folder made by actorps certs: ca.pem and each node's .pem and "
         ".key (--tls DIR)"),
    [] {
      auto o = text("cluster.tls.ca", "--tls-ca",
                    field<&job::tls, &tls_settings::ca>, "FILE",
                    "the cluster CA's certificate, instead of dir's");
      o.set_flag = &set_tls_file<&tls_settings::ca>;
      return o;
    }(),
    [] {
      auto o = text("cluster.tls.cert", "--tls-cert",
                    field<&job::tls, &tls_settings::cert>, "FILE",
                    "this node's certificate, instead of dir's");
      o.set_flag = &set_tls_file<&tls_settings::cert>;
      return o;
    }(),
    [] {
      auto o = text("cluster.tls.key", "--tls-key",
                    field<&job::tls, &tls_settings::key>, "FILE",
                    "this node's private key, instead of dir's");
      o.set_flag = &set_tls_file<&tls_settings::key>;
      return o;
    }(),
    text("cluster.secret_file", "--secret-file", field<&job::secret_file>,
         "FILE",
         "the job's secret (32 bytes or more, mode 0600): every peer of a "
         "node proves it holds the same one (\"\": DIR/secret of --tls DIR "
         "if there; launch --tls off makes one)"),
    // -- optimizer, table_optimizer -------------------------------------------
    text("optimizer.type", "--optimizer", field<&job::optimizer, &rule::type>,
         "NAME",
         "the update rule of dense variables: sgd, momentum, adagrad, adam, "
         "ftrl or a registered one; its settings are fields beside it"),
    real("optimizer.learning_rate", "--learning-rate",
         field<&job::optimizer, &rule::learning_rate>, 1e-12, 1e6,
         "the dense rule's learning rate"),
    by_hand("optimizer.staleness_aware", "--staleness-aware", "",
            "true, false or \"auto\"", "\"auto\"",
            [](job_config& cfg, const std::string&) {
              for (auto* r : {&cfg.optimizer, &cfg.table_optimizer}) {
                r->staleness_aware = true;
                r->staleness_aware_chosen = true;
              }
            },
            "divide each step by its push's staleness (Zhang et al. 2016); "
            "auto: on for async jobs of 32 workers or more, not for ftrl "
            "(--staleness-aware, --no-staleness-aware: both rules)"),
    text("table_optimizer.type", "--table-optimizer",
         field<&job::table_optimizer, &rule::type>, "NAME",
         "the update rule of embedding-table rows, row-wise and lazy; its "
         "settings are fields beside it"),
    real("table_optimizer.learning_rate", "--table-learning-rate",
         field<&job::table_optimizer, &rule::learning_rate>, 1e-12, 1e6,
         "the table rule's learning rate"),
    by_hand("table_optimizer.staleness_aware", "", "",
            "true, false or \"auto\"", "\"auto\"", nullptr,
            "as optimizer.staleness_aware, for the rows of embedding tables"),
    // -- partitioner ----------------------------------------------------------
    word("partitioner.type", "",
         word_access{[](const job_config& cfg) -> std::string {
                       switch (cfg.partitioner.type) {
                         case part::kind::min_size:
                           return "min_size";
                         case part::kind::max_size:
                           return "max_size";
                         default:
                           return "fixed_shards";
                       }
                     },
                     [](job_config& cfg, const std::string& value) {
                       cfg.partitioner.type = parse_partitioner_kind(value);
                     }},
         {"fixed_shards", "min_size", "max_size"},
         "how a variable is split along its first axis, with TensorFlow's "
         "arithmetic"),
    [] {
      auto o = whole("partitioner.num_shards", "",
                     field<&job::partitioner, &part::num_shards>, 0, mebi,
                     "fixed_shards: shards per variable (0 = one per ps)");
      o.default_text = "0"; // parse_job_config's; see default_text
      return o;
    }(),
    whole("partitioner.min_shard_bytes", "",
          field<&job::partitioner, &part::min_shard_bytes>, 1, any,
          "min_size: the smallest shard in bytes"),
    whole("partitioner.max_shard_bytes", "",
          field<&job::partitioner, &part::max_shard_bytes>, 0, any,
          "max_size: the largest shard in bytes (required)"),
    whole("partitioner.max_shards", "",
          field<&job::partitioner, &part::max_shards>, 0, mebi,
          "at most this many shards (0 = TensorFlow's default: 1 for "
          "min_size, no cap for max_size)"),
    word("partitioner.table_partition", "",
         word_access{[](const job_config& cfg) -> std::string {
                       return to_string(cfg.table_partition_strategy);
                     },
                     [](job_config& cfg, const std::string& value) {
                       cfg.table_partition_strategy = parse_table_partition(
                         value, "partitioner.table_partition");
                     }},
         {"mod", "div"},
         "how tables with a fixed vocabulary split their keys over shards: "
         "key % shards, or contiguous ranges"),
    // -- training -------------------------------------------------------------
    whole("training.epochs", "--epochs", field<&job::epochs>, 1, mebi,
          "training epochs"),
    whole("training.steps_per_epoch", "--steps-per-epoch",
          field<&job::steps_per_epoch>, 0, any,
          "steps per worker per epoch (0 = one pass over the training set)"),
    word("training.mode", "--mode", field<&job::mode>, {"async", "sync", "ssp"},
         "consistency: every push applied at once, bulk-synchronous rounds, "
         "or stale-synchronous (a worker at most staleness pushes ahead)"),
    whole("training.staleness", "--staleness", field<&job::staleness>, 0, mebi,
          "ssp: how far a worker may run ahead of the slowest"),
    whole("training.sync_round_timeout_ms", "",
          field<&job::sync_round_timeout_ms>, 0, 3600000,
          "sync: a round closes with the pushes it has after this long; ssp: "
          "a held pull is answered after it, in ms (0 = forever)"),
    real("training.divergence_factor", "--divergence-factor",
         field<&job::divergence_factor>, 0, 1e6,
         "the job fails when a step's loss is not finite or the windowed "
         "loss climbs this many times above its lowest (0 = off, else > 1)"),
    whole("training.max_queued", "", field<&job::max_queued>, 1, any,
          "closures queued at most before schedule() blocks"),
    text("training.checkpoint_dir", "--checkpoint-dir",
         field<&job::checkpoint_dir>, "DIR",
         "where checkpoints are written, at each epoch end (\"\" = none)"),
    whole("training.checkpoint_every_steps", "--checkpoint-every",
          field<&job::checkpoint_every_steps>, 0, any,
          "also a checkpoint every N steps (0 = only at epoch ends)"),
    whole("training.keep_checkpoints", "", field<&job::keep_checkpoints>, 1,
          1000, "the newest full checkpoints kept, each with its deltas"),
    whole("training.delta_checkpoints", "--delta-checkpoints",
          field<&job::delta_checkpoints>, 0, 1000,
          "delta checkpoints (table rows changed since the previous "
          "checkpoint) after each full one (0 = every checkpoint full)"),
    text("training.export_dir", "--export-dir", field<&job::export_dir>,
         "DIR",
         "after checkpoints, also export a servable model (ONNX, table "
         "files, manifest) into DIR/STEP, as actorps export does (\"\" = "
         "none; needs checkpoint_dir)"),
    whole("training.export_every", "--export-every",
          field<&job::export_every>, 1, mebi,
          "with export_dir: export every Nth checkpoint written"),
    text("training.early_stopping_monitor", "--early-stopping",
         field<&job::early_stopping_monitor>, "M",
         "stop when this epoch metric (test_loss, test_accuracy, test_auc) "
         "has not improved for early_stopping_patience epochs (\"\" = off)"),
    whole("training.early_stopping_patience", "--patience",
          field<&job::early_stopping_patience>, 0, mebi,
          "early stopping: epochs without an improvement before training "
          "stops"),
    real("training.early_stopping_min_delta", "",
         field<&job::early_stopping_min_delta>, 0, 1e30,
         "early stopping: the least change that counts as an improvement, "
         "in the metric's units"),
    // -- faults ---------------------------------------------------------------
    by_hand("faults", "--fault", "SPEC",
            "array of {action, role, index, step, seconds, share, to}", "[]",
            [](job_config& cfg, const std::string& value) {
              cfg.faults.push_back(parse_fault(value));
            },
            "failures to inject: kill:worker:1@40, stop:ps:0@100:2.5, "
            "drop:ps:10%@50, delay:ps:20%@50:0.05, error:worker:1@40; and "
            "planned changes of the parameter servers: move:ps:0>2@300 "
            "(ps 0's replicas move to ps 2), join:ps@200 (a new ps joins), "
            "leave:ps:0@400 (ps 0 is drained and stops) (the flag is "
            "repeatable and adds to the config's)"),
  };
}

} // namespace

std::string job_option::section() const {
  auto dot = key.rfind('.');
  return dot == std::string::npos ? "" : key.substr(0, dot);
}

std::string job_option::name() const {
  auto dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

const std::vector<job_option>& job_options() {
  static const std::vector<job_option> table = make_table();
  return table;
}

const job_option* find_job_flag(const std::string& flag) {
  for (auto& o : job_options())
    if (!o.flag.empty() && o.flag == flag)
      return &o;
  return nullptr;
}

const job_option* find_job_key(const std::string& key) {
  for (auto& o : job_options())
    if (o.key == key)
      return &o;
  return nullptr;
}

} // namespace actorps
