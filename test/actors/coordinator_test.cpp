#include <catch2/catch.hpp>

#include <random>

#include "caf/actor_system.hpp"
#include "caf/scheduler/test_coordinator.hpp"
#include "caf/typed_event_based_actor.hpp"
#include "caf/typed_response_promise.hpp"

#include "actors/cluster_coordinator.hpp"
#include "cluster/local_cluster.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "models/mlp.hpp"

using namespace actorps;

namespace {

/// A small random classification problem: 4 features, 3 classes.
std::shared_ptr<const dataset> tiny_dataset(uint64_t rows) {
  auto ds = std::make_shared<dataset>();
  ds->rows = rows;
  ds->dim = 4;
  ds->classes = 3;
  std::mt19937 rng{5};
  std::uniform_real_distribution<float> u{0.0f, 1.0f};
  for (uint64_t i = 0; i < rows * 4; ++i)
    ds->features.push_back(u(rng));
  for (uint64_t i = 0; i < rows; ++i)
    ds->labels.push_back(static_cast<int32_t>(i % 3));
  return ds;
}

job_config tiny_job(uint32_t workers, uint32_t ps) {
  job_config cfg;
  cfg.layers = {4, 5, 3};
  cfg.workers = workers;
  cfg.ps = ps;
  cfg.batch_size = 8;
  cfg.optimizer.type = optimizer_config::kind::sgd;
  cfg.optimizer.learning_rate = 0.1f;
  cfg.threads = 2;
  return cfg;
}

} // namespace

TEST_CASE("a scheduled closure returns its loss through remote_value",
          "[actors][coordinator]") {
  auto cfg = tiny_job(1, 2);
  auto net = std::make_shared<mlp>(cfg.layers);
  auto data = tiny_dataset(64);
  dataset_fn fn = [&](const input_context& ctx) {
    return batch_iterator{data, ctx, cfg.batch_size, cfg.shuffle_seed};
  };
  // The loss the first closure must report: the first batch of worker 0 on
  // the initial values.
  std::vector<float> params(net->num_parameters());
  std::vector<float> grad(params.size());
  net->initialize(params.data(), cfg.init_seed);
  auto it = fn(input_context{1, 0});
  std::vector<float> x(cfg.batch_size * 4);
  std::vector<int32_t> y(cfg.batch_size);
  it.next(x.data(), y.data());
  auto ws = net->make_workspace(cfg.batch_size);
  auto expected = net->loss_and_gradient(
    params.data(), batch_view{x.data(), y.data(), cfg.batch_size}, grad.data(),
    *ws);
  system_config sys_cfg{cfg.threads};
  caf::actor_system sys{sys_cfg};
  local_cluster cluster{sys, cfg, net, fn};
  auto rv = cluster.coordinator().schedule(train_step_name);
  auto r = rv.fetch();
  CHECK(rv.done());
  CHECK(r.loss == Approx(expected).epsilon(1e-5));
  CHECK(r.samples == cfg.batch_size);
  CHECK(r.closure == rv.closure_id());
  // The push reached both servers: the model moved by -lr * grad.
  auto after = cluster.pull_model();
  for (size_t i = 0; i < params.size(); ++i)
    REQUIRE(after[i] == Approx(params[i] - 0.1f * grad[i]).margin(1e-6));
  auto stats = cluster.stats();
  REQUIRE(stats.size() == 2);
  CHECK(stats[0].clock == 1);
  CHECK(stats[1].clock == 1);
}

TEST_CASE("join waits for every closure and losses fall on a learnable task",
          "[actors][coordinator]") {
  auto cfg = tiny_job(2, 2);
  auto net = std::make_shared<mlp>(cfg.layers);
  // Labels that a linear model can learn: the arg-max of the first 3 features.
  auto ds = std::make_shared<dataset>(*tiny_dataset(240));
  for (uint64_t i = 0; i < ds->rows; ++i) {
    auto* row = ds->features.data() + i * 4;
    ds->labels[i] = static_cast<int32_t>(std::max_element(row, row + 3) - row);
  }
  std::shared_ptr<const dataset> data = ds;
  dataset_fn fn = [&](const input_context& ctx) {
    return batch_iterator{data, ctx, cfg.batch_size, cfg.shuffle_seed};
  };
  cfg.optimizer.learning_rate = 0.5f;
  system_config sys_cfg{cfg.threads};
  caf::actor_system sys{sys_cfg};
  local_cluster cluster{sys, cfg, net, fn};
  auto& coord = cluster.coordinator();
  std::vector<remote_value> rvs;
  for (int i = 0; i < 400; ++i)
    rvs.push_back(coord.schedule(train_step_name));
  coord.join();
  CHECK(coord.done());
  double first = 0;
  double last = 0;
  for (int i = 0; i < 40; ++i) {
    REQUIRE(rvs[i].done());
    first += rvs[i].fetch().loss;
    last += rvs[rvs.size() - 1 - i].fetch().loss;
  }
  CHECK(last < 0.8 * first);
  auto counts = coord.counts();
  CHECK(counts.scheduled == 400);
  CHECK(counts.finished == 400);
  uint64_t pushes = 0;
  for (auto& s : cluster.stats())
    pushes += s.clock;
  CHECK(pushes == 800); // every closure pushed to both servers
}

TEST_CASE("a failing closure surfaces its error on the next join, then "
          "the coordinator accepts new closures",
          "[actors][coordinator]") {
  auto cfg = tiny_job(1, 1);
  auto net = std::make_shared<mlp>(cfg.layers);
  auto data = tiny_dataset(32);
  dataset_fn fn = [&](const input_context& ctx) {
    return batch_iterator{data, ctx, cfg.batch_size, cfg.shuffle_seed};
  };
  system_config sys_cfg{cfg.threads};
  caf::actor_system sys{sys_cfg};
  local_cluster cluster{sys, cfg, net, fn};
  auto& coord = cluster.coordinator();
  auto bad = coord.schedule("no_such_step");
  CHECK_THROWS_WITH(coord.join(), Catch::Contains("unknown_function")
                                    && Catch::Contains("no_such_step"));
  CHECK_THROWS_AS(bad.fetch(), runtime_failure);
  // The error was raised once; new closures run.
  auto good = coord.schedule(train_step_name);
  coord.join();
  CHECK(good.fetch().samples == cfg.batch_size);
  auto counts = coord.counts();
  CHECK(counts.failed == 1);
  CHECK(counts.finished == 1);
}

namespace {

/// A stand-in worker: answers every closure at once with `loss`, or, with
/// `crash`, dies while holding the first one (as a crashing step would).
worker_actor::behavior_type fake_worker(worker_actor::pointer self,
                                        uint32_t index, bool crash) {
  return {
    [=](run_atom, closure_request& req) -> caf::result<step_result> {
      if (crash) {
        auto rp = self->make_response_promise<step_result>();
        self->quit(caf::exit_reason::kill);
        return rp;
      }
      step_result r;
      r.closure = req.id;
      r.worker = index;
      r.loss = 1.0;
      return r;
    },
    [=](seek_atom, uint64_t, uint64_t) { return true; },
    [=](freeze_atom, uint64_t) {},
    [=](replace_atom, uint32_t, caf::strong_actor_ptr&) {},
    [=](chaos_atom, double, double, uint64_t) {},
    [=](retry_atom, uint64_t, uint32_t, bool) {},
  };
}

} // namespace

TEST_CASE("a closure whose worker dies runs on another, and the worker is "
          "restarted after its back-off (deterministic scheduler)",
          "[actors][coordinator][faults]") {
  system_config cfg;
  cfg.set("scheduler.policy", caf::atom("testing"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(
    sys.scheduler());
  auto w0 = sys.spawn(fake_worker, 0u, true);
  auto w1 = sys.spawn(fake_worker, 1u, false);
  std::vector<uint32_t> respawned;
  std::vector<worker_actor> extra;
  worker_respawn respawn = [&](uint32_t w, uint32_t incarnation) {
    respawned.push_back(w);
    CHECK(incarnation == 1);
    extra.push_back(sys.spawn(fake_worker, w, false));
    return extra.back();
  };
  auto dispatcher = spawn_coordinator(sys, {w0, w1}, respawn, 1);
  sched.run();
  {
    cluster_coordinator coord{sys, dispatcher, 16};
    auto a = coord.schedule(train_step_name);
    auto b = coord.schedule(train_step_name);
    sched.run();
    // Worker 0 died holding one closure; worker 1 ran both.
    CHECK(a.done());
    CHECK(b.done());
    auto counts = coord.counts();
    CHECK(counts.finished == 2);
    CHECK(counts.reexecuted == 1);
    CHECK(respawned.empty()); // the restart waits for its back-off
    sched.trigger_timeouts();
    sched.run();
    REQUIRE(respawned == std::vector<uint32_t>{0});
    // The restarted worker takes closures again.
    auto c = coord.schedule(train_step_name);
    auto d = coord.schedule(train_step_name);
    sched.run();
    CHECK(c.done());
    CHECK(d.done());
    CHECK(coord.counts().finished == 4);
  }
  sched.run();
  caf::anon_send_exit(dispatcher, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(w1, caf::exit_reason::user_shutdown);
  for (auto& w : extra)
    caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  sched.run();
}
