#include "core/cpu_affinity.hpp"

#include <set>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "core/error.hpp"

using namespace actorps;

TEST_CASE("cpu affinity modes parse by name, others are refused naming the "
          "field",
          "[core][cpu_affinity]") {
  CHECK(parse_cpu_affinity("auto", "x") == cpu_affinity::automatic);
  CHECK(parse_cpu_affinity("none", "x") == cpu_affinity::none);
  CHECK_THROWS_MATCHES(
    parse_cpu_affinity("cores", "--cpu-affinity"), input_error,
    Catch::Message("--cpu-affinity: \"cores\": must be \"auto\" or \"none\""));
}

TEST_CASE("cpu lists parse as cpuset(7) writes them and print back with "
          "ranges",
          "[core][cpu_affinity]") {
  CHECK(parse_cpu_list("0", "x") == std::vector<int>{0});
  CHECK(parse_cpu_list("0-3,8", "x") == std::vector<int>{0, 1, 2, 3, 8});
  CHECK(parse_cpu_list("8,2-3,3", "x") == std::vector<int>{2, 3, 8});
  CHECK(parse_cpu_list("4095", "x") == std::vector<int>{4095});
  CHECK(format_cpu_list({0, 1, 2, 5}) == "0-2,5");
  CHECK(format_cpu_list({3}) == "3");
  CHECK(format_cpu_list({1, 3, 4}) == "1,3-4");
  CHECK(format_cpu_list({}).empty());
  for (auto text : {"0-2,5", "7", "0-1,4-5,9"})
    CHECK(format_cpu_list(parse_cpu_list(text, "x")) == text);
}

TEST_CASE("a malformed cpu list is refused naming the flag and the part",
          "[core][cpu_affinity]") {
  using Catch::Contains;
  CHECK_THROWS_MATCHES(parse_cpu_list("", "--cpu-set"), input_error,
                       Catch::Message("--cpu-set: an empty CPU list"));
  CHECK_THROWS_MATCHES(parse_cpu_list("0,a", "--cpu-set"), input_error,
                       Catch::Message("--cpu-set: \"0,a\": \"a\" is not a CPU "
                                      "number (a list looks like \"0-3,8\")"));
  CHECK_THROWS_MATCHES(parse_cpu_list("3-1", "--cpu-set"), input_error,
                       Catch::Message("--cpu-set: \"3-1\": the range \"3-1\" "
                                      "goes backwards"));
  CHECK_THROWS_WITH(parse_cpu_list("4096", "--cpu-set"),
                    Contains("CPU 4096 is beyond"));
  for (auto bad : {"0,", ",0", "-1", "0-", "1--2", " 1", "99999999999"})
    CHECK_THROWS_AS(parse_cpu_list(bad, "--cpu-set"), input_error);
}

TEST_CASE("more nodes than cpus: a ps and the worker of its index share a "
          "cpu, and every cpu is used",
          "[core][cpu_affinity]") {
  using v = std::vector<int>;
  auto a = assign_cpus({0, 1}, 2, 2);
  REQUIRE(a.ps.size() == 2);
  REQUIRE(a.workers.size() == 2);
  CHECK(a.ps[0] == v{0});
  CHECK(a.workers[0] == v{0});
  CHECK(a.ps[1] == v{1});
  CHECK(a.workers[1] == v{1});
  // The CPUs a cgroup left, not numbered from 0.
  auto b = assign_cpus({4, 6}, 2, 2);
  CHECK(b.ps[0] == v{4});
  CHECK(b.workers[1] == v{6});
  // Uneven: 1 ps and 3 workers on 2 cpus (order ps0 w0 w1 w2).
  auto c = assign_cpus({0, 1}, 1, 3);
  CHECK(c.ps[0] == v{0});
  CHECK(c.workers[0] == v{0});
  CHECK(c.workers[1] == v{1});
  CHECK(c.workers[2] == v{1});
  // One cpu: everyone on it.
  auto d = assign_cpus({3}, 2, 3);
  for (auto* group : {&d.ps, &d.workers})
    for (auto& node : *group)
      CHECK(node == v{3});
}

TEST_CASE("as many cpus as nodes or more: disjoint blocks that cover them",
          "[core][cpu_affinity]") {
  using v = std::vector<int>;
  std::vector<int> sixteen;
  for (int i = 0; i < 16; ++i)
    sixteen.push_back(i);
  auto a = assign_cpus(sixteen, 2, 2);
  CHECK(a.ps[0] == v{0, 1, 2, 3});
  CHECK(a.workers[0] == v{4, 5, 6, 7});
  CHECK(a.ps[1] == v{8, 9, 10, 11});
  CHECK(a.workers[1] == v{12, 13, 14, 15});
  // 3 nodes on 8 cpus: blocks of 2 or 3, disjoint, all 8 used.
  auto b = assign_cpus({0, 1, 2, 3, 4, 5, 6, 7}, 1, 2);
  std::multiset<int> used;
  for (auto* group : {&b.ps, &b.workers})
    for (auto& node : *group) {
      CHECK(node.size() >= 2);
      CHECK(node.size() <= 3);
      used.insert(node.begin(), node.end());
    }
  CHECK(used == std::multiset<int>{0, 1, 2, 3, 4, 5, 6, 7});
  // No cpus known: nothing assigned.
  auto c = assign_cpus({}, 2, 2);
  CHECK(c.ps[0].empty());
}

TEST_CASE("a cpu set applies to the calling thread and the threads it "
          "starts, a cpu outside the allowed ones is refused and changes "
          "nothing",
          "[core][cpu_affinity]") {
  auto allowed = allowed_cpus();
  REQUIRE_FALSE(allowed.empty());
  std::vector<int> mine, child, after_refusal;
  std::string why = "not run", refused;
  // On a thread of its own: the test process's other threads keep theirs.
  std::thread t{[&] {
    why = apply_cpu_set({allowed.back()});
    mine = allowed_cpus();
    std::thread inner{[&] { child = allowed_cpus(); }};
    inner.join();
    refused = apply_cpu_set({4095});
    after_refusal = allowed_cpus();
  }};
  t.join();
  CHECK(why.empty());
  CHECK(mine == std::vector<int>{allowed.back()});
  CHECK(child == std::vector<int>{allowed.back()});
  CHECK_THAT(refused, Catch::Contains("sched_setaffinity(4095)"));
  CHECK(after_refusal == std::vector<int>{allowed.back()});
  CHECK(apply_cpu_set({}) == "an empty CPU set");
  CHECK(allowed_cpus() == allowed); // this thread untouched
}
