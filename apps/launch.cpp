#include "apps/launch.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "apps/certs.hpp"
#include "apps/cli.hpp"
#include "apps/scale_desk.hpp"
#include "cluster/launch/launcher.hpp"
#include "cluster/launch/node_launcher.hpp"
#include "cluster/net/job_secret.hpp"
#include "core/cpu_affinity.hpp"
#include "core/error.hpp"
#include "core/exit_codes.hpp"

namespace actorps {

namespace {

/// The path of this executable, for starting the nodes.
std::string self_path() {
  std::vector<char> buf(4096);
  auto n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0)
    throw runtime_failure("cannot find this program's path "
                                   "(/proc/self/exe)");
  return std::string(buf.data(), static_cast<size_t>(n));
}

/// The CPUs of each ps and worker under cluster.cpu_affinity "auto" with the
/// local launcher (none otherwise: a Slurm step is bound by Slurm's
/// --cpu-bind). The coordinator, which mostly waits, keeps every CPU. Says
/// what it chose when `say`.
std::optional<cpu_assignment>
node_cpus(const launch_command& cmd, bool say) {
  auto& job = cmd.train.job;
  auto mode = parse_cpu_affinity(job.cpu_affinity,
                                          "cluster.cpu_affinity");
  if (mode == cpu_affinity::none || cmd.launcher != "local")
    return std::nullopt;
  auto allowed = allowed_cpus();
  if (allowed.empty())
    return std::nullopt; // sched_getaffinity failed: leave it to the kernel
  auto cpus = assign_cpus(allowed, job.ps, job.workers);
  if (say && !cmd.train.quiet) {
    std::string text;
    auto add = [&](const char* role, size_t i, const std::vector<int>& set) {
      text += fmt::format("{}{}{} {}", text.empty() ? "" : ", ", role, i,
                          format_cpu_list(set));
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
               format_cpu_list(allowed), text);
  }
  return cpus;
}

/// The processes of a job's nodes: `actorps node --role R --index I` with
/// the job's flags, its certificates or secret, CPUs and restarts.
struct node_factory {
  const launch_command& cmd;
  const node_launcher& launcher;
  std::string exe;
  launch_certs* certs;
  launch_secret* secret;
  std::optional<cpu_assignment> cpus;

  /// Node `index` of `role` ("ps", "worker", "coordinator"), named `name`.
  child_spec make(const std::string& role, const std::string& name,
                  uint32_t index) const {
    auto& job = cmd.train.job;
    child_spec c;
    c.name = name;
    c.argv = {exe, "node", "--role", role, "--index", std::to_string(index)};
    if (role != "coordinator" && cpus) {
      auto& sets = role == "ps" ? cpus->ps : cpus->workers;
      if (index < sets.size()) // (not a server that joins later)
        c.argv.insert(c.argv.end(),
                      {"--cpu-set", format_cpu_list(sets[index])});
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
      c.final_status = exit_job_failed;
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
    return launcher.wrap({type, index}, std::move(c));
  }

  /// A worker that joins the running job (actorps scale) with `index`
  /// (past the spec's), at the coordinator's address `chief`; with TLS its
  /// certificate is signed now by the job's CA.
  child_spec joining_worker(uint32_t index, const std::string& chief) const {
    if (certs)
      certs->add_worker(index); // the folder make() names
    auto c = make("worker", "worker" + std::to_string(index), index);
    c.argv.insert(c.argv.end(), {"--join", chief});
    return c;
  }
};

} // namespace

int run_launch(const std::vector<std::string>& args) {
  auto cmd = parse_launch_args(args);
  if (cmd.train.help) {
    std::fputs(launch_usage().c_str(), stdout);
    return 0;
  }
  auto& job = cmd.train.job;
  auto launcher = make_node_launcher(cmd.launcher, cmd.launcher_opts);
  // TLS by default: throw-away certificates (a new CA) for this run's
  // nodes, unless the config or the flags say which (--tls DIR) or off.
  std::unique_ptr<launch_certs> certs;
  if (!job.tls.cert.empty() || !job.tls.key.empty())
    throw input_error("launch: --tls-cert/--tls-key name one node's "
                               "files; give every node its own with --tls DIR "
                               "(made by actorps certs), or --tls off");
  // Servers that join later (join:ps in the plan) start with the others,
  // idle until their join (the coordinator gives them nothing before).
  auto servers = servers_ever(job.faults, job.ps, job.max_ps);
  if (!job.tls.given()) {
    certs = std::make_unique<launch_certs>(servers, job.workers);
    if (!cmd.train.quiet)
      fmt::print(stderr, "[launch] TLS: throw-away certificates of a new CA "
                         "in {} (each node gets only its own key; the CA's "
                         "key stays in its ca/ folder, which no node gets, to "
                         "sign workers that join through actorps scale; all "
                         "removed at the end)\n",
                 certs->dir());
  }
  // Without TLS a job secret keeps other users of this machine out: a
  // fresh one unless the config or the flags name one. One that is named
  // is checked here, before any node starts. Not with Slurm: the nodes of
  // other hosts would not find a file of this one's $TMPDIR.
  std::unique_ptr<launch_secret> secret;
  if (auto file = secret_file_of(job.secret_file, job.tls)) {
    job_secret::load(*file);
  } else if (job.tls.off && cmd.launcher == "local") {
    secret = std::make_unique<launch_secret>();
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
    auto spec = launcher->place(servers, job.workers, attempt);
    auto cpus = node_cpus(cmd, attempt == 0);
    std::vector<child_spec> children;
    node_factory nodes{cmd, *launcher, exe, certs.get(), secret.get(),
                       std::move(cpus)};
    auto add = [&](const std::string& role, const std::string& name,
                   uint32_t index) {
      children.push_back(nodes.make(role, name, index));
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
    launch_options opts;
    // actorps scale: a socket in a private folder, with the local launcher.
    std::unique_ptr<scale_desk> desk;
    if (cmd.launcher == "local") {
      scale_desk_options so;
      so.sharding = job.sharding;
      so.mode = job.mode;
      so.workers = job.workers;
      so.ps = job.ps;
      so.servers = servers;
      auto chief = to_string(spec.chief.front());
      so.new_worker = [&nodes, chief](uint32_t index) {
        return nodes.joining_worker(index, chief);
      };
      desk = std::make_unique<scale_desk>(std::move(so));
      opts.control = desk.get();
      children.back().stdin_lines = true; // the coordinator
      children.back().env.emplace_back("ACTORPS_SCALE_INPUT", "stdin");
      if (!cmd.train.quiet && attempt == 0)
        fmt::print(stderr, "[launch] scale this job with: actorps scale "
                           "--socket {} --workers N | --ps M | --leave-ps N\n",
                   desk->socket_path());
    }
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
    auto rc = run_children(children, children.size() - 1, opts);
    if (rc != launch_aborted)
      return rc;
    fmt::print(stderr,
               "[launch] a node's port was taken by another program before "
               "the node could listen on it; starting every node again on "
               "new ports (attempt {} of {})\n",
               attempt + 2, attempts);
  }
}


} // namespace actorps
