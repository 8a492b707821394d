#include "cluster/topology/trainer.hpp"

#include <algorithm>
#include <limits>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "caf/actor_system.hpp"

#include "cluster/services/checkpoint_fit.hpp"
#include "cluster/services/checkpointer.hpp"
#include "cluster/services/divergence_guard.hpp"
#include "cluster/services/fit.hpp"
#include "cluster/services/fit_callbacks.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/net/tls.hpp"
#include "cluster/services/metrics_endpoint.hpp"
#include "core/stream_source.hpp"
#include "core/stream_config.hpp"
#include "cluster/services/stream_plan.hpp"
#include "cluster/services/dataset_plan.hpp"
#include "core/stream_ranges.hpp"
#include "cluster/job/job_setup.hpp"
#include "cluster/services/plot.hpp"
#include "cluster/topology/remote_cluster.hpp"
#include "cluster/services/report.hpp"
#include "cluster/job/stop_request.hpp" // stop on request (SIGTERM)
#include "core/checkpoint.hpp"
#include "core/data_registry.hpp"
#include "core/dataset.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/process.hpp"
#include "core/staleness_histogram.hpp"
#include "core/seconds.hpp"
#include "models/registry.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

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
/// `ranges`: the reader of handed-out examples for the workers of this
/// process (dynamic data shards), or null.
using cluster_factory = std::function<std::unique_ptr<cluster>(
  caf::actor_system& sys, std::shared_ptr<const model> net,
  const dataset_fn& fn, std::shared_ptr<range_reader> ranges)>;

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
    if (restore_dir.empty() && opts.resume_if_any)
      log::info("coordinator", -1, "--resume-if-any: no checkpoint in {} "
                "yet: starting afresh", cfg.checkpoint_dir);
    else if (restore_dir.empty())
      throw input_error(fmt::format("--resume: no checkpoint in {}",
                                    cfg.checkpoint_dir));
  }
  if (restore_dir.empty())
    return std::nullopt;
  auto restored = read_checkpoint(restore_dir);
  auto layout = job_placement(cfg, net);
  reshard_to_fit(restored, cfg, layout, restore_dir,
                 opts.restore_variables_only);
  if (opts.restore_variables_only) {
    check_checkpoint_variables(restored, cfg, layout, restore_dir);
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
  check_checkpoint(restored, cfg, layout, restore_dir);
  if (restored.epoch >= cfg.epochs && cfg.stream_dir.empty())
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
    merge_staleness(r.staleness_histogram,
                    staleness_since(s.staleness_buckets, b.staleness_buckets));
    r.table_rows += s.table_rows;
    r.table_bytes += s.table_bytes;
    r.rows_admitted += s.rows_admitted;
    r.keys_rejected += s.keys_rejected;
    r.gradients_dropped += s.gradients_dropped;
    r.evicted_ttl += s.evicted_ttl;
    r.evicted_l2 += s.evicted_l2;
    r.evicted_budget += s.evicted_budget;
    add_table_stats(r.tables, s.tables);
    pushes_before += sync ? b.clock * cfg.workers : b.pushes;
    if (sync)
      continue;
    auto lost_then = since(start_step, b.pushes);
    auto lost_now = since(end_step, s.pushes);
    lost_before += lost_then;
    r.updates_lost += since(lost_now, lost_then);
  }
  r.staleness_pushes = 0;
  for (auto n : r.staleness_histogram)
    r.staleness_pushes += n;
  r.mean_staleness = r.staleness_pushes == 0
                       ? 0.0
                       : double(staleness_sum) / double(r.staleness_pushes);
  r.start_step = start_step;
  r.job_closures = end_step;
  r.job_pushes = pushes_before + r.pushes;
  r.job_updates_lost = lost_before + r.updates_lost;
}

/// Sums what the steps of the run did into the report (time shares,
/// traffic, each worker's peak memory).
class report_callback : public fit_callback {
public:
  explicit report_callback(train_report& r) : r_(r) {
    // nop
  }

  void on_step_end(fit_state&, const step_result& s) override {
    r_.pull_s += s.pull_s;
    r_.compute_s += s.compute_s;
    r_.push_s += s.push_s;
    r_.keys += s.keys;
    r_.bytes_pulled += s.bytes_pulled;
    r_.bytes_pushed += s.bytes_pushed;
    r_.pulls_ahead += s.pulls_ahead;
    r_.early_pieces += s.early_pieces;
    r_.early_stages += s.early_stages;
    if (s.worker >= r_.worker_peak_rss_bytes.size()) { // joined later
      r_.worker_peak_rss_bytes.resize(s.worker + 1, 0);
      r_.worker_links.resize(s.worker + 1, {0, 0});
    }
    auto& rss = r_.worker_peak_rss_bytes[s.worker];
    rss = std::max(rss, s.peak_rss_bytes);
    if (s.links_shm + s.links_tcp > 0)
      r_.worker_links[s.worker] = {s.links_shm, s.links_tcp};
  }

private:
  train_report& r_;
};

/// Stop on request (cluster/job/stop_request.hpp, SIGTERM): cancels the closures
/// not done, then, with nothing running, writes a checkpoint and throws
/// stopped_on_request. A request during an epoch's last chunk lets the
/// epoch end (evaluation, epoch line, its checkpoint) first; one after the
/// last epoch changes nothing.
class stop_request_callback : public fit_callback {
public:
  stop_request_callback(const job_config& cfg, checkpoint_callback& ckpt)
    : cfg_(cfg), ckpt_(ckpt) {
    // nop
  }

  void on_epoch_begin(fit_state& st) override {
    stop_if_requested(st);
  }

  void on_wait(fit_state& st, uint64_t) override {
    if (cancelled_ || !stop_requested())
      return;
    cancelled_ = true;
    log::info("coordinator", -1, "stop requested: cancelling the closures "
              "not done, then a checkpoint");
    st.cl->coordinator().cancel();
  }

  void on_pause(fit_state& st) override {
    if (st.progress.step_in_epoch < st.closures_per_epoch)
      stop_if_requested(st);
  }

  /// A stream whose source ended because of the request (fit stopped
  /// early, between parts): the checkpoint, then stopped_on_request.
  void on_train_end(fit_state& st) override {
    if (st.stop_training)
      stop_if_requested(st);
  }

private:
  void stop_if_requested(fit_state& st) {
    if (!stop_requested()) // nothing runs now
      return;
    ckpt_.save(st);
    throw stopped_on_request(st.progress.global_step, cfg_.checkpoint_dir);
  }

  const job_config& cfg_;
  checkpoint_callback& ckpt_;
  bool cancelled_ = false;
};

/// `workers_here`: the workers run in this process (train), not in
/// processes of their own (train_chief: they read their examples there).
train_report train_on(const job_config& cfg, const train_options& opts,
                      system_config& sys_cfg, const cluster_factory& make,
                      bool workers_here) {
  validate(cfg);
  auto start = steady_clock::now();
  metrics_file metrics{opts.metrics_out};
  // Checked before anything runs: a missing gnuplot or a taken port is the
  // user's to fix, not something to learn after training.
  std::shared_ptr<plot_callback> plot;
  if (!opts.plot.empty())
    plot = std::make_shared<plot_callback>(
      opts.plot, fmt::format("{} on {}", cfg.model, cfg.dataset));
  auto endpoint = open_metrics_endpoint(
    opts.metrics_port,
    metrics_settings{opts.metrics_address, opts.metrics_auth,
                     opts.metrics_token, opts.metrics_tls},
    "127.0.0.1", "coordinator", -1, cfg.tls, node_identity{"chief", 0});
  if (!cfg.checkpoint_dir.empty())
    prepare_checkpoint_root(cfg.checkpoint_dir);
  auto data = open_dataset(cfg);
  auto net = make_model(cfg, data->schema());
  auto tables_note = check_table_policy(cfg, job_placement(cfg, *net));
  // A stream: the coordinator hands out each part's batches (one closure
  // each; a part is an epoch of fit) and evaluates progressively.
  auto streaming = !cfg.stream_dir.empty();
  auto steps = streaming ? 1 : effective_steps_per_epoch(cfg, data->train_rows());
  auto test_data = streaming ? nullptr : data->test_set();
  auto closures_per_epoch = streaming ? std::numeric_limits<uint64_t>::max()
                                      : steps * cfg.workers;
  // Dynamic data shards: the coordinator hands out each epoch's batches
  // (one closure each) to whichever worker is free; the workers of this
  // process read them from the whole split through one reader.
  std::shared_ptr<dataset_plan> shards;
  std::shared_ptr<range_reader> ranges;
  if (!streaming && cfg.sharding == "dynamic") {
    // The coordinator of a cluster of processes needs the number of rows,
    // not the rows.
    if (workers_here)
      ranges = dynamic_ranges(cfg, *data);
    shards = std::make_shared<dataset_plan>(
      data->train_rows(), cfg.batch_size,
      cfg.steps_per_epoch > 0 ? closures_per_epoch : 0);
    closures_per_epoch = shards->closures(0);
  }
  dataset_fn fn = [&](const input_context& ctx) -> std::shared_ptr<batch_source> {
    if (shards)
      return std::make_shared<ranges_only_source>(data->schema(),
                                                  cfg.batch_size);
    return data->train_source(ctx, cfg.batch_size, cfg.shuffle_seed);
  };
  std::string restore_dir;
  auto restored = checkpoint_to_restore(cfg, opts, *net, closures_per_epoch,
                                        restore_dir);
  train_report report;
  report.workers = cfg.workers;
  report.ps = cfg.ps;
  report.groups = groups_of(cfg);
  report.prefetch = cfg.prefetch;
  report.worker_peak_rss_bytes.assign(cfg.workers, 0);
  report.worker_links.assign(cfg.workers, {0, 0});
  report.parameters = net->dense_parameters();

  caf::actor_system sys{sys_cfg};
  {
    auto cluster_ptr = make(sys, net, fn, ranges);
    auto& cluster = *cluster_ptr;
    auto& layout = cluster.layout();
    report.dense_equivalent_bytes = dense_equivalent(layout);
    report.dense_groups = static_cast<uint32_t>(
      std::count_if(layout.ps_sizes.begin(), layout.ps_sizes.end(),
                    [](uint64_t n) { return n > 0; }));
    log::info("coordinator", -1,
              "{}: {} dense parameters and {} tables in {} shards on {} ps{}, "
              "{} workers, {}, rules {}{}, mode {}",
              data->describe(), report.parameters, layout.tables.size(),
              layout.shards.size(), cfg.ps,
              report.groups == cfg.ps
                ? std::string{}
                : fmt::format(" ({} replica groups, group g on ps g % {})",
                              report.groups, cfg.ps),
              cfg.workers,
              streaming ? fmt::format("one step per batch of {} of each part",
                                      cfg.batch_size)
              : shards
                ? fmt::format("{} steps per epoch handed out to whichever "
                              "worker is free (dynamic data shards: {} "
                              "examples per epoch)",
                              closures_per_epoch, shards->examples_per_epoch())
                : fmt::format("{} steps per epoch ({} per worker)",
                              closures_per_epoch, steps),
              cfg.optimizer.type
                + (cfg.optimizer.staleness_aware ? " staleness-aware" : ""),
              layout.tables.empty()
                ? std::string{}
                : " / tables " + cfg.table_optimizer.type
                    + (cfg.table_optimizer.staleness_aware
                         ? " staleness-aware"
                         : ""),
              cfg.mode);
    if (!tables_note.empty())
      log::info("coordinator", -1, "{}", tables_note);
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
    fit_options fo;
    fo.epochs = cfg.epochs;
    fo.steps_per_epoch = steps;
    fo.validation_data = test_data;
    if (streaming) {
      stream_env env;
      env.stop_requested = [] { return stop_requested(); };
      env.log = [](const std::string& line) {
        log::info("coordinator", -1, "stream: {}", line);
      };
      auto source = open_stream(stream_config_of(cfg), std::move(env));
      auto resume = stream_resume_part(progress);
      if (resume > 0)
        source->seek(resume);
      fo.data = std::make_shared<stream_plan>(std::move(source),
                                              cfg.batch_size);
      fo.epochs = std::numeric_limits<uint32_t>::max(); // until it ends
      fo.progressive_window = cfg.progressive_window;
    }
    if (shards)
      fo.data = shards;
    fo.start_at = progress;
    fo.start = start;
    // In the order a person sees things: the epoch line, then the metrics,
    // then that epoch's checkpoint; faults fire before a checkpoint at the
    // same step, and a stop request is checked after it.
    auto ckpt = std::make_shared<checkpoint_callback>(cfg, data->schema());
    fo.callbacks = {
      std::make_shared<epoch_printer>(opts.out, opts.progress),
      std::make_shared<fault_injector>(cfg.faults),
      std::make_shared<json_lines_callback>(metrics),
      std::make_shared<report_callback>(report),
    };
    if (endpoint)
      fo.callbacks.push_back(std::make_shared<prometheus_callback>());
    if (!cfg.early_stopping_monitor.empty())
      fo.callbacks.push_back(std::make_shared<early_stopping>(
        cfg.early_stopping_monitor, cfg.early_stopping_patience,
        cfg.early_stopping_min_delta));
    // Before the checkpoint: a diverged state is not saved over a good one.
    if (cfg.divergence_factor > 0)
      fo.callbacks.push_back(std::make_shared<divergence_guard>(
        cfg.divergence_factor, std::max<uint64_t>(20, cfg.workers / 2),
        cfg.workers));
    fo.callbacks.push_back(ckpt);
    fo.callbacks.push_back(std::make_shared<stop_request_callback>(cfg, *ckpt));
    fo.callbacks.insert(fo.callbacks.end(), opts.callbacks.begin(),
                        opts.callbacks.end());
    if (plot)
      fo.callbacks.push_back(plot);
    auto history = fit(cluster, *net, fo);
    report.epochs = std::move(history.epochs);
    report.train_s = history.train_s;
    report.samples_per_sec = double(history.samples) / history.train_s;
    report.worker_s = history.train_s * cfg.workers;
    count_pushes(report, cfg, start_stats, start_step, cluster.stats(),
                 history.progress.global_step);
    auto moves = cluster.coordinator().moves();
    report.moves = moves.count;
    report.moved_floats = moves.floats;
    report.moved_table_rows = moves.table_rows;
    report.longest_move_stall_ms = moves.longest_stall_ms;
    auto counts = cluster.coordinator().counts();
    report.closures = counts.finished;
    report.scheduled = counts.scheduled;
    report.reexecuted = counts.reexecuted;
    if (shards) {
      report.sharding = "dynamic";
      for (auto& m : report.epochs) {
        report.examples_planned += m.examples_planned;
        report.examples_trained += m.examples_trained;
      }
    }
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
  metrics.write_final(report, cfg, seconds(steady_clock::now() - start));
  metrics.commit();
  return report;
}

} // namespace

train_report train(const job_config& given, const train_options& opts) {
  auto cfg = given; // with the defaults that depend on the job applied
  resolve_staleness_aware(cfg);
  resolve_prefetch(cfg, false);
  system_config sys_cfg{cfg.threads};
  return train_on(cfg, opts, sys_cfg,
                  [&](caf::actor_system& sys, std::shared_ptr<const model> net,
                      const dataset_fn& fn, std::shared_ptr<range_reader> ranges)
                    -> std::unique_ptr<cluster> {
                    return std::make_unique<local_cluster>(sys, cfg, net, fn,
                                                           std::move(ranges));
                  },
                  true);
}

train_report train_chief(const job_config& given, const cluster_spec& spec,
                         const train_options& opts) {
  auto cfg = given; // as train(), with workers in processes of their own
  resolve_staleness_aware(cfg);
  if (auto why = resolve_prefetch(cfg, true); !why.empty())
    log::info("coordinator", -1, "{}", why);
  system_config sys_cfg{cfg.threads, network_of(cfg)};
  return train_on(cfg, opts, sys_cfg,
                  [&](caf::actor_system& sys, std::shared_ptr<const model> net,
                      const dataset_fn&, std::shared_ptr<range_reader>)
                    -> std::unique_ptr<cluster> {
                    return std::make_unique<remote_cluster>(
                      sys, cfg, spec, net,
                      std::chrono::milliseconds(cfg.connect_timeout_ms),
                      opts.resume);
                  },
                  false);
}

std::shared_ptr<range_reader> dynamic_ranges(const job_config& cfg,
                                             data_provider& data) {
  auto ranges = data.train_ranges(cfg.shuffle_seed);
  if (!ranges)
    throw input_error(fmt::format("data.sharding dynamic: {} cannot hand out "
                                  "ranges of its training split; use static",
                                  data.describe()));
  return ranges;
}

network_options network_of(const job_config& cfg) {
  network_options net;
  net.heartbeat_interval = std::chrono::milliseconds(cfg.heartbeat_interval_ms);
  net.heartbeat_timeout = std::chrono::milliseconds(cfg.heartbeat_timeout_ms);
  return net;
}

} // namespace actorps
