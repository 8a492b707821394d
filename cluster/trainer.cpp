#include "cluster/trainer.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <future>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "caf/actor_system.hpp"

#include "cluster/checkpointer.hpp"
#include "cluster/local_cluster.hpp"
#include "cluster/remote_cluster.hpp"
#include "core/dataset.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "models/registry.hpp"

namespace actorps {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

/// A JSON-lines file written under a temporary name, renamed on commit().
class metrics_file {
public:
  explicit metrics_file(std::string path) : path_(std::move(path)) {
    if (path_.empty())
      return;
    tmp_ = path_ + ".tmp";
    out_.open(tmp_, std::ios::trunc);
    if (!out_)
      throw input_error(fmt::format("--metrics-out: cannot write {}", tmp_));
  }

  ~metrics_file() {
    if (!tmp_.empty() && !committed_) {
      out_.close();
      std::remove(tmp_.c_str());
    }
  }

  void write(const nlohmann::json& obj) {
    if (tmp_.empty())
      return;
    out_ << obj.dump() << '\n';
    out_.flush();
  }

  void commit() {
    if (tmp_.empty())
      return;
    out_.close();
    if (!out_ || std::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw runtime_failure(fmt::format("cannot write metrics to {}", path_));
    committed_ = true;
  }

private:
  std::string path_;
  std::string tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

/// Evaluates `params` on `data` with one thread per core.
eval_result evaluate_parallel(const model& net, const std::vector<float>& params,
                              const dataset& data) {
  auto threads = std::max<uint64_t>(
    1, std::min<uint64_t>(std::thread::hardware_concurrency(),
                          data.rows / 256 + 1));
  std::vector<std::future<eval_result>> parts;
  for (uint64_t t = 0; t < threads; ++t) {
    auto begin = data.rows * t / threads;
    auto end = data.rows * (t + 1) / threads;
    parts.push_back(std::async(std::launch::async, [&, begin, end] {
      auto ws = net.make_workspace(256);
      return net.evaluate(params.data(), data, begin, end, *ws);
    }));
  }
  eval_result total;
  for (auto& f : parts) {
    auto r = f.get();
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
    total.count += r.count;
  }
  return total;
}

void draw_progress(std::FILE* out, uint32_t epoch, uint32_t epochs,
                   uint64_t done, uint64_t total, double elapsed) {
  constexpr int width = 30;
  auto filled = total == 0 ? 0 : static_cast<int>(width * done / total);
  double eta = done == 0 ? 0.0 : elapsed * double(total - done) / double(done);
  fmt::print(out, "\repoch {}/{} [{}{}] {}/{} steps, ETA {:.1f}s   ", epoch,
             epochs, std::string(filled, '#'), std::string(width - filled, '.'),
             done, total, eta);
  std::fflush(out);
}

} // namespace

void check_dataset(const model& net, const dataset& data,
                   const std::string& dir) {
  if (data.dim != net.input_dim())
    throw input_error(fmt::format("model.layers[0]: is {} but the examples "
                                  "of {} have {} features",
                                  net.input_dim(), dir, data.dim));
  if (data.classes != net.classes())
    throw input_error(fmt::format("model.layers: the last width is {} but "
                                  "the dataset has {} classes",
                                  net.classes(), data.classes));
}

namespace {

/// Builds the cluster train() runs on, in the given actor system.
using cluster_factory = std::function<std::unique_ptr<cluster>(
  caf::actor_system& sys, std::shared_ptr<const model> net,
  const dataset_fn& fn)>;

train_report train_on(const job_config& cfg, const train_options& opts,
                      system_config& sys_cfg, const cluster_factory& make) {
  validate(cfg);
  auto start = clock_type::now();
  metrics_file metrics{opts.metrics_out};
  auto net = make_model(cfg);
  auto train_data = std::make_shared<const dataset>(
    load_fashion_mnist(cfg.data_dir, "train", cfg.train_limit));
  auto test_data = load_fashion_mnist(cfg.data_dir, "t10k", cfg.test_limit);
  check_dataset(*net, *train_data, cfg.data_dir);
  auto steps = effective_steps_per_epoch(cfg, train_data->rows);
  auto closures_per_epoch = steps * cfg.workers;
  dataset_fn fn = [&](const input_context& ctx) {
    return batch_iterator{train_data, ctx, cfg.batch_size, cfg.shuffle_seed};
  };

  // A checkpoint to continue from is read and checked whole before any actor
  // starts: a bad one is the user's to fix (input_error), and nothing is
  // half-loaded.
  std::optional<checkpoint_state> restored;
  std::string restore_dir = opts.restore_dir;
  if (opts.resume) {
    restore_dir = latest_checkpoint(cfg.checkpoint_dir);
    if (restore_dir.empty())
      throw input_error(fmt::format("--resume: no checkpoint in {}",
                                    cfg.checkpoint_dir));
  }
  if (!restore_dir.empty()) {
    restored = read_checkpoint(restore_dir);
    check_checkpoint(*restored, cfg, job_placement(cfg, *net), restore_dir);
    if (restored->epoch >= cfg.epochs)
      throw input_error(fmt::format("{}: the checkpoint has {} epochs done; "
                                    "ask for more with --epochs",
                                    restore_dir, restored->epoch));
    if (restored->step_in_epoch >= closures_per_epoch)
      throw input_error(fmt::format("{}: {} steps of epoch {} done, but an "
                                    "epoch has {} steps in this job",
                                    restore_dir, restored->step_in_epoch,
                                    restored->epoch + 1, closures_per_epoch));
  }

  train_report report;
  report.workers = cfg.workers;
  report.ps = cfg.ps;
  report.parameters = net->num_parameters();

  caf::actor_system sys{sys_cfg};
  {
    auto cluster_ptr = make(sys, net, fn);
    auto& cluster = *cluster_ptr;
    auto& coord = cluster.coordinator();
    log::info("coordinator", -1,
              "{} parameters in {} shards on {} ps, {} workers, {} steps "
              "per epoch ({} per worker), optimizer {}, mode {}",
              report.parameters, cluster.layout().shards.size(), cfg.ps,
              cfg.workers, closures_per_epoch, steps,
              to_string(cfg.optimizer.type), cfg.mode);
    double train_time = 0;
    uint64_t total_samples = 0;
    training_progress progress;
    progress.workers.assign(cfg.workers, data_position{});
    if (restored) {
      restore_checkpoint(cluster, *restored);
      progress = progress_of(*restored);
      log::info("coordinator", -1,
                "resumed from {}: {} epochs and {} steps of the next done "
                "({} steps in all)",
                restore_dir, progress.epoch, progress.step_in_epoch,
                progress.global_step);
    }
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
      }
      m.train_loss /= double(results.size());
      m.samples_per_sec = double(samples) / epoch_time;
      train_time += epoch_time;
      total_samples += samples;
      auto params = cluster.pull_model();
      auto ev = evaluate_parallel(*net, params, test_data);
      m.test_loss = ev.mean_loss();
      m.test_accuracy = ev.accuracy();
      m.elapsed_s = seconds(clock_type::now() - start);
      report.epochs.push_back(m);
      if (opts.out != nullptr) {
        fmt::print(opts.out,
                   "epoch {:>3}/{}  train_loss {:.4f}  test_loss {:.4f}  "
                   "test_accuracy {:.4f}  samples/s {:.0f}  elapsed {:.1f}s\n",
                   epoch, cfg.epochs, m.train_loss, m.test_loss,
                   m.test_accuracy, m.samples_per_sec, m.elapsed_s);
        std::fflush(opts.out);
      }
      metrics.write({{"type", "epoch"},
                     {"epoch", epoch},
                     {"steps", m.steps},
                     {"train_loss", m.train_loss},
                     {"test_loss", m.test_loss},
                     {"test_accuracy", m.test_accuracy},
                     {"samples_per_sec", m.samples_per_sec},
                     {"elapsed_s", m.elapsed_s}});
      save();
    }
    report.samples_per_sec = double(total_samples) / train_time;
    report.worker_s = train_time * cfg.workers;
    uint64_t staleness_sum = 0;
    for (auto& s : cluster.stats()) {
      report.pushes += s.pushes;
      report.duplicates += s.duplicates;
      staleness_sum += s.staleness_sum;
      report.max_staleness = std::max(report.max_staleness, s.staleness_max);
    }
    report.mean_staleness = report.pushes == 0
                              ? 0.0
                              : double(staleness_sum) / double(report.pushes);
    auto counts = coord.counts();
    // Every closure pushes once to every server; a server restored from a
    // checkpoint lost the pushes since it (sync counts rounds instead).
    if (cfg.mode != "sync")
      for (auto& s : cluster.stats())
        if (s.pushes < progress.global_step)
          report.updates_lost += progress.global_step - s.pushes;
    report.closures = counts.finished;
    report.scheduled = counts.scheduled;
    report.reexecuted = counts.reexecuted;
  }
  auto& last = report.epochs.back();
  auto share = [&](double x) {
    return report.worker_s > 0 ? 100.0 * x / report.worker_s : 0.0;
  };
  double wait_s = std::max(0.0, report.worker_s - report.pull_s
                                  - report.compute_s - report.push_s);
  if (opts.out != nullptr) {
    fmt::print(opts.out,
               "done: test_accuracy {:.4f}  test_loss {:.4f}  samples/s {:.0f}  "
               "epochs {}  workers {}  ps {}\n"
               "staleness: mean {:.2f}, max {} over {} pushes; worker time: "
               "compute {:.0f}%, pull {:.0f}%, push {:.0f}%, waiting {:.0f}%\n"
               "closures: {} scheduled, {} finished, {} re-executed; pushes: "
               "{} applied, {} discarded as duplicates{}\n",
               last.test_accuracy, last.test_loss, report.samples_per_sec,
               report.epochs.size(), report.workers, report.ps,
               report.mean_staleness, report.max_staleness, report.pushes,
               share(report.compute_s), share(report.pull_s),
               share(report.push_s), share(wait_s), report.scheduled,
               report.closures, report.reexecuted, report.pushes,
               report.duplicates,
               report.updates_lost == 0
                 ? std::string{}
                 : fmt::format(", {} lost to parameter-server recovery",
                               report.updates_lost));
    std::fflush(opts.out);
  }
  metrics.write({{"type", "final"},
                 {"test_accuracy", last.test_accuracy},
                 {"test_loss", last.test_loss},
                 {"samples_per_sec", report.samples_per_sec},
                 {"epochs", report.epochs.size()},
                 {"workers", report.workers},
                 {"ps", report.ps},
                 {"parameters", report.parameters},
                 {"mean_staleness", report.mean_staleness},
                 {"max_staleness", report.max_staleness},
                 {"pushes", report.pushes},
                 {"closures", report.closures},
                 {"closures_scheduled", report.scheduled},
                 {"closures_reexecuted", report.reexecuted},
                 {"duplicate_pushes", report.duplicates},
                 {"updates_lost", report.updates_lost},
                 {"optimizer", to_string(cfg.optimizer.type)},
                 {"mode", cfg.mode},
                 {"time_share",
                  {{"compute", share(report.compute_s) / 100},
                   {"pull", share(report.pull_s) / 100},
                   {"push", share(report.push_s) / 100},
                   {"wait", share(wait_s) / 100}}},
                 {"elapsed_s", seconds(clock_type::now() - start)}});
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
