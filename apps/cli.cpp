#include "apps/cli.hpp"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <algorithm>

#include <fmt/format.h>

#include "cluster/spec/cluster_resolver.hpp"
#include "core/cpu_affinity.hpp"
#include "core/cpu_policy.hpp"
#include "core/error.hpp"

namespace actorps {

uint64_t to_count(const std::string& flag, const std::string& value,
                  uint64_t lo, uint64_t hi) {
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
    throw input_error(fmt::format("{}: expected a whole number >= {}, got \"{}\"",
                                  flag, lo, value));
  errno = 0;
  auto x = std::strtoull(value.c_str(), nullptr, 10);
  if (errno != 0 || x < lo || x > hi)
    throw input_error(fmt::format("{}: {} is out of range [{}, {}]", flag,
                                  value, lo, hi));
  return x;
}

namespace {

float to_real(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  auto x = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !(x > 0))
    throw input_error(fmt::format("{}: expected a positive number, got \"{}\"",
                                  flag, value));
  return static_cast<float>(x);
}

} // namespace

namespace {

constexpr const char* job_flags = R"(  --config FILE          job config (JSON); default: built-in defaults
  --workers N            number of workers (cluster.workers)
  --ps N                 number of parameter servers (cluster.ps)
  --epochs N             training epochs (training.epochs)
  --steps-per-epoch N    steps per worker per epoch (0 = one pass over the data)
  --batch-size N         examples per step (data.batch_size)
  --optimizer NAME       update rule of dense variables: sgd | momentum |
                         adagrad | adam | ftrl (optimizer.type)
  --learning-rate X      optimizer.learning_rate
  --table-optimizer NAME update rule of embedding-table rows, row-wise and lazy
                         (table_optimizer.type)
  --table-learning-rate X  table_optimizer.learning_rate
  --mode M               async | sync (BSP) | ssp (training.mode)
  --staleness N          ssp: how far a worker may run ahead (training.staleness)
  --staleness-aware      divide each step by its push's staleness (Zhang et al.
                         2016; optimizer and table_optimizer.staleness_aware);
                         the default ("auto") is on for async jobs of 32
                         workers or more (not for ftrl), where plain steps
                         diverged or lost 8 points on Fashion-MNIST
  --no-staleness-aware   plain steps whatever the number of workers
  --divergence-factor X  fail when the windowed loss climbs X times above its
                         lowest (10; 0 = off; training.divergence_factor)
  --early-stopping M     stop when epoch metric M (test_loss, test_accuracy,
                         ...) has not improved for --patience N epochs
                         (training.early_stopping_monitor; default off)
  --patience N           with --early-stopping: epochs without an improvement
                         before training stops (3;
                         training.early_stopping_patience)
  --threads N            CAF scheduler threads (0 = one per core)
  --closures-per-worker N  1 .. 8: closures a worker holds at once, one
                         running (cluster.closures_per_worker; default 2
                         between processes, 1 in one)
  --replicas N           0 | 1: keep a backup of every ps's shards on the next
                         ps (chain replication; cluster.replicas)
  --replication M        chain | async: acknowledge a push once both copies
                         applied it, or at the primary with the backup at most
                         --replication-lag N updates behind (cluster.replication)
  --replication-lag N    async: updates a backup may lack (1 .. 1000000, 16;
                         cluster.replication_lag)
  --push-format F        the dense gradient in pushes: fp32 | bf16 | fp16 |
                         int8 (with error feedback) | topk:K | topk:RATIO
                         (top-k with error feedback) |
                         auto (each worker times fp32 and bf16 pulls at its
                         start and uses the faster; cluster.push_format)
  --variable-format V=F  push variable V's gradient in format F instead
                         (repeatable; cluster.variable_formats)
  --pull-format F        the dense values in pull replies: fp32 | bf16 | fp16
                         | int8 | auto (cluster.pull_format)
  --overlap              async: send the next step's pull of dense values with
                         each push (cluster.overlap)
  --prefetch             async: send the next step's pull of dense values
                         right behind each push (cluster.prefetch)
  --layer-pushes         async: push each layer's gradient as backpropagation
                         produces it; pulls go ahead of queued pushes
                         (cluster.layer_pushes)
  --priority-pulls       pull each layer's values as a slice, first layers
                         first, and run the forward pass's layers as they
                         arrive (cluster.priority_pulls)
  --data-channel on|off  between processes, pulls and pushes over a data
                         channel beside CAF's BASP (default on;
                         cluster.data_channel)
  --shared-memory on|off data channels between processes of one host move
                         their frames through shared memory (default on;
                         cluster.shared_memory)
  --cpu-policy P         batch | normal: schedule this process's threads as
                         SCHED_BATCH (a thread woken by a message does not
                         preempt a computing one) or leave them as started
                         (default batch; cluster.cpu_policy)
  --cpu-affinity A       launch: auto | none: restrict each ps and worker to a
                         share of this machine's CPUs, a ps and the worker of
                         its index side by side, or let the kernel move them
                         (default auto; cluster.cpu_affinity)
  --data-dir DIR         folder of the dataset's files (data.dir)
  --train-limit N        use the first N training examples (0 = all)
  --test-limit N         use the first N test examples (0 = all)
  --seed N               seed of the initial values (model.seed)
  --metrics-out FILE     write per-epoch and final metrics as JSON lines
  --checkpoint-dir DIR   write checkpoints there (training.checkpoint_dir)
  --checkpoint-every N   ... also every N steps, not only at epoch ends
  --restore DIR          continue from the checkpoint in DIR
  --resume               continue from the newest checkpoint in --checkpoint-dir
  --restore-variables-only  with --restore: start a new run from the
                         checkpoint's variables only (dense values, table
                         rows): epoch 1, step 0, fresh data positions, and the
                         optimizer's slots and step counts reset (fine-tuning);
                         data, optimizer, mode and workers may differ
  --fault SPEC           inject a failure: kill:worker:1@40 (kill worker 1 when
                         40 steps are done), stop:ps:0@100:2.5 (stop ps 0 for
                         2.5 s), drop:ps:10%@50 (drop 10% of the messages to
                         the servers), delay:ps:20%@50:0.05 (delay 20% by
                         50 ms), error:worker:1@40 (worker 1's next step
                         throws, as a model would); repeatable (faults in
                         the config)
  --no-progress          no progress bar, even on a terminal
  --metrics-port N       serve Prometheus metrics on http://ADDRESS:N/metrics
                         (0 = a free port, logged); a node of a cluster uses
                         N + its position: chief N, ps i N+1+i, worker i
                         N+1+ps+i, evaluator N+1+ps+workers
  --metrics-address A    the address it binds: default 127.0.0.1 in one
                         process, a node's own address from the cluster spec
                         in a cluster; 0.0.0.0 = every interface (plain HTTP;
                         without --metrics-auth anyone who reaches it reads
                         the metrics)
  --metrics-auth FILE    scrapes must authenticate with the USER:PASSWORD on
                         FILE's first line (HTTP basic authentication;
                         Prometheus' basic_auth)
  --plot FILE.png        at the end, plot loss and accuracy (or AUC) per epoch
                         with gnuplot (Debian's gnuplot-nox)
  --tls DIR|off          multi-process clusters: mutual TLS with the
                         certificates in DIR (made by actorps certs: ca.pem,
                         <node>.pem, <node>.key), or off: plain TCP, nobody
                         authenticated (cluster.tls). actorps node needs one
                         of them; actorps launch makes throw-away
                         certificates when neither is given
  --tls-ca FILE          the cluster CA's certificate (cluster.tls.ca)
  --tls-cert FILE        this node's certificate (cluster.tls.cert)
  --tls-key FILE         this node's private key (cluster.tls.key)
  --quiet                no diagnostics on stderr
  -h, --help             this text
)";

} // namespace

std::string train_usage() {
  return std::string{R"(usage: actorps train [--config FILE] [flags]

Trains the job of FILE with every role (coordinator, parameter servers,
workers) as CAF actors in this process. Flags override the config:

)"} + job_flags;
}

std::string node_usage() {
  return std::string{R"(usage: actorps node --role ROLE --index I [--cluster FILE] [job flags]

Runs one node of a multi-process cluster. The cluster spec is TF_CONFIG-shaped
JSON: {"cluster": {"chief": ["host:port"], "worker": [...], "ps": [...]},
"task": {"type": "worker", "index": 0}}, read from --cluster FILE or, without
it, from the TF_CONFIG environment variable. Every node takes the same job
flags; the spec decides the numbers of workers and ps.

  --role ROLE            coordinator (or chief) | worker | ps | evaluator
                         (sidecar: evaluates each new checkpoint in
                         --checkpoint-dir, writes --metrics-out)
  --index I              position in the role's address list (default 0)
  --cluster FILE         cluster spec file (default: $TF_CONFIG)
  --cluster-resolver R   where the spec comes from instead: tf_config
                         ($TF_CONFIG, as Kubeflow's TFJob sets it) or slurm
                         (the srun step this task is in: task 0 the
                         coordinator, the next --ps tasks ps, the rest
                         workers; see docs/guide/slurm.md)
  --port-base P          slurm: port of a host's first task, the next tasks
                         there get the next ports (default 8888)
  --cpu-set LIST         run this node's threads on these CPUs only, e.g.
                         0-3,8 (sched_setaffinity; `launch` passes each ps
                         and worker its share under --cpu-affinity auto)
)"} + job_flags;
}

std::string launch_usage() {
  return std::string{R"(usage: actorps launch [--config FILE] [job flags]

Starts every node of a cluster (the coordinator, --ps parameter servers,
--workers workers) as its own process, `actorps node --role R --index I`,
prefixes their output with [coordinator], [ps0], [worker1], ..., starts a
node that dies again (cluster.restart_budget), and exits with the
coordinator's status.

  --launcher L           local (default): child processes on free ports of
                         --host; slurm: each node a job step (srun) of the
                         Slurm allocation this runs in (see docs/guide/slurm.md)
  --host HOST            local: address the nodes listen on (127.0.0.1)
  --port-base P          slurm: port of a host's first node (default 8888)
)"} + job_flags;
}

train_command parse_job_args(
  const std::vector<std::string>& args, const std::string& command,
  const std::map<std::string, bool>& extra,
  std::vector<std::pair<std::string, std::string>>& extras) {
  train_command cmd;
  // Pass 1: split "--flag=value", find --config.
  std::vector<std::pair<std::string, std::string>> flags;
  static const std::map<std::string, bool> known = {
    {"--config", true},          {"--workers", true},
    {"--ps", true},              {"--epochs", true},
    {"--steps-per-epoch", true}, {"--batch-size", true},
    {"--optimizer", true},       {"--learning-rate", true},
    {"--table-optimizer", true}, {"--table-learning-rate", true},
    {"--replicas", true},        {"--closures-per-worker", true},
    {"--replication", true},     {"--replication-lag", true},
    {"--push-format", true},     {"--pull-format", true},
    {"--overlap", false},        {"--prefetch", false},
    {"--layer-pushes", false},   {"--priority-pulls", false},
    {"--data-channel", true},    {"--cpu-policy", true},
    {"--shared-memory", true},
    {"--cpu-affinity", true},
    {"--variable-format", true},
    {"--threads", true},         {"--data-dir", true},
    {"--train-limit", true},     {"--test-limit", true},
    {"--seed", true},            {"--metrics-out", true},
    {"--mode", true},            {"--staleness", true},
    {"--staleness-aware", false}, {"--divergence-factor", true},
    {"--no-staleness-aware", false},
    {"--early-stopping", true},  {"--patience", true},
    {"--no-progress", false},    {"--quiet", false},
    {"--checkpoint-dir", true},  {"--checkpoint-every", true},
    {"--restore", true},         {"--resume", false},
    {"--restore-variables-only", false},
    {"--fault", true},
    {"--tls", true},             {"--tls-ca", true},
    {"--tls-cert", true},        {"--tls-key", true},
    // -- watching a job --
    {"--metrics-port", true},    {"--plot", true},
    {"--metrics-address", true}, {"--metrics-auth", true},
    {"--help", false},           {"-h", false},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    auto arg = args[i];
    std::string value;
    bool inline_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    auto k = known.find(arg);
    if (k == known.end()) {
      k = extra.find(arg);
      if (k == extra.end())
        throw input_error(fmt::format("unknown argument \"{}\" (see actorps "
                                      "{} --help)",
                                      args[i], command));
    }
    if (k->second && !inline_value) {
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
        throw input_error(fmt::format("{}: missing value", arg));
      value = args[++i];
    } else if (!k->second && inline_value) {
      throw input_error(fmt::format("{}: takes no value", arg));
    }
    if (extra.count(arg) > 0)
      extras.emplace_back(arg, value);
    else
      flags.emplace_back(arg, value);
  }
  for (auto& [flag, value] : flags) {
    if (flag == "--workers" || flag == "--ps")
      cmd.explicit_flags.push_back(flag);
    if (flag == "--help" || flag == "-h") {
      cmd.help = true;
      return cmd;
    }
  }
  for (auto& [flag, value] : flags)
    if (flag == "--config")
      cmd.job = load_job_config(value);
  auto& job = cmd.job;
  // Real jobs: at most 1024 workers; a simulation runs more (the
  // simulator was shown at 10,000 with --timing-only).
  uint64_t max_workers = command == "simulate" ? 100000 : 1024;
  for (auto& [flag, value] : flags) {
    if (flag == "--workers")
      job.workers = static_cast<uint32_t>(to_count(flag, value, 1,
                                                   max_workers));
    else if (flag == "--ps")
      job.ps = static_cast<uint32_t>(to_count(flag, value, 1, 1024));
    else if (flag == "--epochs")
      job.epochs = static_cast<uint32_t>(to_count(flag, value, 1, 1u << 20));
    else if (flag == "--steps-per-epoch")
      job.steps_per_epoch = to_count(flag, value, 0, uint64_t{1} << 40);
    else if (flag == "--batch-size")
      job.batch_size = to_count(flag, value, 1, 1u << 20);
    else if (flag == "--optimizer")
      job.optimizer.type = value;
    else if (flag == "--learning-rate")
      job.optimizer.learning_rate = to_real(flag, value);
    else if (flag == "--staleness-aware" || flag == "--no-staleness-aware")
      for (auto* rule : {&job.optimizer, &job.table_optimizer}) {
        rule->staleness_aware = flag == "--staleness-aware";
        rule->staleness_aware_chosen = true;
      }
    else if (flag == "--early-stopping")
      job.early_stopping_monitor = value;
    else if (flag == "--patience")
      job.early_stopping_patience =
        static_cast<uint32_t>(to_count(flag, value, 0, 1u << 20));
    else if (flag == "--divergence-factor")
      job.divergence_factor = value == "0" ? 0.0f : to_real(flag, value);
    else if (flag == "--closures-per-worker")
      job.closures_per_worker =
        static_cast<uint32_t>(to_count(flag, value, 1, 8));
    else if (flag == "--replicas")
      job.replicas = static_cast<uint32_t>(to_count(flag, value, 0, 1));
    else if (flag == "--replication")
      job.replication = value;
    else if (flag == "--replication-lag")
      job.replication_lag =
        static_cast<uint32_t>(to_count(flag, value, 1, 1000000));
    else if (flag == "--push-format")
      job.push_format = value;
    else if (flag == "--pull-format")
      job.pull_format = value;
    else if (flag == "--overlap")
      job.overlap = true;
    else if (flag == "--prefetch")
      job.prefetch = true;
    else if (flag == "--layer-pushes")
      job.layer_pushes = true;
    else if (flag == "--priority-pulls")
      job.priority_pulls = true;
    else if (flag == "--cpu-policy") {
      parse_cpu_policy(value, flag); // an error names the flag
      job.cpu_policy = value;
    }
    else if (flag == "--cpu-affinity") {
      parse_cpu_affinity(value, flag); // an error names the flag
      job.cpu_affinity = value;
    }
    else if (flag == "--shared-memory") {
      if (value != "on" && value != "off")
        throw input_error(fmt::format("--shared-memory: expected on or off, "
                                      "got \"{}\"",
                                      value));
      job.shared_memory = value == "on";
    }
    else if (flag == "--data-channel") {
      if (value != "on" && value != "off")
        throw input_error(fmt::format("--data-channel: expected on or off, "
                                      "got \"{}\"",
                                      value));
      job.data_channel = value == "on";
    }
    else if (flag == "--variable-format") {
      auto eq = value.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
        throw input_error(fmt::format(
          "--variable-format {}: expected VARIABLE=FORMAT, e.g. "
          "dense_0/kernel=topk:0.01",
          value));
      job.variable_formats[value.substr(0, eq)] = value.substr(eq + 1);
    }
    else if (flag == "--table-optimizer")
      job.table_optimizer.type = value;
    else if (flag == "--table-learning-rate")
      job.table_optimizer.learning_rate = to_real(flag, value);
    else if (flag == "--threads")
      job.threads = static_cast<uint32_t>(to_count(flag, value, 0, 1024));
    else if (flag == "--data-dir")
      job.data_dir = value;
    else if (flag == "--train-limit")
      job.train_limit = to_count(flag, value, 0, uint64_t{1} << 40);
    else if (flag == "--test-limit")
      job.test_limit = to_count(flag, value, 0, uint64_t{1} << 40);
    else if (flag == "--seed")
      job.init_seed = to_count(flag, value, 0, ~uint64_t{0});
    else if (flag == "--mode")
      job.mode = value;
    else if (flag == "--staleness")
      job.staleness = to_count(flag, value, 0, 1u << 20);
    else if (flag == "--metrics-out")
      cmd.options.metrics_out = value;
    else if (flag == "--checkpoint-dir")
      job.checkpoint_dir = value;
    else if (flag == "--checkpoint-every")
      job.checkpoint_every_steps = to_count(flag, value, 0, uint64_t{1} << 40);
    else if (flag == "--restore")
      cmd.options.restore_dir = value;
    else if (flag == "--resume")
      cmd.options.resume = true;
    else if (flag == "--restore-variables-only")
      cmd.options.restore_variables_only = true;
    else if (flag == "--fault")
      job.faults.push_back(parse_fault(value));
    else if (flag == "--tls") {
      job.tls = tls_settings{};
      if (value == "off")
        job.tls.off = true;
      else
        job.tls.dir = value;
    } else if (flag == "--tls-ca")
      job.tls.ca = value, job.tls.off = false;
    else if (flag == "--tls-cert")
      job.tls.cert = value, job.tls.off = false;
    else if (flag == "--tls-key")
      job.tls.key = value, job.tls.off = false;
    // -- watching a job --
    else if (flag == "--metrics-port")
      cmd.options.metrics_port = static_cast<int>(
        to_count(flag, value, 0, 65535));
    else if (flag == "--metrics-address")
      cmd.options.metrics_address = value;
    else if (flag == "--metrics-auth")
      cmd.options.metrics_auth = value;
    else if (flag == "--plot")
      cmd.options.plot = value;
    // -- end of watching a job --
    else if (flag == "--no-progress")
      cmd.no_progress = true;
    else if (flag == "--quiet")
      cmd.quiet = true;
  }
  resolve_staleness_aware(job);
  validate(job);
  if (cmd.options.resume && job.checkpoint_dir.empty())
    throw input_error("--resume: needs --checkpoint-dir (or "
                      "training.checkpoint_dir in the config)");
  if (cmd.options.resume && !cmd.options.restore_dir.empty())
    throw input_error("--resume and --restore: give one of them");
  // A variables-only run counts from step 0; written among the checkpoints
  // it came from, its own would be pruned first and a later --resume would
  // take the old run's.
  if (cmd.options.restore_variables_only && cmd.options.resume)
    throw input_error("--restore-variables-only: starts a new run, whose "
                      "checkpoints would be mixed with the old run's in "
                      "--checkpoint-dir; instead of --resume, give the "
                      "checkpoint with --restore DIR and the new run an empty "
                      "--checkpoint-dir");
  if (cmd.options.restore_variables_only && cmd.options.restore_dir.empty())
    throw input_error("--restore-variables-only: needs the checkpoint: "
                      "--restore DIR");
  return cmd;
}

train_command parse_train_args(const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> extras;
  return parse_job_args(args, "train", {}, extras);
}

namespace {

/// Fills cmd.spec from --cluster FILE, --cluster-resolver or TF_CONFIG and
/// returns the name of that source, for messages.
std::string resolve_node_spec(node_command& cmd, const std::string& file,
                              const std::string& role,
                              const std::optional<uint32_t>& index,
                              const std::optional<uint16_t>& port_base) {
  const cluster_resolver* resolver = nullptr;
  if (!cmd.resolver.empty()) {
    resolver = find_cluster_resolver(cmd.resolver);
    if (resolver == nullptr) {
      std::string known;
      for (auto& name : cluster_resolver_names())
        known += (known.empty() ? "" : ", ") + name;
      throw input_error(fmt::format("--cluster-resolver: unknown resolver "
                                    "\"{}\" (known: {})",
                                    cmd.resolver, known));
    }
    if (!file.empty())
      throw input_error("--cluster and --cluster-resolver: give one of them");
  }
  bool assigns = resolver != nullptr && resolver->assigns_roles;
  if (port_base && !assigns)
    throw input_error("--port-base: only with a resolver that assigns ports "
                      "(--cluster-resolver slurm); other specs name theirs");
  if (assigns && (!role.empty() || index))
    throw input_error(fmt::format("{}: not with --cluster-resolver {}, which "
                                  "gives every task its role",
                                  role.empty() ? "--index" : "--role",
                                  cmd.resolver));
  if (!file.empty()) {
    cmd.spec = load_cluster_spec(file);
    return file;
  }
  if (resolver == nullptr) {
    cmd.spec = cluster_spec_from_env("TF_CONFIG");
    return "TF_CONFIG";
  }
  resolver_options ro;
  ro.ps = cmd.train.job.ps;
  ro.port_base = port_base.value_or(ro.port_base);
  cmd.spec = resolver->resolve(ro);
  return "the cluster of --cluster-resolver " + cmd.resolver;
}

} // namespace

node_command parse_node_args(const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> extras;
  node_command cmd;
  cmd.train = parse_job_args(
    args, "node",
    {{"--role", true},
     {"--index", true},
     {"--cluster", true},
     {"--cluster-resolver", true},
     {"--port-base", true},
     {"--cpu-set", true}},
    extras);
  if (cmd.train.help)
    return cmd;
  std::string role;
  std::optional<uint32_t> index;
  std::string file;
  std::optional<uint16_t> port_base;
  for (auto& [flag, value] : extras) {
    if (flag == "--role")
      role = value;
    else if (flag == "--index")
      index = static_cast<uint32_t>(to_count(flag, value, 0, 1u << 20));
    else if (flag == "--cluster")
      file = value;
    else if (flag == "--cluster-resolver")
      cmd.resolver = value;
    else if (flag == "--port-base")
      port_base = static_cast<uint16_t>(to_count(flag, value, 1, 65535));
    else if (flag == "--cpu-set")
      cmd.cpus = parse_cpu_list(value, flag);
  }
  auto source = resolve_node_spec(cmd, file, role, index, port_base);
  if (role == "coordinator")
    role = "chief";
  if (!role.empty() || index) {
    if (role.empty())
      throw input_error("--index: needs --role as well");
    cmd.spec.task = task_id{role, index.value_or(0)};
  }
  if (!cmd.spec.task)
    throw input_error(fmt::format("{}: no task: give --role and --index, or "
                                  "\"task\" in the spec",
                                  source));
  validate(cmd.spec, source);
  auto& job = cmd.train.job;
  auto has = [&](const char* flag) {
    auto& f = cmd.train.explicit_flags;
    return std::find(f.begin(), f.end(), flag) != f.end();
  };
  // The cluster spec decides how many workers and ps there are; a flag that
  // says otherwise is a mistake.
  if (has("--workers") && job.workers != cmd.spec.worker.size())
    throw input_error(fmt::format("--workers: {}, but {} lists {} workers",
                                  job.workers, source,
                                  cmd.spec.worker.size()));
  if (has("--ps") && job.ps != cmd.spec.ps.size())
    throw input_error(fmt::format("--ps: {}, but {} lists {} ps", job.ps,
                                  source, cmd.spec.ps.size()));
  job.workers = static_cast<uint32_t>(cmd.spec.worker.size());
  job.ps = static_cast<uint32_t>(cmd.spec.ps.size());
  validate(job);
  return cmd;
}

launch_command parse_launch_args(const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> extras;
  launch_command cmd;
  static const std::map<std::string, bool> own = {
    {"--host", true}, {"--launcher", true}, {"--port-base", true}};
  cmd.train = parse_job_args(args, "launch", own, extras);
  for (auto& [flag, value] : extras) {
    if (flag == "--host")
      cmd.launcher_opts.host = value;
    else if (flag == "--launcher")
      cmd.launcher = value;
    else if (flag == "--port-base")
      cmd.launcher_opts.port_base = static_cast<uint16_t>(
        to_count(flag, value, 1, 65535));
  }
  // Every node gets the job flags as given, without the launcher's own.
  for (size_t i = 0; i < args.size(); ++i) {
    if (own.count(args[i]) > 0) {
      ++i;
      continue;
    }
    auto eq = args[i].find('=');
    if (eq != std::string::npos && own.count(args[i].substr(0, eq)) > 0)
      continue;
    cmd.node_args.push_back(args[i]);
  }
  return cmd;
}

} // namespace actorps
