#include "apps/cli.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "cluster/spec/cluster_resolver.hpp"
#include "core/cpu_affinity.hpp"
#include "core/error.hpp"
#include "core/job_options.hpp"

namespace actorps {

namespace {

/// A job flag that sets no config key; those that do come from the option
/// table (core/job_options.hpp), with their help.
struct run_flag {
  const char* flag;
  /// "" for a switch.
  const char* value_name;
  const char* help;
};

const std::vector<run_flag>& run_flags() {
  static const std::vector<run_flag> flags = {
    {"--no-staleness-aware", "",
     "plain steps whatever the number of workers (optimizer and "
     "table_optimizer.staleness_aware false)"},
    {"--no-prefetch", "",
     "no pull right behind each push, also between processes "
     "(cluster.prefetch false)"},
    {"--metrics-out", "FILE",
     "write per-epoch and final metrics as JSON lines"},
    {"--restore", "DIR", "continue from the checkpoint in DIR"},
    {"--resume", "",
     "continue from the newest checkpoint in --checkpoint-dir"},
    {"--resume-if-any", "",
     "as --resume, but start afresh when --checkpoint-dir holds no "
     "checkpoint yet (pods and requeued jobs that run one command every "
     "time)"},
    {"--restore-variables-only", "",
     "with --restore: start a new run from the checkpoint's variables only "
     "(dense values, table rows): epoch 1, step 0, fresh data positions, and "
     "the optimizer's slots and step counts reset (fine-tuning); data, "
     "optimizer, mode and workers may differ"},
    {"--no-progress", "", "no progress bar, even on a terminal"},
    {"--metrics-port", "N",
     "serve Prometheus metrics on http://ADDRESS:N/metrics (0 = a free port, "
     "logged); a node of a cluster uses N + its position: chief N, ps i "
     "N+1+i, worker i N+1+ps+i, evaluator N+1+ps+workers"},
    {"--metrics-address", "A",
     "the address it binds: default 127.0.0.1 in one process, a node's own "
     "address from the cluster spec in a cluster; 0.0.0.0 = every interface "
     "(without --metrics-auth or --metrics-token anyone who reaches it reads "
     "the metrics)"},
    {"--metrics-auth", "FILE",
     "scrapes must authenticate with the USER:PASSWORD on FILE's first line "
     "(HTTP basic authentication; Prometheus' basic_auth)"},
    {"--metrics-token", "FILE",
     "scrapes must send 'Authorization: Bearer TOKEN', TOKEN FILE's first "
     "line (Prometheus' authorization credentials_file); with --metrics-auth, "
     "either is accepted"},
    {"--metrics-tls", "MODE",
     "off (default): plain HTTP; on: HTTPS with the node's certificate (of "
     "--tls DIR or --tls-cert/--tls-key; scrapers check it with ca.pem); "
     "mutual: and scrapers must present a certificate of the cluster's CA"},
    {"--plot", "FILE.png",
     "at the end, plot loss and accuracy (or AUC) per epoch with gnuplot "
     "(Debian's gnuplot-nox)"},
    {"--quiet", "", "no diagnostics on stderr"},
  };
  return flags;
}

/// "  --flag VALUE           help", the help wrapped at 79 columns (on the
/// next line if the flag and its value are too wide).
std::string flag_help(const std::string& flag, const std::string& value_name,
                      const std::string& help) {
  constexpr size_t indent = 25;
  constexpr size_t width = 79;
  std::string out = "  " + flag + (value_name.empty() ? "" : " " + value_name);
  if (out.size() + 1 > indent)
    out += '\n' + std::string(indent, ' ');
  else
    out.resize(indent, ' ');
  size_t column = indent;
  size_t pos = 0;
  bool first = true;
  while (pos < help.size()) {
    auto end = help.find(' ', pos);
    if (end == std::string::npos)
      end = help.size();
    auto word = help.substr(pos, end - pos);
    pos = end + 1;
    if (!first && column + 1 + word.size() > width) {
      out += '\n' + std::string(indent, ' ');
      column = indent;
    } else if (!first) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    first = false;
  }
  return out + '\n';
}

/// The help of every job flag: --config, the option table's flags (each
/// naming its config key, bounds and default), then the run's own flags.
std::string job_flags_help() {
  std::string out = flag_help("--config", "FILE",
                              "job config (JSON); default: built-in "
                              "defaults; docs/reference/config.md lists "
                              "every key");
  for (auto& row : job_options()) {
    if (row.flag.empty())
      continue;
    // "(cluster.replication_lag; 1 .. 1000000; default 16)": the words are
    // the flag's value already, and a switch's default is off.
    std::string note = row.key;
    auto bounds = row.words.empty() ? bounds_text(row) : "";
    if (!bounds.empty() && bounds != ">= 0")
      note += "; " + bounds;
    auto fallback = default_text(row);
    if (row.value_name == "on|off")
      fallback = fallback == "true" ? "on" : "off";
    if (!row.value_name.empty() && !row.by_hand() && fallback != "\"\"")
      note += "; default " + fallback;
    out += flag_help(row.flag, row.value_name, row.help + " (" + note + ")");
  }
  for (auto& f : run_flags())
    out += flag_help(f.flag, f.value_name, f.help);
  out += flag_help("-h, --help", "", "this text");
  return out;
}

/// Whether `flag` is a job flag, and whether it takes a value.
std::optional<bool> job_flag_takes_value(const std::string& flag) {
  if (flag == "--config")
    return true;
  if (flag == "--help" || flag == "-h")
    return false;
  if (auto* row = find_job_flag(flag))
    return !row->value_name.empty();
  for (auto& f : run_flags())
    if (flag == f.flag)
      return *f.value_name != '\0';
  return std::nullopt;
}

/// Sets what a run flag (run_flags()) says.
void set_run_flag(train_command& cmd, const std::string& flag,
                  const std::string& value) {
  auto& opts = cmd.options;
  if (flag == "--no-staleness-aware") {
    for (auto* rule : {&cmd.job.optimizer, &cmd.job.table_optimizer}) {
      rule->staleness_aware = false;
      rule->staleness_aware_chosen = true;
    }
  } else if (flag == "--no-prefetch") {
    cmd.job.prefetch = false;
    cmd.job.prefetch_chosen = true;
  } else if (flag == "--metrics-out")
    opts.metrics_out = value;
  else if (flag == "--restore")
    opts.restore_dir = value;
  else if (flag == "--resume")
    opts.resume = true;
  else if (flag == "--resume-if-any")
    opts.resume = opts.resume_if_any = true;
  else if (flag == "--restore-variables-only")
    opts.restore_variables_only = true;
  else if (flag == "--no-progress")
    cmd.no_progress = true;
  else if (flag == "--metrics-port")
    opts.metrics_port = static_cast<int>(to_count(flag, value, 0, 65535));
  else if (flag == "--metrics-address")
    opts.metrics_address = value;
  else if (flag == "--metrics-auth")
    opts.metrics_auth = value;
  else if (flag == "--metrics-token")
    opts.metrics_token = value;
  else if (flag == "--metrics-tls") {
    if (value != "off" && value != "on" && value != "mutual")
      throw input_error(fmt::format("--metrics-tls: \"{}\" is not a mode "
                                    "(off, on, mutual)",
                                    value));
    opts.metrics_tls = value;
  }
  else if (flag == "--plot")
    opts.plot = value;
  else if (flag == "--quiet")
    cmd.quiet = true;
}

/// Checks the flags of a run against each other.
void check_run_flags(const train_command& cmd) {
  auto& opts = cmd.options;
  if (opts.resume && cmd.job.checkpoint_dir.empty())
    throw input_error("--resume: needs --checkpoint-dir (or "
                      "training.checkpoint_dir in the config)");
  if (opts.resume && !opts.restore_dir.empty())
    throw input_error("--resume and --restore: give one of them");
  // A variables-only run counts from step 0; written among the checkpoints
  // it came from, its own would be pruned first and a later --resume would
  // take the old run's.
  if (opts.restore_variables_only && opts.resume)
    throw input_error("--restore-variables-only: starts a new run, whose "
                      "checkpoints would be mixed with the old run's in "
                      "--checkpoint-dir; instead of --resume, give the "
                      "checkpoint with --restore DIR and the new run an empty "
                      "--checkpoint-dir");
  if (opts.restore_variables_only && opts.restore_dir.empty())
    throw input_error("--restore-variables-only: needs the checkpoint: "
                      "--restore DIR");
}

} // namespace

std::string train_usage() {
  return std::string{R"(usage: actorps train [--config FILE] [flags]

Trains the job of FILE with every role (coordinator, parameter servers,
workers) as CAF actors in this process. Flags override the config:

)"} + job_flags_help();
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
  --join HOST:PORT       a worker joins a running job (--sharding dynamic)
                         through its coordinator at HOST:PORT (the spec's
                         chief address); --index past the spec's workers,
                         or, with --cluster-resolver jobset, none: the pod
                         is worker --workers + JOB_COMPLETION_INDEX
  --cluster FILE         cluster spec file (default: $TF_CONFIG)
  --cluster-resolver R   where the spec comes from instead: tf_config
                         ($TF_CONFIG, as Kubeflow's TFJob sets it) or slurm
                         (the srun step this task is in: task 0 the
                         coordinator, the next --ps tasks ps, the rest
                         workers; see docs/guide/slurm.md) or jobset (a
                         Kubernetes JobSet: Indexed Jobs coordinator, ps,
                         worker; --ps and --workers pods; see
                         docs/guide/kubernetes.md)
  --port-base P          slurm: port of a host's first task, the next tasks
                         there get the next ports; jobset: every pod's port
                         (default 8888)
  --cpu-set LIST         run this node's threads on these CPUs only, e.g.
                         0-3,8 (sched_setaffinity; `launch` passes each ps
                         and worker its share under --cpu-affinity auto)
)"} + job_flags_help();
}

std::string launch_usage() {
  return std::string{R"(usage: actorps launch [--config FILE] [job flags]

Starts every node of a cluster (the coordinator, --ps parameter servers,
--workers workers) as its own process, `actorps node --role R --index I`,
prefixes their output with [coordinator], [ps0], [worker1], ..., starts a
node that dies again (cluster.restart_budget), and exits with the
coordinator's status. With the local launcher it prints a socket for
`actorps scale`, which adds and removes workers and parameter servers
while the job runs (docs/guide/elasticity.md).

  --launcher L           local (default): child processes on free ports of
                         --host; slurm: each node a job step (srun) of the
                         Slurm allocation this runs in (see docs/guide/slurm.md)
  --host HOST            local: address the nodes listen on (127.0.0.1)
  --port-base P          slurm: port of a host's first node (default 8888)
)"} + job_flags_help();
}

train_command parse_job_args(
  const std::vector<std::string>& args, const std::string& command,
  const std::map<std::string, bool>& extra,
  std::vector<std::pair<std::string, std::string>>& extras) {
  train_command cmd;
  // Pass 1: split "--flag=value", check each flag and its value's presence.
  std::vector<std::pair<std::string, std::string>> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    auto arg = args[i];
    std::string value;
    bool inline_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    auto takes_value = job_flag_takes_value(arg);
    bool own = !takes_value && extra.count(arg) > 0;
    if (own)
      takes_value = extra.at(arg);
    if (!takes_value)
      throw input_error(fmt::format("unknown argument \"{}\" (see actorps "
                                    "{} --help)",
                                    args[i], command));
    if (*takes_value && !inline_value) {
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
        throw input_error(fmt::format("{}: missing value", arg));
      value = args[++i];
    } else if (!*takes_value && inline_value) {
      throw input_error(fmt::format("{}: takes no value", arg));
    }
    (own ? extras : flags).emplace_back(arg, value);
  }
  for (auto& [flag, value] : flags) {
    if (flag == "--workers" || flag == "--ps")
      cmd.explicit_flags.push_back(flag);
    if (flag == "--help" || flag == "-h") {
      cmd.help = true;
      return cmd;
    }
  }
  // Pass 2: the config, then each flag over it, in the order given.
  for (auto& [flag, value] : flags)
    if (flag == "--config")
      cmd.job = load_job_config(value);
  for (auto& [flag, value] : flags) {
    if (flag == "--workers" && command == "simulate")
      // A simulation runs more workers than a real job (10,000 with
      // --timing-only).
      cmd.job.workers = static_cast<uint32_t>(to_count(flag, value, 1,
                                                       100000));
    else if (auto* row = find_job_flag(flag))
      set_from_flag(cmd.job, *row, value);
    else
      set_run_flag(cmd, flag, value);
  }
  resolve_staleness_aware(cmd.job);
  validate(cmd.job);
  check_run_flags(cmd);
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
                              const std::optional<uint16_t>& port_base,
                              bool joining) {
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
                      "(--cluster-resolver slurm or jobset); other specs name "
                      "theirs");
  resolver_options ro;
  ro.ps = cmd.train.job.ps;
  ro.workers = cmd.train.job.workers;
  ro.port_base = port_base.value_or(ro.port_base);
  ro.joining = joining;
  // A resolver that cannot place a joining worker says so first.
  if (assigns && joining)
    cmd.spec = resolver->resolve(ro);
  if (assigns && (!role.empty() || index))
    throw input_error(fmt::format("{}: not with --cluster-resolver {}, which "
                                  "gives every task its role{}",
                                  role.empty() ? "--index" : "--role",
                                  cmd.resolver,
                                  joining ? " (a worker that joins: --workers "
                                            "+ its JOB_COMPLETION_INDEX)"
                                          : ""));
  if (assigns && joining)
    return "the cluster of --cluster-resolver " + cmd.resolver;
  if (!file.empty()) {
    cmd.spec = load_cluster_spec(file);
    return file;
  }
  if (resolver == nullptr) {
    cmd.spec = cluster_spec_from_env("TF_CONFIG");
    return "TF_CONFIG";
  }
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
     {"--cpu-set", true},
     {"--join", true}},
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
    else if (flag == "--join")
      try {
        cmd.join = parse_host_port(value);
      } catch (const input_error& e) {
        throw input_error(fmt::format("--join: {}", e.what()));
      }
  }
  // A worker that joins a running job has an index past the spec's
  // workers: the spec is checked without it. A resolver that assigns roles
  // (jobset) gives a joining pod its role and index itself.
  std::optional<uint32_t> joining;
  const auto* named = cmd.resolver.empty() ? nullptr
                                           : find_cluster_resolver(cmd.resolver);
  bool resolver_places = cmd.join && named != nullptr && named->assigns_roles;
  if (cmd.join && !resolver_places) {
    if (role != "worker")
      throw input_error("--join: only a worker joins a running job (--role "
                        "worker)");
    if (!index)
      throw input_error("--join: give the new worker's --index (its "
                        "certificate names it: past the spec's workers)");
    joining = index;
    index.reset();
    role.clear();
  }
  auto source = resolve_node_spec(cmd, file, role, index, port_base,
                                  cmd.join.has_value());
  if (resolver_places) {
    joining = cmd.spec.task->index;
    cmd.spec.task.reset();
  }
  if (role == "coordinator")
    role = "chief";
  if (!role.empty() || index) {
    if (role.empty())
      throw input_error("--index: needs --role as well");
    cmd.spec.task = task_id{role, index.value_or(0)};
  }
  if (!cmd.spec.task && !joining)
    throw input_error(fmt::format("{}: no task: give --role and --index, or "
                                  "\"task\" in the spec",
                                  source));
  validate(cmd.spec, source);
  if (joining) {
    if (*joining < cmd.spec.worker.size())
      throw input_error(fmt::format("--join: worker {} is in {} already; a "
                                    "worker that joins takes an index from "
                                    "{} on",
                                    *joining, source,
                                    cmd.spec.worker.size()));
    cmd.spec.task = task_id{"worker", *joining};
    if (cmd.train.job.sharding != "dynamic")
      throw input_error("--join: a worker joins a job with dynamic data "
                        "shards (--sharding dynamic)");
  }
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
  // Servers that join later (join:ps in the plan, or actorps scale up to
  // cluster.max_ps) are in the spec too, after the job's own: the job has
  // the others' count of ps (on which its groups start; cluster.groups says
  // how many groups). With max_ps the job's count is
  // the one given (config or --ps), not the spec's.
  if (job.max_ps != 0 && cmd.spec.ps.size() > job.max_ps)
    throw input_error(fmt::format("{} lists {} ps, more than cluster.max_ps "
                                  "({})",
                                  source, cmd.spec.ps.size(), job.max_ps));
  auto ps_joining = job.max_ps != 0
                      ? servers_ever(job.faults, job.ps, job.max_ps) - job.ps
                      : servers_ever(job.faults, 0);
  if (has("--ps") && job.ps + ps_joining != cmd.spec.ps.size())
    throw input_error(fmt::format("--ps: {}{}, but {} lists {} ps", job.ps,
                                  ps_joining == 0
                                    ? std::string{}
                                    : fmt::format(" and {} joining later",
                                                  ps_joining),
                                  source, cmd.spec.ps.size()));
  if (cmd.spec.ps.size() <= ps_joining)
    throw input_error(fmt::format("{} lists {} ps, but the plan has {} join "
                                  "later: none would start the job",
                                  source, cmd.spec.ps.size(), ps_joining));
  job.workers = static_cast<uint32_t>(cmd.spec.worker.size());
  job.ps = static_cast<uint32_t>(cmd.spec.ps.size() - ps_joining);
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
