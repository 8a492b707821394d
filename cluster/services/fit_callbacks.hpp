#pragma once

// The callbacks fit (cluster/services/fit.hpp) ships with, after Keras'
// tf.keras.callbacks: early stopping, checkpointing, the epoch lines and
// progress bar people watch, the JSON-lines metrics file, and injected
// faults for rehearsing failures. The metrics endpoint's callback lives in
// cluster/services/metrics_endpoint.hpp, the plot's in cluster/services/plot.hpp.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cluster/services/checkpointer.hpp"
#include "cluster/services/fit.hpp"
#include "core/example_batch.hpp"
#include "core/job_config.hpp"

namespace actorps {

class metrics_file;

/// Stops training when a monitored metric has stopped improving (Keras'
/// EarlyStopping): after each epoch, the metric improves if it beats the
/// best so far by more than `min_delta` (below it in mode min, above in
/// mode max); after `patience` epochs in a row without improvement, training
/// stops at the end of that epoch (the first epoch always improves on
/// "nothing yet"). Patience 0 and 1 both stop at the first epoch without
/// improvement, as in Keras.
class early_stopping : public fit_callback {
public:
  enum class direction { automatic, min, max };

  /// @param monitor  an epoch metric: "train_loss", "test_loss",
  ///                 "test_accuracy", "test_auc", "samples_per_sec", or one
  ///                 an earlier callback adds to epoch_metrics::test.
  /// @param patience epochs in a row without improvement that stop training.
  /// @param min_delta the least change that counts as an improvement, >= 0,
  ///                 in the metric's units.
  /// @param mode     automatic: max for names containing "accuracy" or
  ///                 "auc", min otherwise.
  /// @throws input_error for an empty monitor or a negative or NaN
  ///         min_delta.
  early_stopping(std::string monitor, uint32_t patience, double min_delta = 0,
                 direction mode = direction::automatic);

  /// @throws input_error naming the metric and the epoch's metrics if the
  ///         epoch has no metric `monitor`.
  void on_epoch_end(fit_state& st, epoch_metrics& m) override;

  /// The best value so far and the epoch it was seen in (0: none yet).
  double best() const noexcept {
    return best_;
  }

  uint32_t best_epoch() const noexcept {
    return best_epoch_;
  }

private:
  std::string monitor_;
  uint32_t patience_;
  double min_delta_;
  bool maximize_;
  double best_ = 0;
  uint32_t best_epoch_ = 0;
  uint32_t wait_ = 0;
};

/// Writes a checkpoint (cluster/services/checkpointer.hpp) into cfg.checkpoint_dir
/// every cfg.checkpoint_every_steps global steps within epochs (at a pause:
/// no closure running) and at each epoch end, keeping the newest
/// cfg.keep_checkpoints full ones with their deltas (Keras' ModelCheckpoint
/// / BackupAndRestore). Does nothing with an empty checkpoint_dir. Logs each
/// path and how long it took.
///
/// With cfg.delta_checkpoints N > 0 checkpoints form chains: a full one,
/// then up to N deltas, each of the one before. Every checkpoint is taken
/// under a fresh id that the servers mark their tables with; a delta asks
/// for the rows changed since the last checkpoint written. The first
/// checkpoint of a run is full, and so is the one after any failure to take
/// or write one (the servers may have marked a checkpoint that was never
/// written). A server whose last mark is not the base (restored, a promoted
/// backup, a new process) gives its whole tables within the delta.
class checkpoint_callback : public fit_callback {
public:
  /// `cfg` must outlive the callback. With cfg.export_dir, every
  /// cfg.export_every-th checkpoint written is also exported there
  /// (models/export/exporter.hpp) for examples of `schema`; an export that
  /// fails is logged and training goes on.
  /// @throws input_error for an export_dir without checkpoint_dir, a model
  ///         that cannot be exported, or an export_dir that cannot be
  ///         created (before training starts).
  explicit checkpoint_callback(const job_config& cfg,
                               const data_schema& schema = {});

  uint64_t next_pause(const fit_state& st) const override;
  void on_pause(fit_state& st) override;
  void on_epoch_end(fit_state& st, epoch_metrics& m) override;

  /// Writes a checkpoint of the cluster at st.progress now (no closure may
  /// run). @throws runtime_failure as write_checkpoint / capture_checkpoint.
  void save(fit_state& st);

private:
  /// save(), except that a checkpoint interrupted by a lost server is
  /// skipped with a warning (the periodic and epoch-end ones: the job's
  /// recovery goes on as it would between checkpoints, and the newest
  /// checkpoint on disk stays; the next one is tried at its time).
  void save_or_skip(fit_state& st);

  /// What the next checkpoint is: a delta of the last one written, when the
  /// chain allows it (cfg.delta_checkpoints), else full.
  checkpoint_request next_request(const fit_state& st) const;

  /// Exports checkpoint `path` (just written; `snap` its state, a delta's
  /// whole chain read from disk instead) when its turn has come.
  void export_checkpoint_of(const checkpoint_state& snap,
                            const std::string& path);

  const job_config& cfg_;
  data_schema schema_;
  /// Checkpoints written by this callback (the turn of export_every).
  uint64_t written_ = 0;
  // -- the chain ----------------------------------------------------------------
  /// The last checkpoint this callback wrote (directory name and id; "" and
  /// 0: none, or the last attempt failed, so the next one is full), and the
  /// deltas written since its chain's full checkpoint.
  std::string last_name_;
  uint64_t last_id_ = 0;
  uint32_t deltas_ = 0;
};

/// What people watch (stdout): one line per epoch (print_epoch) and, with
/// `progress_bar`, a progress bar with ETA redrawn every 200 ms while an
/// epoch runs (meant for a terminal).
class epoch_printer : public fit_callback {
public:
  /// @param out  where to print (nullptr: nowhere).
  epoch_printer(std::FILE* out, bool progress_bar);

  void on_epoch_begin(fit_state& st) override;
  void on_wait(fit_state& st, uint64_t done) override;
  void on_pause(fit_state& st) override;
  void on_epoch_end(fit_state& st, epoch_metrics& m) override;
  /// "window   3  examples 20480-30720  progressive_loss 0.5123
  /// progressive_auc 0.6601".
  void on_window(fit_state& st, const window_metrics& w) override;

private:
  using steady_clock = std::chrono::steady_clock;
  std::FILE* out_;
  bool bar_;
  steady_clock::time_point epoch_start_;
  steady_clock::time_point last_draw_;
  uint64_t finished_before_ = 0;
  uint64_t to_run_ = 0;
};

/// Writes one JSON object per epoch into a metrics file (report.hpp);
/// `file` must outlive the callback.
class json_lines_callback : public fit_callback {
public:
  explicit json_lines_callback(metrics_file& file);

  void on_epoch_end(fit_state& st, epoch_metrics& m) override;
  void on_window(fit_state& st, const window_metrics& w) override;

private:
  metrics_file& file_;
};

/// Injects the planned failures of `faults` (fault_spec, the job's --fault
/// flags) when their step is done, checking every 2 ms while closures run so
/// that they hit closures in flight; faults planned before the step a run
/// starts at are skipped.
class fault_injector : public fit_callback {
public:
  explicit fault_injector(std::vector<fault_spec> faults);

  void on_train_begin(fit_state& st) override;
  void on_wait(fit_state& st, uint64_t done) override;
  std::chrono::milliseconds poll_interval(const fit_state& st) const override;
  void on_pause(fit_state& st) override;

private:
  void fire_until(fit_state& st, uint64_t step);

  std::vector<fault_spec> faults_;
  size_t next_ = 0;
};

} // namespace actorps
