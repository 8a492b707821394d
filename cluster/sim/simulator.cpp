#include "cluster/sim/simulator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "actors/cluster_coordinator.hpp"
#include "cluster/job/evaluation.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/sim/sim_cluster.hpp"
#include "cluster/sim/sim_env.hpp"
#include "cluster/sim/sim_link.hpp"
#include "cluster/sim/sim_timing.hpp"
#include "cluster/sim/sim_trace.hpp"
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

} // namespace

sim_report simulate(const job_config& job, const sim_options& opts) {
  auto wall0 = steady_clock::now();
  const job_config* job_cfg = &job; // the stand-in's with --timing-only
  const auto& cfg = job;
  if (groups_of(cfg) != cfg.ps)
    throw input_error(fmt::format("{}: cluster.groups {}: simulate places one "
                                  "group on each of the {} ps (use 0)",
                                  cfg.source, cfg.groups, cfg.ps));
  auto provider = open_dataset(cfg);
  auto net = make_model(cfg, provider->schema());
  auto layout = std::make_shared<const placement>(job_placement(cfg, *net));
  auto steps = effective_steps_per_epoch(cfg, provider->train_rows());
  auto test_data = provider->test_set();
  auto W = cfg.workers;
  auto P = cfg.ps;
  auto K = opts.workers_per_machine;
  if (K == 0 || W % K != 0)
    throw input_error(fmt::format(
      "--workers-per-machine {}: must be at least 1 and divide the {} "
      "workers",
      K, W));
  if (K > 1 && (opts.measure_host || opts.host.cores > 0))
    throw input_error("--workers-per-machine and --host: --host puts every "
                      "node on one machine, --workers-per-machine spreads "
                      "the workers over machines of their own; use one");
  sim_report report;
  report.workers = W;
  report.workers_per_machine = K;
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
    // A step time of `measured` is used as a constant one (compute_model),
    // so this flag in its place replays the run.
    report.reproducible = false;
    report.replay_flags = fmt::format("--compute const:{}ns", compute.mean_ns);
  }
  report.step_ns = compute.mean_ns;
  std::optional<timing_job> timing;
  if (opts.timing_only) {
    timing = make_timing_job(cfg, net, *layout);
    job_cfg = &timing->cfg;
    net = timing->net;
    layout = timing->layout;
    for (auto& d : data)
      d = timing_source(std::move(d));
  }
  sim_trace trace{opts.record, opts.replay};
  sim_env env;
  env.trace = &trace;
  auto world = std::make_shared<sim_world>(
    network_model{opts.network, W + P}, compute_model{compute, W, opts.seed},
    trace, W, P, K);
  world->origin = env.sys.clock().now();
  world->chaos_state = opts.seed ^ 0x6a09e667f3bcc908ULL;
  if (timing) {
    world->dense_pull_bytes = timing->pull_bytes;
    world->dense_push_bytes = timing->push_bytes;
    world->reply_dense_bytes = timing->pull_bytes;
  } else {
    for (auto floats : layout->ps_sizes)
      world->reply_dense_bytes.push_back(
        dense_wire_bytes(cfg.pull_format, floats));
  }
  world->layout = layout;
  auto host = opts.measure_host ? measure_host(cfg, layout->model_size)
                                : opts.host;
  if (opts.measure_host) {
    // fmt's "{}" writes the shortest text that parses back to the same
    // double, so parse_host reads exactly the costs measured here.
    report.reproducible = false;
    if (!report.replay_flags.empty())
      report.replay_flags += ' ';
    report.replay_flags += fmt::format("--host {}:{}:{}:{}", host.cores,
                                       host.ns_per_message, host.ns_per_byte,
                                       host.apply_ns_per_float);
  }
  world->host = host_model{host, W + P};
  report.host = to_string(host);
  // Lazy replies assume a server answers in no time.
  world->lazy_replies = cfg.mode == "async" && !world->host.enabled();
  // -- the cluster ------------------------------------------------------------
  sim_cluster cl{env, *job_cfg, net, layout, data, world};
  // The evaluation reads the servers directly (no simulated network).
  std::vector<group_route> routes;
  auto puller = [&](uint32_t g, pull_request req) {
    auto& r = routes.at(g);
    req.view = r.view;
    return env.ask<pull_reply>(caf::actor_cast<ps_actor>(r.actor),
                               fmt::format("reading group {}", g), pull_atom_v,
                               std::move(req));
  };
  // -- epochs -----------------------------------------------------------------
  // The fault plan fires when the number of finished closures reaches a
  // fault's step (as in fit); checkpoints (in memory) split an epoch into
  // chunks, as fit pauses for them.
  auto faults = cfg.faults;
  std::stable_sort(faults.begin(), faults.end(),
                   [](const fault_spec& x, const fault_spec& y) {
                     return x.step < y.step;
                   });
  size_t next_fault = 0;
  uint64_t finished_before = 0; // closures of earlier chunks
  uint64_t every = cfg.checkpoint_dir.empty() ? 0 : cfg.checkpoint_every_steps;
  {
    cluster_coordinator coord{env.sys, cl.dispatcher(),
                              steps * uint64_t{W} + 1};
    for (uint64_t e = 1; e <= cfg.epochs; ++e) {
      std::vector<remote_value> values;
      uint64_t per_epoch = steps * W;
      while (values.size() < per_epoch) {
        auto chunk = per_epoch - values.size();
        if (every > 0)
          chunk = std::min(chunk, every - finished_before % every);
        auto begin = values.size();
        for (uint64_t i = 0; i < chunk; ++i)
          values.push_back(coord.schedule(train_step_name));
        auto chunk_done = [&] {
          return std::all_of(values.begin() + begin, values.end(),
                             [](const remote_value& v) { return v.done(); });
        };
        auto fire = [&] {
          if (next_fault == faults.size())
            return false;
          auto done = finished_before
                      + static_cast<uint64_t>(std::count_if(
                        values.begin() + begin, values.end(),
                        [](const remote_value& v) { return v.done(); }));
          bool fired = false;
          while (next_fault < faults.size() && faults[next_fault].step <= done) {
            cl.inject(faults[next_fault++]);
            fired = true;
          }
          return fired;
        };
        env.run_until(chunk_done, "the closures of an epoch", fire);
        finished_before += chunk;
        if (every > 0 && finished_before % every == 0) {
          cl.checkpoint();
          log::info("simulate", -1,
                    "checkpoint at step {} (kept in memory, not written)",
                    finished_before);
        }
      }
      if (every == 0 && !cfg.checkpoint_dir.empty())
        cl.checkpoint(); // at each epoch's end
      sim_epoch ep;
      ep.epoch = e;
      ep.virtual_s = static_cast<double>(world->now(env.sys)) / 1e9;
      for (auto& v : values) {
        auto r = v.fetch(); // throws the closure's error
        ep.train_loss += r.loss;
        report.samples += r.samples;
      }
      ep.train_loss /= static_cast<double>(std::max<size_t>(values.size(), 1));
      routes = cl.routes();
      if (!timing)
        ep.metrics = evaluate_on_servers(*layout, puller, *net, *test_data);
      std::string metrics;
      for (auto& [name, value] : ep.metrics)
        metrics += fmt::format(", {} {:.4f}", name, value);
      log::info("simulate", -1, "epoch {}/{} at {:.3f} s virtual: train "
                                "loss {:.4f}{}",
                e, cfg.epochs, ep.virtual_s, ep.train_loss, metrics);
      report.epochs.push_back(std::move(ep));
    }
    auto counts = coord.counts();
    report.closures = counts.finished;
    report.reexecuted = counts.reexecuted;
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
  }
  for (auto& s : cl.stats()) {
    report.pushes_applied += s.pushes;
    report.duplicates += s.duplicates;
    if (report.staleness_buckets.size() < s.staleness_buckets.size())
      report.staleness_buckets.resize(s.staleness_buckets.size(), 0);
    for (size_t b = 0; b < s.staleness_buckets.size(); ++b)
      report.staleness_buckets[b] += s.staleness_buckets[b];
  }
  // Idle per machine: the share of the time its compute unit was free.
  for (uint32_t m = 0; m < W / K; ++m) {
    sim_time busy = 0;
    for (uint32_t w = m * K; w < (m + 1) * K; ++w)
      busy += world->compute_ns[w];
    report.idle.push_back(end > 0 ? 1.0
                                      - static_cast<double>(busy)
                                          / static_cast<double>(end)
                                  : 0);
  }
  routes = cl.routes();
  auto final_values = pull_dense(*layout, puller);
  trace.add(final_values.data(), final_values.size() * sizeof(float));
  if (world->estimate_misses > 0)
    throw runtime_failure(fmt::format(
      "simulate: {} pull replies were not of the size their link reserved "
      "(a bug of the simulator: its timing is off)",
      world->estimate_misses));
  report.dropped = world->dropped;
  report.delayed = world->delayed;
  report.events = trace.events();
  report.digest = trace.finish();
  report.wall_s = std::chrono::duration<double>(steady_clock::now() - wall0)
                    .count();
  report.peak_rss_bytes = peak_rss_bytes();
  return report;
}

} // namespace actorps
