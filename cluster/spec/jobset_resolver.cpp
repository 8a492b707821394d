#include "cluster/spec/jobset_resolver.hpp"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

constexpr const char* default_host_pattern
  = "{jobset}-{job}-{job_index}-{index}.{subdomain}";

/// The names the replicated jobs must have: one per role.
constexpr const char* jobset_roles[] = {"coordinator", "ps", "worker",
                                        "evaluator"};

std::string required(const env_reader& env, const char* name,
                     const char* what) {
  auto v = env(name);
  if (!v || v->empty())
    throw input_error(fmt::format("{}: not set; {} (see deploy/k8s/jobset.yaml)",
                                  name, what));
  return *v;
}

uint32_t index_of(const std::string& text, const char* name) {
  uint32_t out = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc{} || end != text.data() + text.size())
    throw input_error(fmt::format("{}: \"{}\" is no index (a number from 0 "
                                  "to {})",
                                  name, text,
                                  std::numeric_limits<uint32_t>::max()));
  return out;
}

/// Fills `pattern`'s fields; throws for an unknown one.
std::string expand(const std::string& pattern, const jobset_pod& pod,
                   const std::string& job, uint32_t index) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '{') {
      out += pattern[i];
      continue;
    }
    auto close = pattern.find('}', i);
    if (close == std::string::npos)
      throw input_error(fmt::format("ACTORPS_HOST_PATTERN: \"{}\": a '{{' "
                                    "without its '}}'",
                                    pattern));
    auto field = pattern.substr(i + 1, close - i - 1);
    if (field == "jobset")
      out += pod.jobset;
    else if (field == "job")
      out += job;
    else if (field == "job_index")
      out += "0";
    else if (field == "index")
      out += std::to_string(index);
    else if (field == "subdomain")
      out += pod.subdomain;
    else
      throw input_error(fmt::format("ACTORPS_HOST_PATTERN: \"{}\": unknown "
                                    "field {{{}}} (known: {{jobset}}, {{job}}, "
                                    "{{job_index}}, {{index}}, {{subdomain}})",
                                    pattern, field));
    i = close;
  }
  return out;
}

} // namespace

jobset_pod read_jobset_pod(const env_reader& env) {
  jobset_pod pod;
  pod.jobset = required(env, "JOBSET_NAME",
                        "give it the label jobset.sigs.k8s.io/jobset-name "
                        "through the downward API");
  pod.job = required(env, "REPLICATED_JOB_NAME",
                     "give it the label jobset.sigs.k8s.io/replicatedjob-name "
                     "through the downward API");
  bool known = false;
  for (auto* r : jobset_roles)
    known = known || pod.job == r;
  if (!known)
    throw input_error(fmt::format("REPLICATED_JOB_NAME: \"{}\" names no role: "
                                  "name the replicated jobs coordinator, ps, "
                                  "worker (and evaluator)",
                                  pod.job));
  if (auto v = env("JOB_INDEX"); v && !v->empty())
    pod.job_index = index_of(*v, "JOB_INDEX");
  if (pod.job_index != 0)
    throw input_error(fmt::format("JOB_INDEX: {}: each role is one Indexed "
                                  "Job (replicas: 1, its pods counted by "
                                  "parallelism and completions)",
                                  pod.job_index));
  pod.index = index_of(required(env, "JOB_COMPLETION_INDEX",
                                "Kubernetes sets it in the pods of an Indexed "
                                "Job (completionMode: Indexed)"),
                       "JOB_COMPLETION_INDEX");
  auto sub = env("JOBSET_SUBDOMAIN");
  pod.subdomain = sub && !sub->empty() ? *sub : pod.jobset;
  auto pattern = env("ACTORPS_HOST_PATTERN");
  pod.host_pattern = pattern && !pattern->empty() ? *pattern
                                                  : default_host_pattern;
  expand(pod.host_pattern, pod, pod.job, pod.index); // checks the fields
  return pod;
}

std::string jobset_host(const jobset_pod& pod, const std::string& job,
                        uint32_t index) {
  return expand(pod.host_pattern, pod, job, index);
}

cluster_spec jobset_cluster_spec(const jobset_pod& pod, uint32_t ps,
                                 uint32_t workers, uint16_t port,
                                 bool joining) {
  if (ps == 0)
    throw input_error("--ps 0: a job needs at least one parameter server");
  if (workers == 0)
    throw input_error("--workers 0: a job needs at least one worker");
  if (port == 0)
    throw input_error("--port-base 0: must be a port in [1, 65535]");
  cluster_spec spec;
  spec.chief.push_back({jobset_host(pod, "coordinator", 0), port});
  for (uint32_t i = 0; i < ps; ++i)
    spec.ps.push_back({jobset_host(pod, "ps", i), port});
  for (uint32_t i = 0; i < workers; ++i)
    spec.worker.push_back({jobset_host(pod, "worker", i), port});
  if (joining) {
    if (pod.job != "worker")
      throw input_error(fmt::format("--join: REPLICATED_JOB_NAME is \"{}\", "
                                    "but only a worker joins a running job "
                                    "(REPLICATED_JOB_NAME worker)",
                                    pod.job));
    // The index --index takes at most, past the JobSet's workers.
    constexpr uint64_t most = uint64_t{1} << 20;
    if (uint64_t{workers} + pod.index > most)
      throw input_error(fmt::format("--join: JOB_COMPLETION_INDEX {} past "
                                    "--workers {} is worker {}, more than "
                                    "{}",
                                    pod.index, workers,
                                    uint64_t{workers} + pod.index, most));
    validate(spec, fmt::format("JobSet {} (a worker joining)", pod.jobset));
    spec.task = task_id{"worker", workers + pod.index};
    return spec;
  }
  auto count = pod.job == "coordinator" ? 1u
               : pod.job == "ps"        ? ps
               : pod.job == "worker"    ? workers
                                        : 1u;
  if (pod.index >= count)
    throw input_error(fmt::format(
      "JOB_COMPLETION_INDEX: {} in replicated job {}, which has {} pod{} "
      "here ({}): the JobSet's parallelism and the job's counts differ",
      pod.index, pod.job, count, count == 1 ? "" : "s",
      pod.job == "ps"       ? fmt::format("--ps {}", ps)
      : pod.job == "worker" ? fmt::format("--workers {}", workers)
                            : std::string{"one"}));
  spec.task = task_id{pod.job == "coordinator" ? "chief" : pod.job, pod.index};
  validate(spec, fmt::format("JobSet {} ({} {})", pod.jobset, pod.job,
                             pod.index));
  return spec;
}

} // namespace actorps
