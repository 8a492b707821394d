#include "fuzz/fuzz_system.hpp"

#include "cluster/topology/local_cluster.hpp"

namespace actorps::fuzz {

namespace {

struct fuzz_env {
  system_config cfg{1};
  caf::actor_system sys;

  static system_config& prep(system_config& c) {
    c.set("scheduler.policy", caf::atom("testing"));
    return c;
  }

  fuzz_env() : sys(prep(cfg)) {
    // nop
  }
};

fuzz_env& env() {
  static auto* e = new fuzz_env;
  return *e;
}

} // namespace

caf::actor_system& fuzz_system() {
  return env().sys;
}

caf::scheduler::test_coordinator& sched() {
  return dynamic_cast<caf::scheduler::test_coordinator&>(
    env().sys.scheduler());
}

} // namespace actorps::fuzz
