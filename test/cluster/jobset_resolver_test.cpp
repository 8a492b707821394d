#include "cluster/spec/jobset_resolver.hpp"

#include <map>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "core/error.hpp"

using namespace actorps;

namespace {

using vars = std::map<std::string, std::string>;

env_reader env_of(vars v) {
  return [v = std::move(v)](const std::string& name)
           -> std::optional<std::string> {
    auto i = v.find(name);
    if (i == v.end())
      return std::nullopt;
    return i->second;
  };
}

/// What deploy/k8s/jobset.yaml gives pod `index` of replicated job `job`.
vars pod_env(const std::string& job, uint32_t index) {
  return {{"JOBSET_NAME", "fmnist"},
          {"REPLICATED_JOB_NAME", job},
          {"JOB_INDEX", "0"},
          {"JOB_COMPLETION_INDEX", std::to_string(index)}};
}

std::string message_of(const vars& v, uint32_t ps = 2, uint32_t workers = 2,
                       uint16_t port = 2222) {
  try {
    jobset_cluster_spec(read_jobset_pod(env_of(v)), ps, workers, port);
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("a JobSet pod learns the whole cluster from its own variables",
          "[jobset]") {
  auto spec = jobset_cluster_spec(read_jobset_pod(env_of(pod_env("worker", 1))),
                                  2, 3, 2222);
  REQUIRE(spec.chief.size() == 1);
  CHECK(to_string(spec.chief[0]) == "fmnist-coordinator-0-0.fmnist:2222");
  REQUIRE(spec.ps.size() == 2);
  CHECK(to_string(spec.ps[1]) == "fmnist-ps-0-1.fmnist:2222");
  REQUIRE(spec.worker.size() == 3);
  CHECK(to_string(spec.worker[2]) == "fmnist-worker-0-2.fmnist:2222");
  CHECK(spec.evaluator.empty());
  REQUIRE(spec.task);
  CHECK(spec.task->type == "worker");
  CHECK(spec.task->index == 1);
}

TEST_CASE("every pod of a JobSet sees the same cluster with its own task",
          "[jobset]") {
  auto of = [](const std::string& job, uint32_t i) {
    return jobset_cluster_spec(read_jobset_pod(env_of(pod_env(job, i))), 2, 2,
                               2222);
  };
  auto chief = of("coordinator", 0);
  auto ps1 = of("ps", 1);
  CHECK(chief.ps == ps1.ps);
  CHECK(chief.worker == ps1.worker);
  CHECK(chief.task->type == "chief");
  CHECK(ps1.task->type == "ps");
  CHECK(ps1.task->index == 1);
  // The evaluator has no address, as TensorFlow's evaluator task.
  auto eval = of("evaluator", 0);
  CHECK(eval.evaluator.empty());
  CHECK(eval.task->type == "evaluator");
}

TEST_CASE("a JobSet's subdomain and host pattern are the pod's to set",
          "[jobset]") {
  auto v = pod_env("ps", 0);
  v["JOBSET_SUBDOMAIN"] = "train.ns.svc.cluster.local";
  auto spec = jobset_cluster_spec(read_jobset_pod(env_of(v)), 1, 1, 2222);
  CHECK(spec.ps[0].host == "fmnist-ps-0-0.train.ns.svc.cluster.local");
  v["ACTORPS_HOST_PATTERN"] = "{job}{index}.{jobset}";
  spec = jobset_cluster_spec(read_jobset_pod(env_of(v)), 1, 1, 2222);
  CHECK(spec.chief[0].host == "coordinator0.fmnist");
  CHECK(spec.worker[0].host == "worker0.fmnist");
}

TEST_CASE("an incomplete or wrong JobSet environment is refused naming the "
          "variable",
          "[jobset]") {
  auto without = [](const std::string& name) {
    auto v = pod_env("worker", 0);
    v.erase(name);
    return v;
  };
  CHECK_THAT(message_of(without("JOBSET_NAME")),
             Catch::StartsWith("JOBSET_NAME: not set"));
  CHECK_THAT(message_of(without("REPLICATED_JOB_NAME")),
             Catch::StartsWith("REPLICATED_JOB_NAME: not set"));
  CHECK_THAT(message_of(without("JOB_COMPLETION_INDEX")),
             Catch::StartsWith("JOB_COMPLETION_INDEX: not set"));
  // JOB_INDEX may be left out (0).
  CHECK(message_of(without("JOB_INDEX")).empty());
  auto v = pod_env("trainer", 0);
  CHECK_THAT(message_of(v), Catch::StartsWith("REPLICATED_JOB_NAME: \"trainer\""));
  v = pod_env("worker", 0);
  v["JOB_COMPLETION_INDEX"] = "1x";
  CHECK_THAT(message_of(v), Catch::StartsWith("JOB_COMPLETION_INDEX: \"1x\" is no index"));
  v = pod_env("worker", 0);
  v["JOB_INDEX"] = "1";
  CHECK_THAT(message_of(v), Catch::StartsWith("JOB_INDEX: 1: each role is one"));
  v = pod_env("worker", 2);
  CHECK_THAT(message_of(v),
             Catch::Contains("JOB_COMPLETION_INDEX: 2 in replicated job worker, "
                             "which has 2 pods here (--workers 2)"));
  v = pod_env("worker", 0);
  v["ACTORPS_HOST_PATTERN"] = "{jobset}-{pod}";
  CHECK_THAT(message_of(v), Catch::Contains("unknown field {pod}"));
  v["ACTORPS_HOST_PATTERN"] = "{jobset";
  CHECK_THAT(message_of(v), Catch::Contains("without its"));
  CHECK_THAT(message_of(pod_env("ps", 0), 0), Catch::StartsWith("--ps 0"));
  CHECK_THAT(message_of(pod_env("ps", 0), 1, 0),
             Catch::StartsWith("--workers 0"));
  CHECK_THAT(message_of(pod_env("ps", 0), 1, 1, 0),
             Catch::StartsWith("--port-base 0"));
}

TEST_CASE("a pod that joins a running JobSet is a worker past the JobSet's "
          "own",
          "[jobset]") {
  // deploy/k8s/jobset-join.yaml: an Indexed Job started later whose pods say
  // REPLICATED_JOB_NAME worker; pod 1 of it is worker 2 + 1.
  auto pod = read_jobset_pod(env_of(pod_env("worker", 1)));
  auto spec = jobset_cluster_spec(pod, 2, 2, 2222, true);
  REQUIRE(spec.task);
  CHECK(spec.task->type == "worker");
  CHECK(spec.task->index == 3);
  // The cluster is the JobSet's own: the joining pod is not in it.
  CHECK(spec.worker.size() == 2);
  CHECK(to_string(spec.chief[0]) == "fmnist-coordinator-0-0.fmnist:2222");
  // Pod indices past --workers are what a joining Job has.
  pod = read_jobset_pod(env_of(pod_env("worker", 7)));
  CHECK(jobset_cluster_spec(pod, 2, 2, 2222, true).task->index == 9);
}

TEST_CASE("only a worker pod may join a running JobSet", "[jobset]") {
  for (auto role : {"ps", "coordinator", "evaluator"}) {
    auto pod = read_jobset_pod(env_of(pod_env(role, 0)));
    try {
      jobset_cluster_spec(pod, 2, 2, 2222, true);
      FAIL("a " << role << " pod joined");
    } catch (const input_error& e) {
      CHECK_THAT(e.what(),
                 Catch::StartsWith(std::string{"--join: REPLICATED_JOB_NAME is \""}
                                   + role + "\", but only a worker joins"));
    }
  }
  auto pod = read_jobset_pod(env_of(pod_env("worker", 4000000000u)));
  CHECK_THROWS_WITH(jobset_cluster_spec(pod, 2, 2, 2222, true),
                    Catch::Contains("past --workers 2 is worker 4000000002, "
                                    "more than 1048576"));
}
