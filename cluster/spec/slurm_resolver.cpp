#include "cluster/spec/slurm_resolver.hpp"

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "cluster/spec/hostlist.hpp"
#include "cluster/spec/subprocess.hpp"
#include "core/error.hpp"

namespace actorps {

namespace {

/// How long `scontrol show hostnames` may take (it only reads the local
/// configuration; a configless cluster fetches it from slurmctld first).
constexpr std::chrono::seconds scontrol_timeout{10};

/// How to start a step, for messages.
constexpr const char* srun_example =
  "e.g. srun -n 5 actorps node --cluster-resolver slurm --ps 2";

/// `text` without leading and trailing whitespace.
std::string trimmed(const std::string& text) {
  auto b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return {};
  auto e = text.find_last_not_of(" \t\r\n");
  return text.substr(b, e - b + 1);
}

/// The value of `name` as a whole number in [0, 2^31).
uint32_t env_number(const std::string& name, const std::string& value) {
  if (value.empty() || value.size() > 10
      || value.find_first_not_of("0123456789") != std::string::npos)
    throw input_error(fmt::format("{}: \"{}\" is not a whole number", name,
                                  value));
  auto x = std::strtoull(value.c_str(), nullptr, 10);
  if (x >= (uint64_t{1} << 31))
    throw input_error(fmt::format("{}: {} is out of range", name, value));
  return static_cast<uint32_t>(x);
}

/// Runs `parse` on the value of variable `name`, prefixing its errors with
/// the variable's name.
template <class F>
auto parse_variable(const std::string& name, const std::string& value,
                    F parse) {
  try {
    return parse(value);
  } catch (const input_error& e) {
    throw input_error(fmt::format("{}: {}", name, e.what()));
  }
}

/// Names counts that do not fit `hosts`; nothing if they do.
void check_lengths(const std::vector<std::string>& hosts,
                   const std::vector<uint32_t>& counts,
                   const std::string& hosts_var,
                   const std::string& counts_var) {
  if (hosts.size() != counts.size())
    throw input_error(fmt::format("{} lists {} hosts, but {} gives task "
                                  "counts for {}",
                                  hosts_var, hosts.size(), counts_var,
                                  counts.size()));
}

} // namespace

env_reader process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    auto v = std::getenv(name.c_str());
    if (v == nullptr)
      return std::nullopt;
    return std::string{v};
  };
}

std::vector<std::string> slurm_hostnames(const std::string& text) {
  // scontrol would read a leading '-' as an option.
  if (text.empty() || text.front() == '-')
    return expand_hostlist(text);
  auto out = run_program({"scontrol", "show", "hostnames", text},
                         scontrol_timeout);
  if (!out.started || out.timed_out || out.status != 0)
    return expand_hostlist(text); // no scontrol, or no configuration here
  // Slurm 22.05 exits 0 for an invalid list, saying so on stdout.
  if (out.output.find("Invalid hostlist") != std::string::npos
      || out.output.find("error:") != std::string::npos)
    throw input_error(fmt::format("bad Slurm host list \"{}\": scontrol "
                                  "show hostnames says: {}",
                                  text, trimmed(out.output)));
  std::vector<std::string> names;
  size_t begin = 0;
  while (begin < out.output.size()) {
    auto nl = out.output.find('\n', begin);
    auto line = trimmed(out.output.substr(begin, nl - begin));
    // Slurm 22.05 reads an unclosed '[' loosely ("n[1-2" gives "n]").
    if (line.find_first_of("[], \t") != std::string::npos)
      throw input_error(fmt::format("bad Slurm host list \"{}\": scontrol "
                                    "show hostnames gives \"{}\", which is "
                                    "no host name",
                                    text, line));
    if (!line.empty())
      names.push_back(line);
    if (nl == std::string::npos)
      break;
    begin = nl + 1;
  }
  if (names.empty())
    throw input_error(fmt::format("bad Slurm host list \"{}\": scontrol "
                                  "show hostnames printed no host",
                                  text));
  return names;
}

std::vector<slurm_task_place>
place_slurm_tasks(const std::vector<std::string>& hosts,
                  const std::vector<uint32_t>& tasks_per_host,
                  const std::string& distribution) {
  if (hosts.size() != tasks_per_host.size())
    throw input_error(fmt::format("a Slurm step of {} hosts with task counts "
                                  "for {}",
                                  hosts.size(), tasks_per_host.size()));
  uint64_t total = 0;
  for (auto c : tasks_per_host)
    total += c;
  if (total > max_hostlist_size)
    throw input_error(fmt::format("the Slurm step has {} tasks, more than "
                                  "the {} supported",
                                  total, max_hostlist_size));
  std::vector<slurm_task_place> places;
  places.reserve(total);
  if (distribution.empty() || distribution == "block") {
    for (uint32_t h = 0; h < hosts.size(); ++h)
      for (uint32_t k = 0; k < tasks_per_host[h]; ++k)
        places.push_back({hosts[h], h, k});
  } else if (distribution == "cyclic") {
    std::vector<uint32_t> given(hosts.size(), 0);
    while (places.size() < total)
      for (uint32_t h = 0; h < hosts.size(); ++h)
        if (given[h] < tasks_per_host[h])
          places.push_back({hosts[h], h, given[h]++});
  } else {
    throw input_error(fmt::format("SLURM_DISTRIBUTION: \"{}\" places tasks "
                                  "in a way Slurm's variables do not "
                                  "describe; start the step with srun -m "
                                  "block (the default) or -m cyclic",
                                  distribution));
  }
  return places;
}

cluster_spec slurm_cluster_spec(const std::vector<slurm_task_place>& tasks,
                                uint32_t ps, uint16_t port_base) {
  auto n = tasks.size();
  if (ps == 0)
    throw input_error("--ps 0: a job needs at least one parameter server");
  if (n < 3)
    throw input_error(fmt::format("--ps {}: the Slurm step has {} task{}, "
                                  "but a job needs at least 3 (a "
                                  "coordinator, a ps and a worker); start "
                                  "{} tasks, e.g. srun -n {}",
                                  ps, n, n == 1 ? "" : "s", ps + 2, ps + 2));
  if (ps > n - 2)
    throw input_error(fmt::format("--ps {}: the Slurm step has {} tasks; "
                                  "task 0 is the coordinator, and {} ps "
                                  "leave no task for a worker: give --ps at "
                                  "most {}, or start more tasks (srun -n {})",
                                  ps, n, ps, n - 2, ps + 2));
  if (port_base == 0)
    throw input_error("--port-base 0: must be a port in [1, 65535]");
  cluster_spec spec;
  for (size_t t = 0; t < n; ++t) {
    auto port = uint32_t{port_base} + tasks[t].local_index;
    if (port > 65535)
      throw input_error(fmt::format("--port-base {}: task {} is task {} on "
                                    "{}, and port {} + {} passes 65535",
                                    port_base, t, tasks[t].local_index,
                                    tasks[t].host, port_base,
                                    tasks[t].local_index));
    host_port address{tasks[t].host, static_cast<uint16_t>(port)};
    if (t == 0)
      spec.chief.push_back(address);
    else if (t <= ps)
      spec.ps.push_back(address);
    else
      spec.worker.push_back(address);
  }
  return spec;
}

slurm_step read_slurm_step(const env_reader& env,
                           const hostlist_expander& expand) {
  auto procid = env("SLURM_PROCID");
  if (!procid)
    throw input_error(fmt::format("--cluster-resolver slurm: not inside a "
                                  "Slurm job (SLURM_PROCID is not set); "
                                  "start the nodes with srun, {}",
                                  srun_example));
  slurm_step step;
  step.job_id = env("SLURM_JOB_ID").value_or("?");
  auto nodelist = env("SLURM_STEP_NODELIST");
  if (!nodelist)
    throw input_error(fmt::format("--cluster-resolver slurm: in Slurm job {} "
                                  "but not in a job step (SLURM_STEP_NODELIST "
                                  "is not set): start the nodes with srun in "
                                  "the batch script or allocation, {}",
                                  step.job_id, srun_example));
  step.step_id = env("SLURM_STEP_ID").value_or("");
  step.task = env_number("SLURM_PROCID", *procid);
  auto tasks_var = env("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS"
                                               : "SLURM_NTASKS";
  auto tasks = env(tasks_var);
  if (!tasks)
    throw input_error("--cluster-resolver slurm: neither SLURM_STEP_NUM_TASKS "
                      "nor SLURM_NTASKS is set");
  step.tasks = env_number(tasks_var, *tasks);
  auto per_node_var = env("SLURM_STEP_TASKS_PER_NODE")
                        ? "SLURM_STEP_TASKS_PER_NODE"
                        : "SLURM_TASKS_PER_NODE";
  auto per_node = env(per_node_var);
  if (!per_node)
    throw input_error("--cluster-resolver slurm: neither "
                      "SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is "
                      "set");
  step.hosts = parse_variable("SLURM_STEP_NODELIST", *nodelist, expand);
  step.tasks_per_host = parse_variable(per_node_var, *per_node,
                                       [](const std::string& v) {
                                         return expand_tasks_per_node(v);
                                       });
  check_lengths(step.hosts, step.tasks_per_host,
                fmt::format("SLURM_STEP_NODELIST \"{}\"", *nodelist),
                fmt::format("{} \"{}\"", per_node_var, *per_node));
  uint64_t sum = 0;
  for (auto c : step.tasks_per_host)
    sum += c;
  if (sum != step.tasks)
    throw input_error(fmt::format("{} \"{}\" adds up to {} tasks, but {} is "
                                  "{}",
                                  per_node_var, *per_node, sum, tasks_var,
                                  step.tasks));
  if (step.task >= step.tasks)
    throw input_error(fmt::format("SLURM_PROCID: task {} of a step of {} "
                                  "tasks",
                                  step.task, step.tasks));
  if (auto d = env("SLURM_DISTRIBUTION"))
    step.distribution = d->substr(0, d->find_first_of(":,"));
  step.node_name = env("SLURMD_NODENAME");
  if (auto l = env("SLURM_LOCALID"))
    step.local_index = env_number("SLURM_LOCALID", *l);
  return step;
}

slurm_allocation read_slurm_allocation(const env_reader& env,
                                       const hostlist_expander& expand) {
  auto job = env("SLURM_JOB_ID");
  if (!job)
    throw input_error("--launcher slurm: not inside a Slurm allocation "
                      "(SLURM_JOB_ID is not set); run it in a batch script "
                      "(sbatch -n 5 ...) or an allocation (salloc -n 5)");
  slurm_allocation a;
  a.job_id = *job;
  auto nodes = env("SLURM_JOB_NODELIST");
  auto tasks = env("SLURM_TASKS_PER_NODE");
  if (!nodes || !tasks)
    throw input_error(fmt::format("--launcher slurm: in Slurm job {}, but {} "
                                  "is not set",
                                  a.job_id,
                                  !nodes ? "SLURM_JOB_NODELIST"
                                         : "SLURM_TASKS_PER_NODE"));
  a.hosts = parse_variable("SLURM_JOB_NODELIST", *nodes, expand);
  a.tasks_per_host = parse_variable("SLURM_TASKS_PER_NODE", *tasks,
                                    [](const std::string& v) {
                                      return expand_tasks_per_node(v);
                                    });
  check_lengths(a.hosts, a.tasks_per_host,
                fmt::format("SLURM_JOB_NODELIST \"{}\"", *nodes),
                fmt::format("SLURM_TASKS_PER_NODE \"{}\"", *tasks));
  return a;
}

cluster_spec resolve_slurm_cluster(const slurm_resolver_options& opts,
                                   const env_reader& env,
                                   const hostlist_expander& expand) {
  auto step = read_slurm_step(env, expand);
  auto places = place_slurm_tasks(step.hosts, step.tasks_per_host,
                                  step.distribution);
  auto& me = places.at(step.task);
  bool other_host = step.node_name && *step.node_name != me.host;
  bool other_slot = step.local_index && *step.local_index != me.local_index;
  if (other_host || other_slot)
    throw input_error(fmt::format(
      "--cluster-resolver slurm: Slurm started task {} on {} as its task {} "
      "there (SLURMD_NODENAME, SLURM_LOCALID), but the {} distribution of the "
      "step's hosts and task counts puts it on {} as task {}; start the step "
      "with srun -m block (the default) or -m cyclic",
      step.task, step.node_name.value_or(me.host),
      step.local_index.value_or(me.local_index),
      step.distribution.empty() ? "block" : step.distribution, me.host,
      me.local_index));
  auto spec = slurm_cluster_spec(places, opts.ps, opts.port_base);
  if (step.task == 0)
    spec.task = task_id{"chief", 0};
  else if (step.task <= opts.ps)
    spec.task = task_id{"ps", step.task - 1};
  else
    spec.task = task_id{"worker", step.task - 1 - opts.ps};
  validate(spec, fmt::format("Slurm job {} step {}", step.job_id,
                             step.step_id.empty() ? "?" : step.step_id));
  return spec;
}

} // namespace actorps
