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
#include "apps/launch.hpp"
#include "apps/scale.hpp"
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
  scale    add or remove workers and parameter servers of a running launch
           (see: actorps scale --help)
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
      return actorps::run_launch(args);
    if (command == "scale")
      return actorps::run_scale(args);
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
