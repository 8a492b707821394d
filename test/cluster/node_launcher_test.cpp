#include "cluster/launch/node_launcher.hpp"

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <signal.h>

#include <catch2/catch.hpp>

#include "cluster/launch/slurm_launcher.hpp"
#include "cluster/spec/hostlist.hpp"
#include "core/error.hpp"

using namespace actorps;

namespace {

using vars = std::map<std::string, std::string>;

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

/// `sbatch -n 6` over two hosts, 4 and 2 tasks.
vars allocation() {
  return {{"SLURM_JOB_ID", "31"},
          {"SLURM_JOB_NODELIST", "gpu[1-2]"},
          {"SLURM_TASKS_PER_NODE", "4,2"}};
}

std::unique_ptr<node_launcher> slurm(const vars& v, uint16_t port_base = 7000) {
  launcher_options opts;
  opts.port_base = port_base;
  return make_slurm_launcher(opts, fake_env(v), our_parser, "/usr/bin/srun");
}

/// The command of a node before a launcher wraps it.
child_spec node_command(const std::string& name, const std::string& role,
                        uint32_t index) {
  child_spec c;
  c.name = name;
  c.argv = {"/bin/actorps", "node",   "--role", role, "--index",
            std::to_string(index), "--epochs", "3"};
  c.env = {{"ACTORPS_LAUNCHED", "1"}};
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const input_error& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST_CASE("the slurm launcher puts the nodes on the allocation's task slots "
          "with the resolver's roles",
          "[launch][slurm]") {
  auto l = slurm(allocation());
  auto spec = l->place(2, 2, 0);
  CHECK(to_string(spec.chief.at(0)) == "gpu1:7000");
  CHECK(to_string(spec.ps.at(0)) == "gpu1:7001");
  CHECK(to_string(spec.ps.at(1)) == "gpu1:7002");
  CHECK(to_string(spec.worker.at(0)) == "gpu1:7003");
  CHECK(to_string(spec.worker.at(1)) == "gpu2:7000");
  // A second attempt moves every port past the first attempt's.
  auto again = l->place(2, 2, 1);
  CHECK(to_string(again.chief.at(0)) == "gpu1:7004");
  CHECK(to_string(again.worker.at(1)) == "gpu2:7004");
  CHECK_THAT(l->describe(), Catch::Contains("Slurm job 31 on 2 hosts"));
}

TEST_CASE("the slurm launcher runs each node as a one-task job step on its "
          "host, the spec in TF_CONFIG",
          "[launch][slurm]") {
  auto l = slurm(allocation());
  auto spec = l->place(2, 2, 0);
  auto node = node_command("worker1", "worker", 1);
  node.restart_argv = node.argv;
  node.restart_argv.push_back("--resume");
  auto c = l->wrap({"worker", 1}, node);
  std::vector<std::string> expected{
    "/usr/bin/srun",       "--nodes=1",      "--ntasks=1",
    "--nodelist=gpu2",     "--exact",        "--export=ALL",
    "--quit-on-interrupt", "--job-name=worker1", "--"};
  expected.insert(expected.end(), node.argv.begin(), node.argv.end());
  CHECK(c.argv == expected);
  REQUIRE(c.restart_argv.size() == expected.size() + 1);
  CHECK(c.restart_argv.front() == "/usr/bin/srun");
  CHECK(c.restart_argv.back() == "--resume");
  CHECK(c.status_reports_signal);
  CHECK(c.stop_signal == SIGUSR1);
  CHECK(c.name == "worker1");
  bool has_spec = false;
  for (auto& [name, value] : c.env)
    if (name == "TF_CONFIG")
      has_spec = parse_cluster_spec(value, "TF_CONFIG") == spec;
  CHECK(has_spec);
  auto chief = l->wrap({"chief", 0}, node_command("coordinator",
                                                   "coordinator", 0));
  CHECK(chief.argv[3] == "--nodelist=gpu1");
  CHECK(chief.restart_argv.empty());
}

TEST_CASE("the slurm launcher refuses a job larger than the allocation and "
          "a start outside one",
          "[launch][slurm]") {
  auto l = slurm(allocation());
  CHECK_THAT(error_of([&] { l->place(2, 4, 0); }),
             Catch::Contains("the job has 7 nodes (a coordinator, 2 ps, 4 "
                             "workers), but Slurm job 31 has 6 tasks")
               && Catch::Contains("sbatch -n 7"));
  CHECK_THAT(error_of([] { slurm({}); }),
             Catch::Contains("not inside a Slurm allocation (SLURM_JOB_ID is "
                             "not set)"));
  auto v = allocation();
  v.erase("SLURM_TASKS_PER_NODE");
  CHECK_THAT(error_of([&] { slurm(v); }),
             Catch::Contains("SLURM_TASKS_PER_NODE is not set"));
  v = allocation();
  v["SLURM_JOB_NODELIST"] = "gpu[2-1]";
  CHECK_THAT(error_of([&] { slurm(v); }),
             Catch::StartsWith("SLURM_JOB_NODELIST: bad Slurm host list"));
  CHECK_THAT(error_of([&] { slurm(allocation(), 65533)->place(2, 2, 0); }),
             Catch::StartsWith("--port-base 65533: task 3"));
}

TEST_CASE("launchers are found by name and refuse settings they do not take",
          "[launch]") {
  CHECK(node_launcher_names() == std::vector<std::string>{"local", "slurm"});
  CHECK_THAT(error_of([] { make_node_launcher("pbs", {}); }),
             Catch::Contains("unknown launcher \"pbs\" (known: local, slurm)"));
  launcher_options with_port;
  with_port.port_base = 9000;
  CHECK_THAT(error_of([&] { make_node_launcher("local", with_port); }),
             Catch::StartsWith("--port-base: the local launcher picks free "
                               "ports"));
  launcher_options with_host;
  with_host.host = "10.0.0.1";
  CHECK_THAT(error_of([&] { make_node_launcher("slurm", with_host); }),
             Catch::StartsWith("--host: not with --launcher slurm"));
}

TEST_CASE("the local launcher writes the spec to a file it names after "
          "--index",
          "[launch]") {
  auto l = make_node_launcher("local", {});
  auto spec = l->place(1, 2, 0);
  CHECK(spec.chief.at(0).host == "127.0.0.1");
  CHECK(spec.worker.size() == 2);
  auto c = l->wrap({"worker", 0}, node_command("worker0", "worker", 0));
  REQUIRE(c.argv.size() == 10);
  CHECK(c.argv[5] == "0");
  CHECK(c.argv[6] == "--cluster");
  CHECK(c.argv[8] == "--epochs");
  CHECK_FALSE(c.status_reports_signal);
  CHECK(c.stop_signal == SIGTERM);
  std::ifstream in{c.argv[7]};
  std::stringstream text;
  text << in.rdbuf();
  CHECK(parse_cluster_spec(text.str(), c.argv[7]) == spec);
  CHECK_THAT(l->describe(), Catch::StartsWith("on 127.0.0.1; cluster spec "));
}
