#include "core/cpu_policy.hpp"

#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "core/error.hpp"

using namespace actorps;

namespace {

/// Runs `f` on a thread of its own: policies are per thread, and the test
/// process's other threads must keep theirs.
template <class F>
void on_own_thread(F f) {
  std::thread t{f};
  t.join();
}

} // namespace

TEST_CASE("cpu policies parse by name, others are refused naming the field",
          "[core][cpu_policy]") {
  CHECK(parse_cpu_policy("batch", "x") == cpu_policy::batch);
  CHECK(parse_cpu_policy("normal", "x") == cpu_policy::normal);
  CHECK_THROWS_MATCHES(
    parse_cpu_policy("fifo", "--cpu-policy"), input_error,
    Catch::Message(
      "--cpu-policy: \"fifo\": must be \"batch\" or \"normal\""));
  CHECK_THROWS_AS(parse_cpu_policy("", "x"), input_error);
}

TEST_CASE("the batch policy applies to the calling thread and the threads it "
          "starts, normal leaves the policy as it was",
          "[core][cpu_policy]") {
  auto before = current_cpu_policy();
  std::string mine, child, normal;
  std::string why = "not run";
  on_own_thread([&] {
    why = apply_cpu_policy(cpu_policy::batch);
    mine = current_cpu_policy();
    on_own_thread([&] { child = current_cpu_policy(); });
  });
  on_own_thread([&] {
    apply_cpu_policy(cpu_policy::normal);
    normal = current_cpu_policy();
  });
  CHECK(why.empty());
  CHECK(mine == "SCHED_BATCH");
  CHECK(child == "SCHED_BATCH");
  CHECK(normal == before);
  // The test's own thread was not touched.
  CHECK(current_cpu_policy() == before);
}
