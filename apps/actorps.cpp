// actorps: parameter-server training on the C++ Actor Framework.
//
//   actorps train --config configs/fashion_mnist.json [flags]
//   actorps node --role ps --index 0 --cluster configs/cluster_local.json
//   actorps launch --config configs/fashion_mnist.json --workers 2 --ps 2
//   actorps certs --cluster configs/cluster_local.json --out certs/
//   actorps stream-gen --out stream/ --parts 10 --rows-per-part 1000
//   actorps export --config configs/a9a.json --checkpoint ckpt/ --out models/a9a
//   actorps serve models/a9a --port 8501
//   srun -n 5 actorps node --cluster-resolver slurm --ps 2 --config ...
//   actorps launch --launcher slurm --ps 2 --workers 2 ...   (in sbatch)
//
// Exit status (core/exit_codes.hpp, docs/reference/exit-codes.md): 0 on
// success, 2 for unusable input (config, flags, data files), 1 when training
// fails in a way a retry would repeat (a step error), 128 when a node was
// lost and not recovered or not reached (a retry may help), 75 when SIGTERM
// stopped the coordinator after it wrote a checkpoint (143 without
// checkpoint_dir), 3 for a ps or worker of a job that failed.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cluster/topology/node_actor.hpp"
#include "apps/certs.hpp"
#include "apps/export.hpp"
#include "apps/serve.hpp"
#include "apps/simulate.hpp"
#include "apps/stream_gen.hpp"
#include "apps/cli.hpp"
#include "cluster/launch/launcher.hpp"
#include "cluster/launch/node_launcher.hpp"
#include "cluster/spec/cluster_resolver.hpp"
#include "cluster/job/stop_request.hpp"
#include "cluster/net/job_secret.hpp"
#include "cluster/net/tls.hpp"
#include "cluster/topology/node.hpp"
#include "core/cpu_affinity.hpp"
#include "core/cpu_policy.hpp"
#include "core/error.hpp"
#include "core/job_options.hpp"
#include "core/log.hpp"

namespace {

constexpr const char* usage = R"(usage: actorps COMMAND [args]

commands:
  train    train a job with every role in this process (see: actorps train --help)
  node     run one node of a multi-process cluster (see: actorps node --help)
  launch   run every node of a cluster as its own process on this machine
           (see: actorps launch --help)
  certs    make a cluster CA and a certificate per node for mutual TLS
           (see: actorps certs --help)
  simulate run a job's actors under a deterministic scheduler with a virtual
           clock and a network model: 1000 workers on one machine (see:
           actorps simulate --help)
  stream-gen
           write a stream of click-log parts with drifting ids into a folder,
           for a job that reads a stream (see: actorps stream-gen --help)
  export   turn a checkpoint into a servable model: ONNX, table files and a
           manifest (see: actorps export --help)
  serve    answer TensorFlow Serving's REST API with an exported model, and
           switch to newer versions as they land (see: actorps serve --help)
  config-reference
           print docs/reference/config.md: every config key with its flag,
           type, bounds, default and help
)";

/// Schedules this process's threads as the job says (cluster.cpu_policy);
/// called before the process starts any thread, which then inherit it.
void use_cpu_policy(const actorps::job_config& job, const char* who,
                    int index) {
  auto policy = actorps::parse_cpu_policy(job.cpu_policy, "cluster.cpu_policy");
  if (auto why = actorps::apply_cpu_policy(policy); !why.empty())
    actorps::log::warn(who, index,
                       "cluster.cpu_policy \"{}\" not applied ({}); the "
                       "threads keep the policy they were started with",
                       job.cpu_policy, why);
}

int run_train(const std::vector<std::string>& args) {
  auto cmd = actorps::parse_train_args(args);
  if (cmd.help) {
    std::fputs(actorps::train_usage().c_str(), stdout);
    return 0;
  }
  if (cmd.quiet)
    actorps::log::set_level(actorps::log::level::warning);
  cmd.options.progress = !cmd.no_progress && isatty(fileno(stdout)) != 0;
  use_cpu_policy(cmd.job, "train", -1);
  // SIGTERM or SIGUSR1: a checkpoint, then exit_stopped (see main).
  actorps::stop_on_signals();
  actorps::train(cmd.job, cmd.options);
  return 0;
}

int run_node(const std::vector<std::string>& args) {
  auto cmd = actorps::parse_node_args(args);
  if (cmd.train.help) {
    std::fputs(actorps::node_usage().c_str(), stdout);
    return 0;
  }
  if (cmd.train.quiet)
    actorps::log::set_level(actorps::log::level::warning);
  // `actorps launch` prefixes each line with the node's name already.
  if (auto* v = std::getenv("ACTORPS_LAUNCHED"); v != nullptr && *v == '1')
    actorps::log::set_show_origin(false);
  cmd.train.options.progress = !cmd.train.no_progress
                               && isatty(fileno(stdout)) != 0;
  // The node's name in log lines: "coordinator" for the chief.
  auto& task = *cmd.spec.task;
  bool chief = task.type == "chief";
  const char* who = chief ? "coordinator" : task.type.c_str();
  int index = chief ? -1 : static_cast<int>(task.index);
  use_cpu_policy(cmd.train.job, who, index);
  if (!cmd.cpus.empty())
    if (auto why = actorps::apply_cpu_set(cmd.cpus); !why.empty())
      actorps::log::warn(who, index,
                         "--cpu-set {} not applied ({}); the threads run on "
                         "the CPUs they were started with",
                         actorps::format_cpu_list(cmd.cpus), why);
  // TLS first: the node's first line says whether and how it authenticates
  // (the evaluator talks to no node).
  if (task.type != "evaluator") {
    actorps::open_node_tls(cmd.train.job.tls, {task.type, task.index});
    actorps::open_node_secret(cmd.train.job.secret_file, cmd.train.job.tls,
                              who, index);
  }
  // Who is where, once per node, when a resolver worked it out.
  if (!cmd.resolver.empty() && !cmd.train.quiet)
    actorps::log::info(who, index, "cluster from {}: {}", cmd.resolver,
                       actorps::describe_cluster(cmd.spec));
  // SIGTERM or SIGUSR1: the coordinator checkpoints and exits with
  // exit_stopped; a ps or worker serves until the coordinator ends the job.
  actorps::stop_on_signals();
  return actorps::run_node(cmd.train.job, cmd.spec, *cmd.spec.task,
                           cmd.train.options, cmd.join);
}

/// The path of this executable, for starting the nodes.
std::string self_path() {
  std::vector<char> buf(4096);
  auto n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0)
    throw actorps::runtime_failure("cannot find this program's path "
                                   "(/proc/self/exe)");
  return std::string(buf.data(), static_cast<size_t>(n));
}

/// The CPUs of each ps and worker under cluster.cpu_affinity "auto" with the
/// local launcher (none otherwise: a Slurm step is bound by Slurm's
/// --cpu-bind). The coordinator, which mostly waits, keeps every CPU. Says
/// what it chose when `say`.
std::optional<actorps::cpu_assignment>
node_cpus(const actorps::launch_command& cmd, bool say) {
  auto& job = cmd.train.job;
  auto mode = actorps::parse_cpu_affinity(job.cpu_affinity,
                                          "cluster.cpu_affinity");
  if (mode == actorps::cpu_affinity::none || cmd.launcher != "local")
    return std::nullopt;
  auto allowed = actorps::allowed_cpus();
  if (allowed.empty())
    return std::nullopt; // sched_getaffinity failed: leave it to the kernel
  auto cpus = actorps::assign_cpus(allowed, job.ps, job.workers);
  if (say && !cmd.train.quiet) {
    std::string text;
    auto add = [&](const char* role, size_t i, const std::vector<int>& set) {
      text += fmt::format("{}{}{} {}", text.empty() ? "" : ", ", role, i,
                          actorps::format_cpu_list(set));
    };
    for (size_t i = 0; i < std::max(job.ps, job.workers); ++i) {
      if (i < cpus.ps.size())
        add("ps", i, cpus.ps[i]);
      if (i < cpus.workers.size())
        add("worker", i, cpus.workers[i]);
    }
    fmt::print(stderr,
               "[launch] CPUs ({} of this machine's): {}; the coordinator "
               "any (cluster.cpu_affinity auto; none turns it off)\n",
               actorps::format_cpu_list(allowed), text);
  }
  return cpus;
}

int run_launch(const std::vector<std::string>& args) {
  auto cmd = actorps::parse_launch_args(args);
  if (cmd.train.help) {
    std::fputs(actorps::launch_usage().c_str(), stdout);
    return 0;
  }
  auto& job = cmd.train.job;
  auto launcher = actorps::make_node_launcher(cmd.launcher, cmd.launcher_opts);
  // TLS by default: throw-away certificates (a new CA) for this run's
  // nodes, unless the config or the flags say which (--tls DIR) or off.
  std::unique_ptr<actorps::launch_certs> certs;
  if (!job.tls.cert.empty() || !job.tls.key.empty())
    throw actorps::input_error("launch: --tls-cert/--tls-key name one node's "
                               "files; give every node its own with --tls DIR "
                               "(made by actorps certs), or --tls off");
  // Servers that join later (join:ps in the plan) start with the others,
  // idle until their join (the coordinator gives them nothing before).
  auto servers = actorps::servers_ever(job.faults, job.ps);
  if (!job.tls.given()) {
    certs = std::make_unique<actorps::launch_certs>(servers, job.workers);
    if (!cmd.train.quiet)
      fmt::print(stderr, "[launch] TLS: throw-away certificates of a new CA "
                         "in {} (each node gets only its own key; the CA's "
                         "key is deleted; all removed at the end)\n",
                 certs->dir());
  }
  // Without TLS a job secret keeps other users of this machine out: a
  // fresh one unless the config or the flags name one. One that is named
  // is checked here, before any node starts. Not with Slurm: the nodes of
  // other hosts would not find a file of this one's $TMPDIR.
  std::unique_ptr<actorps::launch_secret> secret;
  if (auto file = actorps::secret_file_of(job.secret_file, job.tls)) {
    actorps::job_secret::load(*file);
  } else if (job.tls.off && cmd.launcher == "local") {
    secret = std::make_unique<actorps::launch_secret>();
    if (!cmd.train.quiet)
      fmt::print(stderr, "[launch] tls off: a new job secret in {} (mode "
                         "0600, removed at the end); every node proves it "
                         "holds it, so other users of this machine cannot "
                         "connect\n",
                 secret->file());
  } else if (job.tls.off && !cmd.train.quiet) {
    fmt::print(stderr, "[launch] tls off and no job secret: anyone who "
                       "reaches the nodes' ports can join (--secret-file "
                       "FILE on a shared file system keeps them out)\n");
  }
  // A port can be taken by another program before its node listens on it:
  // the node then fails at once, before the job has started, saying "cannot
  // listen on HOST:PORT: Address already in use". Every node is stopped and
  // the job starts again on new ports (a restart of that node alone would
  // fail the same way, and the others already know its port); the last
  // attempt runs as is.
  constexpr uint32_t attempts = 3;
  auto exe = self_path();
  for (uint32_t attempt = 0;; ++attempt) {
    launcher->place(servers, job.workers, attempt);
    auto cpus = node_cpus(cmd, attempt == 0);
    std::vector<actorps::child_spec> children;
    auto add = [&](const std::string& role, const std::string& name,
                   uint32_t index) {
      actorps::child_spec c;
      c.name = name;
      c.argv = {exe, "node", "--role", role, "--index", std::to_string(index)};
      if (role != "coordinator" && cpus) {
        auto& sets = role == "ps" ? cpus->ps : cpus->workers;
        if (index < sets.size()) // (not a server that joins later)
          c.argv.insert(c.argv.end(),
                        {"--cpu-set", actorps::format_cpu_list(sets[index])});
      }
      c.argv.insert(c.argv.end(), cmd.node_args.begin(), cmd.node_args.end());
      if (certs)
        c.argv.insert(c.argv.end(),
                      {"--tls", certs->dir_of(role == "coordinator"
                                                ? std::string{"coordinator"}
                                                : name)});
      if (secret)
        c.argv.insert(c.argv.end(), {"--secret-file", secret->file()});
      c.env = {{"ACTORPS_LAUNCHED", "1"}};
      // A worker or ps that dies is started again: a worker joins its
      // servers and the coordinator takes it back; a ps gets its shards back
      // from the newest checkpoint.
      if (role != "coordinator") {
        c.restart_budget = job.restart_budget;
        // Stopped by the coordinator of a failed job: not started again.
        c.final_status = actorps::exit_job_failed;
      } else if (!job.checkpoint_dir.empty()) {
        // A coordinator that crashes comes back from the newest checkpoint
        // and joins the running nodes.
        c.restart_budget = job.restart_budget;
        for (size_t k = 0; k < c.argv.size(); ++k) {
          if (c.argv[k] == "--restore") { // replaced by --resume
            ++k;
            continue;
          }
          // A variables-only start is not repeated: the restarted
          // coordinator resumes the new run from its own checkpoints.
          if (c.argv[k].rfind("--restore=", 0) == 0 || c.argv[k] == "--resume"
              || c.argv[k] == "--resume-if-any"
              || c.argv[k] == "--restore-variables-only")
            continue;
          c.restart_argv.push_back(c.argv[k]);
        }
        c.restart_argv.push_back("--resume");
      }
      auto type = role == "coordinator" ? std::string{"chief"} : role;
      children.push_back(launcher->wrap({type, index}, std::move(c)));
    };
    for (uint32_t i = 0; i < servers; ++i)
      add("ps", "ps" + std::to_string(i), i);
    for (uint32_t i = 0; i < job.workers; ++i)
      add("worker", "worker" + std::to_string(i), i);
    add("coordinator", "coordinator", 0);
    if (!cmd.train.quiet && attempt == 0)
      fmt::print(stderr, "[launch] {} ps{}, {} workers {}\n", job.ps,
                 servers > job.ps
                   ? fmt::format(" (and {} that join later, started now and "
                                 "idle until then)",
                                 servers - job.ps)
                   : std::string{},
                 job.workers, launcher->describe());
    actorps::launch_options opts;
    if (attempt + 1 < attempts)
      opts.abort_when = [](const std::string&, uint32_t restarts,
                           std::string_view line) {
        // Only a node's first start: a node restarted mid-job is not a
        // reason to start the whole job again.
        return restarts == 0
               && line.find("cannot listen on") != std::string_view::npos
               && line.find("Address already in use")
                    != std::string_view::npos;
      };
    auto rc = actorps::run_children(children, children.size() - 1, opts);
    if (rc != actorps::launch_aborted)
      return rc;
    fmt::print(stderr,
               "[launch] a node's port was taken by another program before "
               "the node could listen on it; starting every node again on "
               "new ports (attempt {} of {})\n",
               attempt + 2, attempts);
  }
}

} // namespace

int main(int argc, char** argv) {
  if (auto* v = std::getenv("ACTORPS_LOG"); v != nullptr && v == std::string{"debug"})
    actorps::log::set_level(actorps::log::level::debug);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(usage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  auto command = args[0];
  args.erase(args.begin());
  try {
    if (command == "train")
      return run_train(args);
    if (command == "node")
      return run_node(args);
    if (command == "launch")
      return run_launch(args);
    if (command == "certs")
      return actorps::run_certs(args);
    if (command == "simulate")
      return actorps::run_simulate(args);
    if (command == "export")
      return actorps::run_export(args);
    if (command == "serve")
      return actorps::run_serve(args);
    if (command == "stream-gen")
      return actorps::run_stream_gen(args);
    if (command == "config-reference" && args.empty()) {
      std::fputs(actorps::config_reference().c_str(), stdout);
      return 0;
    }
    fmt::print(stderr, "actorps: error: unknown command \"{}\"\n{}", command,
               usage);
    return 2;
  } catch (const actorps::input_error& e) {
    fmt::print(stderr, "actorps: error: {}\n", e.what());
    return actorps::exit_bad_input;
  } catch (const actorps::transient_failure& e) {
    fmt::print(stderr, "actorps: failed (a retry may help): {}\n", e.what());
    return actorps::exit_retryable;
  } catch (const actorps::stopped_on_request& e) {
    fmt::print(stderr, "actorps: {}\n", e.what());
    // Resumable only with a checkpoint; without one, as if SIGTERM killed it.
    return e.checkpoint_dir().empty() ? 128 + SIGTERM : actorps::exit_stopped;
  } catch (const std::exception& e) {
    fmt::print(stderr, "actorps: failed: {}\n", e.what());
    return actorps::exit_failed;
  }
}
