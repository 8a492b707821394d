#include "cluster/spec/cluster_resolver.hpp"


#include <fmt/format.h>

#include "cluster/spec/jobset_resolver.hpp"
#include "cluster/spec/slurm_resolver.hpp"
#include "core/error.hpp"

namespace actorps {

namespace {

cluster_spec resolve_tf_config(const resolver_options&) {
  return cluster_spec_from_env("TF_CONFIG");
}

cluster_spec resolve_slurm(const resolver_options& opts) {
  // A step started later has tasks of its own, not the job's: task 0 of it
  // would be taken for the coordinator.
  if (opts.joining)
    throw input_error("--join: not with --cluster-resolver slurm (the tasks "
                      "of the new step are not the job's cluster): give the "
                      "running job's spec with --cluster FILE and the "
                      "worker's --role worker --index N (docs/guide/slurm.md)");
  slurm_resolver_options so;
  so.ps = opts.ps;
  so.port_base = opts.port_base;
  return resolve_slurm_cluster(so, process_environment(), slurm_hostnames);
}

cluster_spec resolve_jobset(const resolver_options& opts) {
  return jobset_cluster_spec(read_jobset_pod(process_environment()), opts.ps,
                             opts.workers, opts.port_base, opts.joining);
}

constexpr cluster_resolver registry[] = {
  {"tf_config", "the TF_CONFIG environment variable (JSON), as Kubeflow's "
                "TFJob sets it",
   false, resolve_tf_config},
  {"slurm", "the Slurm job step this task runs in (srun): task 0 is the "
            "coordinator, the next --ps tasks ps, the rest workers",
   true, resolve_slurm},
  {"jobset", "a Kubernetes JobSet of Indexed Jobs named coordinator, ps, "
             "worker (and evaluator): --ps and --workers pods, each "
             "listening on --port-base at its JobSet host name",
   true, resolve_jobset},
};

std::string join(const std::vector<host_port>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ", ") + to_string(x);
  return out;
}

} // namespace

const cluster_resolver* find_cluster_resolver(const std::string& name) {
  for (auto& r : registry)
    if (name == r.name)
      return &r;
  return nullptr;
}

std::vector<std::string> cluster_resolver_names() {
  std::vector<std::string> names;
  for (auto& r : registry)
    names.emplace_back(r.name);
  return names;
}

std::string describe_cluster(const cluster_spec& spec) {
  auto text = fmt::format("coordinator {}; ps {}; workers {}",
                          join(spec.chief), join(spec.ps), join(spec.worker));
  if (!spec.evaluator.empty())
    text += "; evaluator " + join(spec.evaluator);
  if (spec.task) {
    auto& xs = spec.members(spec.task->type);
    auto role = spec.task->type == "chief" ? std::string{"coordinator"}
                                           : spec.task->type;
    text += fmt::format("; this node: {} {}", role, spec.task->index);
    if (spec.task->index < xs.size())
      text += " at " + to_string(xs[spec.task->index]);
  }
  return text;
}

} // namespace actorps
