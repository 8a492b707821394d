#include "cluster/launch/slurm_launcher.hpp"

#include <algorithm>
#include <cstdlib>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

/// The first executable file named `name` in $PATH, or "".
std::string find_on_path(const std::string& name) {
  auto path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  size_t begin = 0;
  for (;;) {
    auto colon = dirs.find(':', begin);
    auto dir = dirs.substr(begin, colon - begin);
    auto candidate = (dir.empty() ? std::string{"."} : dir) + "/" + name;
    struct stat info;
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode)
        && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (colon == std::string::npos)
      return {};
    begin = colon + 1;
  }
}

class slurm_launcher : public node_launcher {
public:
  slurm_launcher(uint16_t port_base, slurm_allocation alloc, std::string srun)
    : port_base_(port_base), alloc_(std::move(alloc)), srun_(std::move(srun)) {
    // nop
  }

  cluster_spec place(uint32_t ps, uint32_t workers,
                     uint32_t attempt) override {
    auto nodes = 1 + uint64_t{ps} + workers;
    auto places = place_slurm_tasks(alloc_.hosts, alloc_.tasks_per_host, "");
    if (nodes > places.size())
      throw input_error(fmt::format(
        "--launcher slurm: the job has {} nodes (a coordinator, {} ps, {} "
        "workers), but Slurm job {} has {} task{} (SLURM_TASKS_PER_NODE on {} "
        "host{}); ask for {} tasks, e.g. sbatch -n {}",
        nodes, ps, workers, alloc_.job_id, places.size(),
        places.size() == 1 ? "" : "s", alloc_.hosts.size(),
        alloc_.hosts.size() == 1 ? "" : "s", nodes, nodes));
    places.resize(nodes);
    uint32_t stride = 0;
    for (auto& p : places)
      stride = std::max(stride, p.local_index + 1);
    auto base = uint64_t{port_base_} + uint64_t{attempt} * stride;
    if (base > 65535)
      throw input_error(fmt::format("--port-base {}: start attempt {} would "
                                    "use ports from {}, past 65535",
                                    port_base_, attempt + 1, base));
    spec_ = slurm_cluster_spec(places, ps, static_cast<uint16_t>(base));
    json_ = spec_.to_json();
    return spec_;
  }

  child_spec wrap(const task_id& node, child_spec process) const override {
    auto& host = spec_.members(node.type).at(node.index).host;
    auto step = [&](std::vector<std::string>& argv) {
      if (argv.empty())
        return;
      std::vector<std::string> cmd{srun_,
                                   "--nodes=1",
                                   "--ntasks=1",
                                   "--nodelist=" + host,
                                   "--exact",
                                   "--export=ALL",
                                   "--quit-on-interrupt",
                                   "--job-name=" + process.name,
                                   "--"};
      cmd.insert(cmd.end(), argv.begin(), argv.end());
      argv = std::move(cmd);
    };
    step(process.argv);
    step(process.restart_argv);
    process.env.emplace_back("TF_CONFIG", json_);
    process.status_reports_signal = true;
    process.stop_signal = SIGUSR1; // srun would SIGKILL on SIGTERM
    return process;
  }

  std::string describe() const override {
    return fmt::format("as job steps of Slurm job {} on {} host{}, ports from "
                       "{}",
                       alloc_.job_id, alloc_.hosts.size(),
                       alloc_.hosts.size() == 1 ? "" : "s", port_base_);
  }

private:
  uint16_t port_base_;
  slurm_allocation alloc_;
  std::string srun_;
  cluster_spec spec_;
  std::string json_;
};

} // namespace

std::unique_ptr<node_launcher> make_slurm_launcher(const launcher_options& opts) {
  if (opts.host)
    throw input_error("--host: not with --launcher slurm: every node listens "
                      "on the name of the Slurm host it runs on");
  auto alloc = read_slurm_allocation(process_environment(), slurm_hostnames);
  auto srun = find_on_path("srun");
  if (srun.empty())
    throw input_error("--launcher slurm: srun is not on PATH (Debian: apt-get "
                      "install slurm-client)");
  return std::make_unique<slurm_launcher>(opts.port_base.value_or(8888),
                                          std::move(alloc), std::move(srun));
}

std::unique_ptr<node_launcher>
make_slurm_launcher(const launcher_options& opts, const env_reader& env,
                    const hostlist_expander& expand, std::string srun) {
  return std::make_unique<slurm_launcher>(opts.port_base.value_or(8888),
                                          read_slurm_allocation(env, expand),
                                          std::move(srun));
}

} // namespace actorps
