#include "cluster/services/checkpointer.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"

#include "checkpoint_fixture.hpp"
#include "cluster/services/fit.hpp"
#include "cluster/services/fit_callbacks.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/job/system_config.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;
using namespace actorps::test;

TEST_CASE("a variables-only snapshot holds the checkpoint's values with the "
          "optimizer state of the new rule at its start",
          "[checkpointer]") {
  job_config cfg;
  auto st = written_by(cfg); // sgd: no slots
  auto next = cfg;
  next.optimizer.type = "adagrad";
  next.optimizer.params["initial_accumulator"] = 0.25;
  auto layout = layout_of(next, images());
  for (uint32_t p = 0; p < next.ps; ++p) {
    auto snap = variables_snapshot_for(layout, st, p, next);
    CHECK(snap.clock == 0);
    CHECK(snap.optimizer_steps == 0);
    REQUIRE(snap.values.values.size() == layout.ps_sizes[p]);
    REQUIRE(snap.slots.size() == 1);
    REQUIRE(snap.slots[0].values.size() == layout.ps_sizes[p]);
    for (auto x : snap.slots[0].values)
      REQUIRE(x == 0.25f);
    for (auto& s : layout.shards_of(p)) {
      INFO("shard " << s.index << " of variable " << s.variable);
      CHECK(snap.values.values[s.ps_offset] == float(s.row_begin));
      CHECK(snap.values.values[s.ps_offset + s.size - 1]
            == float(s.row_begin) + float(s.size - 1) / 1000.0f);
    }
  }
  // The same job's own snapshot keeps the checkpoint's state.
  auto same = snapshot_for(layout_of(cfg, images()), st, 0);
  CHECK(same.clock == 200);
  CHECK(same.optimizer_steps == 200);
}

TEST_CASE("a snapshot for a server without a dense shard carries the dense "
          "rule's slots, empty",
          "[checkpointer]") {
  job_config cfg; // 2 ps
  cfg.model = "sparse_logistic_regression";
  cfg.dataset = "a9a";
  cfg.optimizer.type = "adam";
  auto st = written_by(cfg, sparse());
  auto layout = layout_of(cfg, sparse());
  // The one bias is on one server; the other has no dense region.
  uint32_t empty = layout.ps_sizes[0] == 0 ? 0 : 1;
  REQUIRE(layout.ps_sizes[empty] == 0);
  REQUIRE(layout.ps_sizes[1 - empty] == 1);
  auto snap = snapshot_for(layout, st, empty);
  REQUIRE(snap.slots.size() == 2);
  CHECK(snap.slots[0].values.empty());
  CHECK(snap.slots[1].values.empty());
  CHECK(snapshot_for(layout, st, 1 - empty).slots.at(1).values.size() == 1);
}

TEST_CASE("a variables-only snapshot keeps a table's rows and starts their "
          "slots and step counts afresh",
          "[checkpointer]") {
  job_config cfg;
  cfg.model = "sparse_logistic_regression";
  cfg.dataset = "a9a";
  cfg.table_optimizer.type = "adam";
  auto st = written_by(cfg, sparse());
  auto next = cfg;
  next.table_optimizer.type = "ftrl";
  next.table_optimizer.params["initial_accumulator"] = 0.5;
  auto layout = layout_of(next, sparse());
  size_t tables = 0;
  for (uint32_t p = 0; p < next.ps; ++p) {
    auto snap = variables_snapshot_for(layout, st, p, next);
    for (auto& t : snap.tables) {
      ++tables;
      CHECK(t.keys.keys == std::vector<uint64_t>{3, 5});
      CHECK(t.steps.keys == std::vector<uint64_t>{0, 0});
      CHECK(t.values.values.size() == t.keys.keys.size() * 1);
      REQUIRE(t.slots.size() == 2); // ftrl: accumulator, linear
      for (auto x : t.slots[0].values)
        CHECK(x == 0.5f);
      for (auto x : t.slots[1].values)
        CHECK(x == 0.0f);
    }
  }
  CHECK(tables == size_t(std::count_if(layout.shards.begin(),
                                      layout.shards.end(),
                                      [](const shard_info& s) {
                                        return s.kind == variable_kind::table;
                                      })));
  CHECK(tables > 0);
}

namespace {

/// A cluster of parameter servers only, for what a checkpoint asks of it.
class servers_only : public cluster {
public:
  servers_only(caf::actor_system& sys, placement layout,
               std::vector<ps_actor> servers)
    : sys_(sys), layout_(std::move(layout)), servers_(std::move(servers)) {
  }

  cluster_coordinator& coordinator() override {
    throw std::logic_error("servers_only has no coordinator");
  }
  const placement& layout() const override {
    return layout_;
  }
  std::vector<ps_stats> stats() override {
    return {};
  }
  std::vector<server_route> routes() const override {
    std::vector<server_route> out;
    for (uint32_t p = 0; p < servers_.size(); ++p)
      out.push_back(server_route{servers_[p], 0, p});
    return out;
  }
  const std::vector<worker_actor>& workers() const override {
    return workers_;
  }
  caf::actor_system& system() override {
    return sys_;
  }
  void inject(const fault_spec&) override {
  }
  void resync_replicas() override {
  }

private:
  caf::actor_system& sys_;
  placement layout_;
  std::vector<ps_actor> servers_;
  std::vector<worker_actor> workers_;
};

} // namespace

TEST_CASE("a checkpoint interrupted by a lost server is skipped at a pause "
          "and an epoch end, nothing written, and raised when asked for",
          "[checkpointer]") {
  system_config sys_cfg{1};
  caf::actor_system sys{sys_cfg};
  job_config cfg;
  cfg.ps = 1;
  auto layout = layout_of(cfg, images());
  // A server that is gone before the checkpoint asks it (as when it is
  // SIGKILLed during a save: its down message answers the question).
  auto ps = spawn_ps(sys, ps_options{});
  {
    caf::scoped_actor self{sys};
    self->monitor(ps);
    caf::anon_send_exit(ps, caf::exit_reason::kill);
    bool down = false;
    self->receive([&](caf::down_msg&) { down = true; },
                  caf::after(std::chrono::seconds(5)) >> [] {});
    REQUIRE(down);
  }
  servers_only cl{sys, layout, {ps}};
  CHECK_THROWS_AS(capture_checkpoint(cl, cfg, training_progress{}),
                  checkpoint_interrupted);
  temp_dir dir{"ckpt-skip"};
  cfg.checkpoint_dir = dir.path().string();
  cfg.checkpoint_every_steps = 10;
  checkpoint_callback ckpt{cfg};
  fit_state st;
  st.cl = &cl;
  st.closures_per_epoch = 100;
  st.progress.global_step = 10;
  st.progress.step_in_epoch = 10;
  CHECK_NOTHROW(ckpt.on_pause(st));
  epoch_metrics m;
  CHECK_NOTHROW(ckpt.on_epoch_end(st, m));
  CHECK(std::filesystem::is_empty(dir.path()));
  // Asked for directly (a stop's checkpoint): the failure is the caller's.
  CHECK_THROWS_AS(ckpt.save(st), checkpoint_interrupted);
}
