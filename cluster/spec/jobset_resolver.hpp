#pragma once

// The cluster of a Kubernetes JobSet (jobset.sigs.k8s.io) whose replicated
// jobs are one Indexed Job per role: `coordinator` (1 pod), `ps` (--ps
// pods), `worker` (--workers pods) and, optionally, `evaluator` (1 pod, a
// sidecar with no address, as TensorFlow's evaluator task). Kubernetes gives
// each pod of an Indexed Job its index (JOB_COMPLETION_INDEX); the JobSet's
// name, the replicated job's name and the job's index come from the pod's
// labels through the downward API (deploy/k8s/jobset.yaml); every pod gets a
// stable DNS name, by default `<jobset>-<job>-<job index>-<pod index>.<subdomain>`
// (JobSet's own pattern, its subdomain the JobSet's name). Each node then
// listens on its own name at one port, the same in every pod.

#include <cstdint>
#include <string>

#include "cluster/spec/cluster_spec.hpp"
#include "cluster/spec/slurm_resolver.hpp" // env_reader

namespace actorps {

/// What one pod of a JobSet knows about itself (its environment).
struct jobset_pod {
  std::string jobset;     ///< JOBSET_NAME (label jobset.sigs.k8s.io/jobset-name)
  std::string job;        ///< REPLICATED_JOB_NAME (label .../replicatedjob-name)
  uint32_t job_index = 0; ///< JOB_INDEX (label .../job-index); 0 if unset
  uint32_t index = 0;     ///< JOB_COMPLETION_INDEX (set by Kubernetes)
  /// JOBSET_SUBDOMAIN: the pods' DNS subdomain (the JobSet's
  /// network.subdomain; default: the JobSet's name).
  std::string subdomain;
  /// ACTORPS_HOST_PATTERN: a pod's host name with the fields {jobset},
  /// {job}, {job_index}, {index} and {subdomain}; default
  /// "{jobset}-{job}-{job_index}-{index}.{subdomain}".
  std::string host_pattern;
};

/// Reads a pod's variables.
/// @throws input_error naming the variable: JOBSET_NAME, REPLICATED_JOB_NAME
///         or JOB_COMPLETION_INDEX unset or empty, an index that is no
///         number, a replicated job other than coordinator, ps, worker or
///         evaluator, a JOB_INDEX other than 0 (one Job per role:
///         `replicas: 1`, the pods counted by `parallelism`), or a host
///         pattern with an unknown field.
jobset_pod read_jobset_pod(const env_reader& env);

/// The host name of pod `index` of replicated job `job`, by `pod`'s pattern
/// (its JobSet, subdomain and pattern; job index 0).
std::string jobset_host(const jobset_pod& pod, const std::string& job,
                        uint32_t index);

/// The cluster of a JobSet with `ps` parameter servers and `workers`
/// workers, each pod listening on `port`; the task is `pod`'s.
///
/// With `joining` the pod is a worker that joins the running job (`actorps
/// node --join`, a pod of a Job started later, deploy/k8s/jobset-join.yaml):
/// its replicated job must be `worker` and its task is worker `workers +
/// JOB_COMPLETION_INDEX`, past the JobSet's own (the cluster lists only
/// those; the joining pod listens nowhere, so its host name is not used).
/// @throws input_error `--ps N: ...` / `--workers N: ...` for 0, `--port-base
///         0`, a pod index beyond its role's count (naming
///         JOB_COMPLETION_INDEX and the count), or, joining, a role other
///         than worker or an index past 2^20.
cluster_spec jobset_cluster_spec(const jobset_pod& pod, uint32_t ps,
                                 uint32_t workers, uint16_t port,
                                 bool joining = false);

} // namespace actorps
