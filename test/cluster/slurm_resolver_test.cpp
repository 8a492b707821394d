#include "cluster/spec/slurm_resolver.hpp"

#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cluster/spec/cluster_resolver.hpp"
#include "cluster/spec/hostlist.hpp"
#include "core/error.hpp"

using namespace actorps;

namespace {

using vars = std::map<std::string, std::string>;

/// An environment made of `v` only.
env_reader fake_env(vars v) {
  return [v = std::move(v)](const std::string& name)
           -> std::optional<std::string> {
    auto i = v.find(name);
    if (i == v.end())
      return std::nullopt;
    return i->second;
  };
}

std::vector<std::string> our_parser(const std::string& text) {
  return expand_hostlist(text);
}

/// What srun sets for task `task` of `srun -n 5` over node01 (3 tasks) and
/// node02 (2 tasks).
vars step_of_five(uint32_t task) {
  auto local = task < 3 ? task : task - 3;
  return {{"SLURM_JOB_ID", "4711"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", std::to_string(task)},
          {"SLURM_NTASKS", "5"},
          {"SLURM_STEP_NUM_TASKS", "5"},
          {"SLURM_STEP_NODELIST", "node[01-02]"},
          {"SLURM_STEP_TASKS_PER_NODE", "3,2"},
          {"SLURMD_NODENAME", task < 3 ? "node01" : "node02"},
          {"SLURM_LOCALID", std::to_string(local)}};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const input_error& e) {
    return e.what();
  }
  return "(no error)";
}

cluster_spec resolve(const vars& v, uint32_t ps = 2,
                     uint16_t port_base = 8888) {
  return resolve_slurm_cluster({ps, port_base}, fake_env(v), our_parser);
}

} // namespace

TEST_CASE("block distribution fills each host before the next, local "
          "indexes counting per host",
          "[slurm]") {
  auto places = place_slurm_tasks({"a", "b", "c"}, {2, 1, 3}, "");
  std::vector<std::string> where;
  for (auto& p : places)
    where.push_back(p.host + "/" + std::to_string(p.host_index) + "/"
                    + std::to_string(p.local_index));
  CHECK(where
        == std::vector<std::string>{"a/0/0", "a/0/1", "b/1/0", "c/2/0",
                                    "c/2/1", "c/2/2"});
  CHECK(place_slurm_tasks({"a", "b", "c"}, {2, 1, 3}, "block").size() == 6);
}

TEST_CASE("cyclic distribution deals tasks round robin over the hosts that "
          "have some left",
          "[slurm]") {
  auto places = place_slurm_tasks({"a", "b", "c"}, {3, 1, 2}, "cyclic");
  std::vector<std::string> where;
  for (auto& p : places)
    where.push_back(p.host + std::to_string(p.local_index));
  CHECK(where
        == std::vector<std::string>{"a0", "b0", "c0", "a1", "c1", "a2"});
}

TEST_CASE("a distribution Slurm's variables do not describe is refused",
          "[slurm]") {
  CHECK_THAT(error_of([] { place_slurm_tasks({"a"}, {2}, "plane"); }),
             Catch::Contains("SLURM_DISTRIBUTION: \"plane\""));
  CHECK_THAT(error_of([] { place_slurm_tasks({"a", "b"}, {2}, ""); }),
             Catch::Contains("2 hosts with task counts for 1"));
}

TEST_CASE("task 0 is the coordinator, the next ps tasks are parameter "
          "servers and the rest workers, on port base plus local index",
          "[slurm]") {
  auto places = place_slurm_tasks({"node01", "node02"}, {3, 2}, "");
  auto spec = slurm_cluster_spec(places, 2, 9000);
  CHECK(to_string(spec.chief.at(0)) == "node01:9000");
  REQUIRE(spec.ps.size() == 2);
  CHECK(to_string(spec.ps[0]) == "node01:9001");
  CHECK(to_string(spec.ps[1]) == "node01:9002");
  REQUIRE(spec.worker.size() == 2);
  CHECK(to_string(spec.worker[0]) == "node02:9000");
  CHECK(to_string(spec.worker[1]) == "node02:9001");
  CHECK_FALSE(spec.task);
  // One ps: three workers.
  auto one = slurm_cluster_spec(places, 1, 9000);
  CHECK(one.ps.size() == 1);
  CHECK(one.worker.size() == 3);
}

TEST_CASE("a ps count that leaves no worker, or ports past 65535, are "
          "refused naming the flag",
          "[slurm]") {
  auto five = place_slurm_tasks({"n1"}, {5}, "");
  CHECK_THAT(error_of([&] { slurm_cluster_spec(five, 0, 8888); }),
             Catch::StartsWith("--ps 0: a job needs at least one"));
  CHECK_THAT(error_of([&] { slurm_cluster_spec(five, 4, 8888); }),
             Catch::StartsWith("--ps 4: the Slurm step has 5 tasks")
               && Catch::Contains("give --ps at most 3"));
  CHECK_THAT(error_of([&] { slurm_cluster_spec(five, 5, 8888); }),
             Catch::Contains("at most 3"));
  auto two = place_slurm_tasks({"n1"}, {2}, "");
  CHECK_THAT(error_of([&] { slurm_cluster_spec(two, 1, 8888); }),
             Catch::Contains("needs at least 3 (a coordinator, a ps and a "
                             "worker)"));
  CHECK_THAT(error_of([&] { slurm_cluster_spec(five, 2, 65533); }),
             Catch::StartsWith("--port-base 65533: task 3 is task 3 on n1, "
                               "and port 65533 + 3 passes 65535"));
  CHECK_NOTHROW(slurm_cluster_spec(five, 2, 65531));
}

TEST_CASE("every task of a step derives the same cluster and its own role",
          "[slurm]") {
  std::vector<cluster_spec> specs;
  for (uint32_t t = 0; t < 5; ++t)
    specs.push_back(resolve(step_of_five(t)));
  auto expected_task = [](uint32_t t) {
    if (t == 0)
      return task_id{"chief", 0};
    if (t <= 2)
      return task_id{"ps", t - 1};
    return task_id{"worker", t - 3};
  };
  for (uint32_t t = 0; t < 5; ++t) {
    INFO("task " << t);
    REQUIRE(specs[t].task);
    CHECK(*specs[t].task == expected_task(t));
    auto a = specs[t];
    auto b = specs[0];
    a.task.reset();
    b.task.reset();
    CHECK(a == b);
  }
  CHECK(describe_cluster(specs[4])
        == "coordinator node01:8888; ps node01:8889, node01:8890; workers "
           "node02:8888, node02:8889; this node: worker 1 at node02:8889");
}

TEST_CASE("the step's own task counts win over the allocation's", "[slurm]") {
  auto v = step_of_five(0);
  v["SLURM_TASKS_PER_NODE"] = "4,4";
  v["SLURM_NTASKS"] = "8";
  auto spec = resolve(v);
  CHECK(spec.worker.size() == 2);
  // Without the step's, the allocation's are used.
  v.erase("SLURM_STEP_TASKS_PER_NODE");
  v.erase("SLURM_STEP_NUM_TASKS");
  CHECK(resolve(v, 2).worker.size() == 5);
}

TEST_CASE("bad Slurm environments are refused with the variable and a way "
          "out",
          "[slurm]") {
  CHECK_THAT(error_of([] { resolve({}); }),
             Catch::Contains("not inside a Slurm job (SLURM_PROCID is not "
                             "set)")
               && Catch::Contains("srun -n 5 actorps node --cluster-resolver "
                                  "slurm"));
  // A batch script: SLURM_PROCID=0, but no step.
  vars batch = {{"SLURM_JOB_ID", "12"},
                {"SLURM_PROCID", "0"},
                {"SLURM_NTASKS", "5"},
                {"SLURM_TASKS_PER_NODE", "5"},
                {"SLURM_JOB_NODELIST", "localhost"}};
  CHECK_THAT(error_of([&] { resolve(batch); }),
             Catch::Contains("in Slurm job 12 but not in a job step "
                             "(SLURM_STEP_NODELIST is not set)"));
  auto v = step_of_five(1);
  v["SLURM_STEP_NODELIST"] = "node[01-02";
  CHECK_THAT(error_of([&] { resolve(v); }),
             Catch::StartsWith("SLURM_STEP_NODELIST: bad Slurm host list "
                               "\"node[01-02\": '[' without ']'"));
  v = step_of_five(1);
  v["SLURM_STEP_TASKS_PER_NODE"] = "3(x2)";
  CHECK_THAT(error_of([&] { resolve(v); }),
             Catch::Contains("SLURM_STEP_TASKS_PER_NODE \"3(x2)\" adds up to "
                             "6 tasks, but SLURM_STEP_NUM_TASKS is 5"));
  v = step_of_five(1);
  v["SLURM_STEP_TASKS_PER_NODE"] = "5";
  CHECK_THAT(error_of([&] { resolve(v); }),
             Catch::Contains("lists 2 hosts, but SLURM_STEP_TASKS_PER_NODE "
                             "\"5\" gives task counts for 1"));
  v = step_of_five(1);
  v["SLURM_PROCID"] = "one";
  CHECK_THAT(error_of([&] { resolve(v); }),
             Catch::StartsWith("SLURM_PROCID: \"one\" is not a whole number"));
  v = step_of_five(1);
  v["SLURM_PROCID"] = "5";
  CHECK_THAT(error_of([&] { resolve(v); }),
             Catch::StartsWith("SLURM_PROCID: task 5 of a step of 5 tasks"));
  CHECK_THAT(error_of([] { resolve(step_of_five(2), 4); }),
             Catch::StartsWith("--ps 4: the Slurm step has 5 tasks"));
}

TEST_CASE("a task Slurm placed elsewhere than the distribution says is "
          "refused",
          "[slurm]") {
  // srun -m cyclic without SLURM_DISTRIBUTION reaching the task: task 1 runs
  // on node02, where block placement does not put it.
  auto v = step_of_five(1);
  v["SLURMD_NODENAME"] = "node02";
  v["SLURM_LOCALID"] = "0";
  CHECK_THAT(error_of([&] { resolve(v); }),
             Catch::Contains("Slurm started task 1 on node02 as its task 0 "
                             "there")
               && Catch::Contains("puts it on node01 as task 1"));
  // With the distribution named, the same place is right.
  v["SLURM_DISTRIBUTION"] = "cyclic:block";
  auto spec = resolve(v);
  CHECK(*spec.task == task_id{"ps", 0});
  CHECK(to_string(spec.ps.at(0)) == "node02:8888");
}

TEST_CASE("host names expand the same with scontrol or without it",
          "[slurm]") {
  // Either path (scontrol where Slurm is configured, the parser elsewhere)
  // must give Slurm's answer.
  CHECK(slurm_hostnames("node[01-03,07],gpu5")
        == std::vector<std::string>{"node01", "node02", "node03", "node07",
                                    "gpu5"});
  CHECK_THROWS_AS(slurm_hostnames("n[3-1]"), input_error);
}

TEST_CASE("the resolver registry names tf_config first, slurm and jobset",
          "[slurm]") {
  CHECK(cluster_resolver_names()
        == std::vector<std::string>{"tf_config", "slurm", "jobset"});
  REQUIRE(find_cluster_resolver("jobset") != nullptr);
  CHECK(find_cluster_resolver("jobset")->assigns_roles);
  REQUIRE(find_cluster_resolver("slurm") != nullptr);
  CHECK(find_cluster_resolver("slurm")->assigns_roles);
  CHECK_FALSE(find_cluster_resolver("tf_config")->assigns_roles);
  CHECK(find_cluster_resolver("kubernetes") == nullptr);
}
