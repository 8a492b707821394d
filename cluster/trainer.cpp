#include "cluster/trainer.hpp"

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "caf/actor_system.hpp"

#include "cluster/checkpoint_fit.hpp"
#include "cluster/checkpointer.hpp"
#include "cluster/local_cluster.hpp"
#include "cluster/remote_cluster.hpp"
#include "cluster/report.hpp"
#include "core/data_registry.hpp"
#include "core/dataset.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/process.hpp"
#include "models/registry.hpp"

namespace actorps {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

/// Bytes one step would move each way if every variable were dense and
/// pulled whole (0 if a table has unbounded keys).
uint64_t dense_equivalent(const placement& layout) {
  uint64_t floats = layout.model_size;
  for (auto v : layout.tables) {
    auto& var = layout.variables[v];
    if (var.rows == 0)
      return 0;
    floats += var.rows * var.cols;
  }
  return floats * sizeof(float);
}

/// Builds the cluster train() runs on, in the given actor system.
using cluster_factory = std::function<std::unique_ptr<cluster>(
  caf::actor_system& sys, std::shared_ptr<const model> net,
  const dataset_fn& fn)>;

/// The checkpoint to continue from (read and checked whole before any actor
/// starts: a bad one is the user's to fix, and nothing is half-loaded), or
/// nothing.
std::optional<checkpoint_state>
checkpoint_to_restore(const job_config& cfg, const train_options& opts,
                      const model& net, uint64_t closures_per_epoch,
                      std::string& restore_dir) {
  restore_dir = opts.restore_dir;
  if (opts.resume) {
    restore_dir = latest_checkpoint(cfg.checkpoint_dir);
    if (restore_dir.empty())
      throw input_error(fmt::format("--resume: no checkpoint in {}",
                                    cfg.checkpoint_dir));
  }
  if (restore_dir.empty())
    return std::nullopt;
  auto restored = read_checkpoint(restore_dir);
  if (opts.restore_variables_only) {
    check_checkpoint_variables(restored, cfg, job_placement(cfg, net),
                               restore_dir);
    // The new run counts from step 0: its checkpoints would sort before the
    // other run's, be pruned first, and a --resume would take the other's.
    auto other = cfg.checkpoint_dir.empty()
                   ? std::string{}
                   : latest_checkpoint(cfg.checkpoint_dir);
    if (!other.empty())
      throw input_error(fmt::format(
        "--restore-variables-only: {} already holds checkpoints of another "
        "run (newest {}), which this new run's, counted from step 0, would "
        "be mixed with; give it an empty --checkpoint-dir (or continue the "
        "run there with --resume)",
        cfg.checkpoint_dir, other));
    return restored;
  }
  check_checkpoint(restored, cfg, job_placement(cfg, net), restore_dir);
  if (restored.epoch >= cfg.epochs)
    throw input_error(fmt::format("{}: the checkpoint has {} epochs done; "
                                  "ask for more with --epochs",
                                  restore_dir, restored.epoch));
  if (restored.step_in_epoch >= closures_per_epoch)
    throw input_error(fmt::format("{}: {} steps of epoch {} done, but an "
                                  "epoch has {} steps in this job",
                                  restore_dir, restored.step_in_epoch,
                                  restored.epoch + 1, closures_per_epoch));
  return restored;
}

/// `a - b`, or 0 where a server restarted from scratch counted less.
uint64_t since(uint64_t a, uint64_t b) {
  return a >= b ? a - b : 0;
}

/// Fills the push counts of `r`, this run's and the job's, from the servers'
/// stats when the run started (`before`, at global step `start_step`) and now
/// (`after`, at `end_step`).
///
/// Every closure pushes once to every server, so a server's clock equals
/// the global step unless it was restored from an older checkpoint: it then
/// lost the pushes since that checkpoint. Without sync's rounds a server's
/// push count is its clock, restored with it: the job's counts come from the
/// servers as they are, this run's are the difference to the start. Under
/// sync the clock counts rounds of one push per worker and the push count is
/// the server process's own; losses are not counted there.
void count_pushes(train_report& r, const job_config& cfg,
                  const std::vector<ps_stats>& before, uint64_t start_step,
                  const std::vector<ps_stats>& after, uint64_t end_step) {
  bool sync = cfg.mode == "sync";
  uint64_t staleness_sum = 0;
  uint64_t pushes_before = 0;
  uint64_t lost_before = 0;
  for (size_t p = 0; p < after.size(); ++p) {
    auto& s = after[p];
    auto b = p < before.size() ? before[p] : ps_stats{};
    r.pushes += since(s.pushes, b.pushes);
    r.duplicates += since(s.duplicates, b.duplicates);
    staleness_sum += since(s.staleness_sum, b.staleness_sum);
    r.max_staleness = std::max(r.max_staleness, s.staleness_max);
    r.table_rows += s.table_rows;
    r.table_bytes += s.table_bytes;
    pushes_before += sync ? b.clock * cfg.workers : b.pushes;
    if (sync)
      continue;
    auto lost_then = since(start_step, b.pushes);
    auto lost_now = since(end_step, s.pushes);
    lost_before += lost_then;
    r.updates_lost += since(lost_now, lost_then);
  }
  r.mean_staleness = r.pushes == 0 ? 0.0
                                   : double(staleness_sum) / double(r.pushes);
  r.start_step = start_step;
  r.job_closures = end_step;
  r.job_pushes = pushes_before + r.pushes;
  r.job_updates_lost = lost_before + r.updates_lost;
}

train_report train_on(const job_config& cfg, const train_options& opts,
                      system_config& sys_cfg, const cluster_factory& make) {
  validate(cfg);
  auto start = clock_type::now();
  metrics_file metrics{opts.metrics_out};
  auto data = open_dataset(cfg);
  auto net = make_model(cfg, data->schema());
  auto steps = effective_steps_per_epoch(cfg, data->train_rows());
  auto test_data = data->test_set();
  auto closures_per_epoch = steps * cfg.workers;
  dataset_fn fn = [&](const input_context& ctx) {
    return data->train_source(ctx, cfg.batch_size, cfg.shuffle_seed);
  };
  std::string restore_dir;
  auto restored = checkpoint_to_restore(cfg, opts, *net, closures_per_epoch,
                                        restore_dir);
  train_report report;
  report.workers = cfg.workers;
  report.ps = cfg.ps;
  report.worker_peak_rss_bytes.assign(cfg.workers, 0);
  report.parameters = net->dense_parameters();

  caf::actor_system sys{sys_cfg};
  {
    auto cluster_ptr = make(sys, net, fn);
    auto& cluster = *cluster_ptr;
    auto& coord = cluster.coordinator();
    auto& layout = cluster.layout();
    report.dense_equivalent_bytes = dense_equivalent(layout);
    log::info("coordinator", -1,
              "{}: {} dense parameters and {} tables in {} shards on {} ps, "
              "{} workers, {} steps per epoch ({} per worker), rules {}{}, "
              "mode {}",
              data->describe(), report.parameters, layout.tables.size(),
              layout.shards.size(), cfg.ps, cfg.workers, closures_per_epoch,
              steps, cfg.optimizer.type,
              layout.tables.empty() ? std::string{}
                                    : " / tables " + cfg.table_optimizer.type,
              cfg.mode);
    double train_time = 0;
    uint64_t total_samples = 0;
    training_progress progress;
    progress.workers.assign(cfg.workers, data_position{});
    if (restored && opts.restore_variables_only) {
      restore_variables(cluster, *restored, cfg);
      log::info("coordinator", -1,
                "new run from the variables of {} (step {} of its run); "
                "epoch, step, data positions and optimizer state start "
                "afresh",
                restore_dir, restored->global_step);
    } else if (restored) {
      restore_checkpoint(cluster, *restored);
      progress = progress_of(*restored);
      log::info("coordinator", -1,
                "resumed from {}: {} epochs and {} steps of the next done "
                "({} steps in all)",
                restore_dir, progress.epoch, progress.step_in_epoch,
                progress.global_step);
    }
    // What the servers had counted when this run started (after a restore:
    // the checkpoint's clocks), so that the final counts can be this run's.
    auto start_stats = cluster.stats();
    auto start_step = progress.global_step;
    auto faults = cfg.faults;
    std::stable_sort(faults.begin(), faults.end(),
                     [](const fault_spec& a, const fault_spec& b) {
                       return a.step < b.step;
                     });
    size_t next_fault = 0;
    while (next_fault < faults.size()
           && faults[next_fault].step < progress.global_step)
      ++next_fault; // planned before the restored step
    auto save = [&] {
      if (cfg.checkpoint_dir.empty())
        return;
      auto t = clock_type::now();
      auto path = write_checkpoint(cfg.checkpoint_dir,
                                   capture_checkpoint(cluster, cfg, progress),
                                   cfg.keep_checkpoints);
      log::info("coordinator", -1, "checkpoint {} ({:.2f} s)", path,
                seconds(clock_type::now() - t));
    };
    for (uint32_t epoch = progress.epoch + 1; epoch <= cfg.epochs; ++epoch) {
      auto t0 = clock_type::now();
      auto finished_before = coord.counts().finished;
      auto to_run = closures_per_epoch - progress.step_in_epoch;
      std::vector<remote_value> results;
      results.reserve(to_run);
      // Closures go out in chunks that end at checkpoint boundaries; between
      // chunks nothing runs, so each checkpoint is consistent.
      while (progress.step_in_epoch < closures_per_epoch) {
        auto chunk = closures_per_epoch - progress.step_in_epoch;
        auto every = cfg.checkpoint_every_steps;
        if (every > 0)
          chunk = std::min(chunk, every - progress.global_step % every);
        auto begin = results.size();
        auto finished_at_start = coord.counts().finished;
        // Faults fire when their step is done: checked while the chunk runs,
        // so that they hit closures in flight.
        auto fire_faults = [&] {
          auto done = progress.global_step + coord.counts().finished
                      - finished_at_start;
          while (next_fault < faults.size() && faults[next_fault].step <= done)
            cluster.inject(faults[next_fault++]);
        };
        for (uint64_t i = 0; i < chunk; ++i)
          results.push_back(coord.schedule(train_step_name));
        bool bar = opts.progress && opts.out != nullptr;
        auto last_draw = clock_type::now();
        while (!coord.join_for(std::chrono::milliseconds(
          next_fault < faults.size() ? 2 : 200))) {
          fire_faults();
          if (bar && clock_type::now() - last_draw
                       >= std::chrono::milliseconds(200)) {
            last_draw = clock_type::now();
            draw_progress(opts.out, epoch, cfg.epochs,
                          coord.counts().finished - finished_before, to_run,
                          seconds(clock_type::now() - t0));
          }
        }
        if (bar)
          std::fputs("\r\033[K", opts.out);
        coord.join();
        for (auto i = begin; i < results.size(); ++i) {
          auto r = results[i].fetch();
          auto& pos = progress.workers.at(r.worker);
          if (std::make_pair(r.data_epoch, r.data_offset)
              > std::make_pair(pos.epoch, pos.offset))
            pos = data_position{r.data_epoch, r.data_offset};
        }
        progress.step_in_epoch += chunk;
        progress.global_step += chunk;
        while (next_fault < faults.size()
               && faults[next_fault].step <= progress.global_step)
          cluster.inject(faults[next_fault++]);
        if (every > 0 && progress.global_step % every == 0
            && progress.step_in_epoch < closures_per_epoch)
          save();
      }
      progress.epoch = epoch;
      progress.step_in_epoch = 0;
      auto epoch_time = seconds(clock_type::now() - t0);
      epoch_metrics m;
      m.epoch = epoch;
      m.steps = results.size();
      uint64_t samples = 0;
      for (auto& rv : results) {
        auto r = rv.fetch();
        m.train_loss += r.loss;
        samples += r.samples;
        report.pull_s += r.pull_s;
        report.compute_s += r.compute_s;
        report.push_s += r.push_s;
        report.keys += r.keys;
        report.bytes_pulled += r.bytes_pulled;
        report.bytes_pushed += r.bytes_pushed;
        auto& rss = report.worker_peak_rss_bytes.at(r.worker);
        rss = std::max(rss, r.peak_rss_bytes);
      }
      m.train_loss /= double(results.size());
      m.samples_per_sec = double(samples) / epoch_time;
      train_time += epoch_time;
      total_samples += samples;
      m.test = cluster.evaluate(*net, *test_data);
      m.test_loss = metric_value(m.test, "test_loss");
      m.test_accuracy = metric_value(m.test, "test_accuracy");
      m.elapsed_s = seconds(clock_type::now() - start);
      report.epochs.push_back(m);
      print_epoch(opts.out, m, cfg.epochs);
      metrics.write_epoch(m);
      save();
    }
    report.train_s = train_time;
    report.samples_per_sec = double(total_samples) / train_time;
    report.worker_s = train_time * cfg.workers;
    count_pushes(report, cfg, start_stats, start_step, cluster.stats(),
                 progress.global_step);
    auto counts = coord.counts();
    report.closures = counts.finished;
    report.scheduled = counts.scheduled;
    report.reexecuted = counts.reexecuted;
    // Memory per role where the roles are processes of their own.
    auto servers = cluster.servers();
    if (!servers.empty() && servers.front().node() != sys.node())
      for (auto& s : cluster.stats())
        report.ps_peak_rss_bytes.push_back(s.peak_rss_bytes);
    else
      report.worker_peak_rss_bytes.clear();
  }
  report.peak_rss_bytes = peak_rss_bytes();
  print_summary(opts.out, report);
  metrics.write_final(report, cfg, seconds(clock_type::now() - start));
  metrics.commit();
  return report;
}

} // namespace

train_report train(const job_config& cfg, const train_options& opts) {
  system_config sys_cfg{cfg.threads};
  return train_on(cfg, opts, sys_cfg,
                  [&](caf::actor_system& sys, std::shared_ptr<const model> net,
                      const dataset_fn& fn) -> std::unique_ptr<cluster> {
                    return std::make_unique<local_cluster>(sys, cfg, net, fn);
                  });
}

train_report train_chief(const job_config& cfg, const cluster_spec& spec,
                         const train_options& opts) {
  system_config sys_cfg{cfg.threads, network_of(cfg)};
  return train_on(cfg, opts, sys_cfg,
                  [&](caf::actor_system& sys, std::shared_ptr<const model> net,
                      const dataset_fn&) -> std::unique_ptr<cluster> {
                    return std::make_unique<remote_cluster>(
                      sys, cfg, spec, net,
                      std::chrono::milliseconds(cfg.connect_timeout_ms));
                  });
}

network_options network_of(const job_config& cfg) {
  network_options net;
  net.heartbeat_interval = std::chrono::milliseconds(cfg.heartbeat_interval_ms);
  net.heartbeat_timeout = std::chrono::milliseconds(cfg.heartbeat_timeout_ms);
  return net;
}

} // namespace actorps
