#include "cluster/simulator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/after.hpp"
#include "caf/scheduler/test_coordinator.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/cluster_coordinator.hpp"
#include "actors/dispatcher_actor.hpp"
#include "actors/worker_actor.hpp"
#include "cluster/evaluation.hpp"
#include "cluster/local_cluster.hpp"
#include "cluster/sim_link.hpp"
#include "cluster/sim_trace.hpp"
#include "core/data_registry.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/process.hpp"
#include "core/staleness_histogram.hpp"
#include "models/model.hpp"
#include "models/registry.hpp"
#include "models/step_function.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

/// The deterministic actor system of a simulation.
struct sim_env {
  system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  caf::scoped_actor self;

  static system_config& prep(system_config& c) {
    c.set("scheduler.policy", caf::atom("testing"));
    return c;
  }

  /// Every actor of the simulation: stopped by the destructor, also when
  /// the simulation throws (a test scheduler has no threads, and the actor
  /// system's destructor would wait for live actors forever).
  std::vector<caf::actor> actors;
  /// Checked after every step (the replay's mismatch).
  const sim_trace* trace = nullptr;

  sim_env()
    : cfg(1),
      sys(prep(cfg)),
      sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())),
      self(sys) {
    // nop
  }

  ~sim_env() {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::kill);
    sched.run();
  }

  template <class Handle>
  Handle keep(Handle x) {
    actors.push_back(caf::actor_cast<caf::actor>(x));
    return x;
  }

  /// Runs messages, and moves virtual time to the next timeout whenever
  /// none is left, until `done()`.
  /// @throws runtime_failure if nothing is left to run before that, or a
  ///         replay differs.
  template <class Predicate>
  void run_until(Predicate done, const char* waiting_for) {
    for (;;) {
      sched.run();
      if (trace != nullptr && !trace->mismatch().empty())
        throw runtime_failure(trace->mismatch());
      if (done())
        return;
      if (!sched.trigger_timeout())
        throw runtime_failure(fmt::format(
          "simulate: stalled waiting for {}: no message and no timer left",
          waiting_for));
    }
  }

  /// Sends `xs` to `dest`, runs the system and returns its reply (a T).
  /// @throws runtime_failure "`what`: <error>" if it refuses or does not
  ///         answer before the system is idle.
  template <class T, class Handle, class... Ts>
  T ask(const Handle& dest, const std::string& what, Ts&&... xs) {
    self->send(dest, std::forward<Ts>(xs)...);
    sched.run();
    T result{};
    std::string failure;
    self->receive([&](T& x) { result = std::move(x); },
                  [&](caf::error& err) { failure = sys.render(err); },
                  caf::after(std::chrono::seconds(0)) >> [&] {
                    failure = "no answer";
                  });
    if (!failure.empty())
      throw runtime_failure(fmt::format("simulate: {}: {}", what, failure));
    return result;
  }
};

/// The median wall time of a few real steps of the model on this machine.
sim_time measure_step(const job_config& cfg, const model& net,
                      const placement& layout, batch_source& data) {
  auto step = find_step_function(train_step_name);
  std::vector<float> params(layout.model_size);
  net.initialize(params.data(), cfg.init_seed);
  std::vector<float> grad(layout.model_size);
  auto ws = net.make_workspace(data.batch_size());
  example_batch batch;
  std::vector<table_lookup> tables;
  for (auto v : layout.tables) {
    table_lookup t;
    t.variable = v;
    t.dim = layout.variables[v].cols;
    tables.push_back(std::move(t));
  }
  std::vector<sim_time> times;
  for (int i = 0; i < 7; ++i) {
    data.next(batch);
    for (auto& t : tables)
      t.occurrences.clear();
    net.collect_keys(batch, tables);
    for (auto& t : tables) {
      t.deduplicate();
      std::fill(t.rows.begin(), t.rows.end(), 0.01f);
    }
    std::fill(grad.begin(), grad.end(), 0.0f);
    model_inputs in{params.data(), &tables};
    auto t0 = steady_clock::now();
    step->compute(net, in, batch, grad.data(), *ws);
    times.push_back(static_cast<sim_time>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(steady_clock::now()
                                                           - t0)
        .count()));
  }
  std::nth_element(times.begin(), times.begin() + 3, times.end());
  return times[3];
}

void check_supported(const job_config& cfg) {
  if (cfg.replicas > 0)
    throw input_error("simulate: cluster.replicas > 0 is not simulated yet "
                      "(run it with actorps train or launch)");
  if (!cfg.faults.empty())
    throw input_error("simulate: faults are not simulated yet (run them with "
                      "actorps train or launch)");
  if (!cfg.checkpoint_dir.empty())
    throw input_error("simulate: checkpoints are not written under "
                      "simulation (leave checkpoint_dir empty)");
}

} // namespace

sim_report simulate(const job_config& cfg, const sim_options& opts) {
  check_supported(cfg);
  auto wall0 = steady_clock::now();
  auto provider = open_dataset(cfg);
  auto net = make_model(cfg, provider->schema());
  auto layout = std::make_shared<const placement>(job_placement(cfg, *net));
  auto steps = effective_steps_per_epoch(cfg, provider->train_rows());
  auto test_data = provider->test_set();
  auto W = cfg.workers;
  auto P = cfg.ps;
  sim_report report;
  report.workers = W;
  report.ps = P;
  report.network = to_string(opts.network);
  std::vector<std::shared_ptr<batch_source>> data;
  for (uint32_t w = 0; w < W; ++w)
    data.push_back(provider->train_source(input_context{W, w}, cfg.batch_size,
                                          cfg.shuffle_seed));
  auto compute = opts.compute;
  if (compute.type == compute_spec::kind::measured) {
    // Timed on a source of its own, so that the workers' batches stay as
    // they would be.
    auto probe = provider->train_source(input_context{W, 0}, cfg.batch_size,
                                        cfg.shuffle_seed);
    compute.mean_ns = measure_step(cfg, *net, *layout, *probe);
  }
  report.step_ns = compute.mean_ns;
  sim_trace trace{opts.record, opts.replay};
  sim_env env;
  env.trace = &trace;
  auto world = std::make_shared<sim_world>(
    network_model{opts.network, W + P}, compute_model{compute, W, opts.seed},
    trace, W, P);
  world->origin = env.sys.clock().now();
  // -- the cluster ------------------------------------------------------------
  std::vector<ps_actor> servers;
  std::vector<ps_actor> links;
  for (uint32_t p = 0; p < P; ++p) {
    auto ps = env.keep(spawn_ps(env.sys, ps_options_of(cfg, p)));
    for (auto& req : shard_requests(*layout, p, cfg, *net))
      env.ask<uint64_t>(ps, fmt::format("creating {} on ps {}", req.variable,
                                        p),
                        create_atom_v, std::move(req));
    servers.push_back(ps);
    links.push_back(env.keep(spawn_sim_link(env.sys, ps, p, world)));
  }
  std::vector<worker_actor> workers;
  for (uint32_t w = 0; w < W; ++w) {
    worker_options wo;
    wo.index = w;
    wo.net = net;
    wo.data = data[w];
    wo.layout = layout;
    wo.servers = links;
    wo.push_format = push_format_of(cfg, *layout);
    wo.pull_format = pull_format_of(cfg);
    workers.push_back(env.keep(spawn_worker(env.sys, std::move(wo))));
  }
  auto dispatcher = env.keep(spawn_dispatcher(env.sys, workers, nullptr, 0,
                                     std::chrono::milliseconds(0), links,
                                     ps_recovery{}));
  auto puller = [&](uint32_t g, pull_request req) {
    req.view = 0;
    return env.ask<pull_reply>(servers.at(g),
                               fmt::format("reading group {}", g), pull_atom_v,
                               std::move(req));
  };
  // -- epochs -----------------------------------------------------------------
  {
    cluster_coordinator coord{env.sys, dispatcher,
                              steps * uint64_t{W} + 1};
    for (uint64_t e = 1; e <= cfg.epochs; ++e) {
      std::vector<remote_value> values;
      for (uint64_t i = 0; i < steps * W; ++i)
        values.push_back(coord.schedule(train_step_name));
      env.run_until(
        [&] {
          return std::all_of(values.begin(), values.end(),
                             [](const remote_value& v) { return v.done(); });
        },
        "the closures of an epoch");
      sim_epoch ep;
      ep.epoch = e;
      ep.virtual_s = static_cast<double>(world->now(env.sys)) / 1e9;
      for (auto& v : values) {
        auto r = v.fetch(); // throws the closure's error
        ep.train_loss += r.loss;
        report.samples += r.samples;
      }
      ep.train_loss /= static_cast<double>(std::max<size_t>(values.size(), 1));
      ep.metrics = evaluate_on_servers(*layout, puller, *net, *test_data);
      std::string metrics;
      for (auto& [name, value] : ep.metrics)
        metrics += fmt::format(", {} {:.4f}", name, value);
      log::info("simulate", -1, "epoch {}/{} at {:.3f} s virtual: train "
                                "loss {:.4f}{}",
                e, cfg.epochs, ep.virtual_s, ep.train_loss, metrics);
      report.epochs.push_back(std::move(ep));
    }
  }
  // -- the report -------------------------------------------------------------
  auto end = world->now(env.sys);
  report.virtual_s = static_cast<double>(end) / 1e9;
  report.samples_per_s = report.virtual_s > 0
                           ? static_cast<double>(report.samples)
                               / report.virtual_s
                           : 0;
  for (uint32_t p = 0; p < P; ++p) {
    sim_server_load load;
    load.pulls = world->pulls[p];
    load.pushes = world->pushes[p];
    load.bytes_in = world->net.bytes_in()[W + p];
    load.bytes_out = world->net.bytes_out()[W + p];
    auto busiest = std::max(load.bytes_in, load.bytes_out);
    load.utilization = end > 0 ? static_cast<double>(
                                   world->net.transmission(busiest))
                                   / static_cast<double>(end)
                               : 0;
    report.servers.push_back(load);
    auto s = env.ask<ps_stats>(servers[p], fmt::format("counters of ps {}", p),
                               stats_atom_v, p);
    if (report.staleness_buckets.size() < s.staleness_buckets.size())
      report.staleness_buckets.resize(s.staleness_buckets.size(), 0);
    for (size_t b = 0; b < s.staleness_buckets.size(); ++b)
      report.staleness_buckets[b] += s.staleness_buckets[b];
  }
  for (uint32_t w = 0; w < W; ++w)
    report.idle.push_back(end > 0 ? 1.0
                                      - static_cast<double>(
                                          world->compute_ns[w])
                                          / static_cast<double>(end)
                                  : 0);
  auto final_values = pull_dense(*layout, puller);
  trace.add(final_values.data(), final_values.size() * sizeof(float));
  report.events = trace.events();
  report.digest = trace.finish();
  report.wall_s = std::chrono::duration<double>(steady_clock::now() - wall0)
                    .count();
  report.peak_rss_bytes = peak_rss_bytes();
  return report;
}

} // namespace actorps
