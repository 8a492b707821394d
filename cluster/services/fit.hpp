#pragma once

// fit: a Keras-like training loop on a cluster (Model.fit with epochs,
// steps_per_epoch and callbacks), built on cluster_coordinator's schedule /
// join. `actorps train` and the coordinator of `actorps launch` run it with
// the callbacks of cluster/services/fit_callbacks.hpp.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "cluster/services/checkpointer.hpp"
#include "cluster/services/progressive.hpp"
#include "core/dataset.hpp"
#include "core/metrics.hpp"
#include "models/step_function.hpp"

namespace actorps {

class data_plan;

class cluster;
class model;
struct job_config;

/// What one epoch did. Times in seconds, losses in nats per example.
struct epoch_metrics {
  uint32_t epoch = 0;        ///< 1-based
  uint64_t steps = 0;        ///< closures run in this epoch (by this run)
  double train_loss = 0;     ///< mean minibatch loss of the epoch's steps
  /// The model's test metrics, in its order (test_loss first; then
  /// test_accuracy, or test_auc and test_accuracy); empty without test data.
  /// Callbacks may add their own in on_epoch_end (see early_stopping).
  metric_list test;
  double test_loss = 0;      ///< = test's "test_loss"
  double test_accuracy = 0;  ///< = test's "test_accuracy", in [0, 1]
  double samples_per_sec = 0; ///< training examples / training time
  /// With a data plan (fit_options::data): the examples of the epoch's
  /// closures that this run scheduled (`planned`), and those that finished
  /// having trained exactly their range (`trained`: the worker's result
  /// names the range's epoch and end and has its number of examples). Equal
  /// when every example of the epoch was trained once (a closure re-run
  /// after its worker was lost is counted once: the servers apply one push
  /// per closure).
  uint64_t examples_planned = 0;
  uint64_t examples_trained = 0;
  double elapsed_s = 0;      ///< since fit_options::start
};

/// The value of metric `name` of an epoch: "train_loss", "samples_per_sec",
/// or a name in m.test ("test_loss", "test_accuracy", "test_auc", or one a
/// callback added). False if there is none of that name.
bool epoch_metric(const epoch_metrics& m, const std::string& name,
                  double& value);

class fit_callback;

/// What a fit loop shares with its callbacks (Keras' `logs` and
/// `model.stop_training`). Owned by fit(); callbacks run on fit's thread, one
/// at a time, in the order given.
struct fit_state {
  /// The cluster being trained and its model.
  cluster* cl = nullptr;
  const model* net = nullptr;
  /// The last epoch number asked for (a resumed run starts after
  /// progress.epoch).
  uint32_t epochs = 0;
  /// Closures per epoch: steps per worker x workers.
  uint64_t closures_per_epoch = 0;
  /// Where training is: global step, epochs done, closures done in the
  /// current epoch, each worker's data position (what a checkpoint records).
  /// Updated when every closure of a chunk has finished.
  training_progress progress;
  /// The epochs this run completed, in order.
  std::vector<epoch_metrics> history;
  /// Training time of this run, seconds: epochs' closures, without
  /// evaluation and the callbacks at epoch ends.
  double train_s = 0;
  /// Training examples of this run.
  uint64_t samples = 0;
  /// Set by a callback to end training: checked at every pause (after
  /// on_pause) and after every epoch end. fit then calls on_train_end and
  /// returns normally.
  bool stop_training = false;
  /// Why, for the log and fit_history.
  std::string stop_reason;
  /// With a data plan: examples of closures that finished after one that
  /// was cancelled (a stop request); a resume trains them again.
  uint64_t retrain_after_resume = 0;
  /// Progressive windows (fit_options::progressive_window): the open
  /// window's predictions, the windows closed and the examples in them.
  progressive_windows windows;
};

/// A hook into fit (Keras' tf.keras.callbacks.Callback). Every member has an
/// empty default; override what you need. A callback that throws ends fit
/// with that exception (on_train_end is not called then).
class fit_callback {
public:
  virtual ~fit_callback();

  /// Before the first closure of the run (after a restore: at its step).
  virtual void on_train_begin(fit_state& st);

  /// Before the first closure of epoch st.progress.epoch + 1.
  virtual void on_epoch_begin(fit_state& st);

  /// A closure finished with a value: called once per closure, on fit's
  /// thread, while the others of its chunk may still run (fit looks at least
  /// every poll_interval()), in the order fit sees them finish.
  virtual void on_step_end(fit_state& st, const step_result& r);

  /// While closures run, about every poll_interval(). `done` is the job's
  /// global step as far as fit knows: st.progress.global_step plus the
  /// closures of the running chunk that finished.
  virtual void on_wait(fit_state& st, uint64_t done);

  /// How long fit may wait between on_wait calls; fit uses the smallest of
  /// all callbacks' (default: 200 ms).
  virtual std::chrono::milliseconds poll_interval(const fit_state& st) const;

  /// The next global step (> st.progress.global_step) at which this
  /// callback needs a pause: every closure finished and none running, so
  /// that the servers' state is consistent (checkpoints). 0: none. fit
  /// schedules closures in chunks that end at the nearest pause and at epoch
  /// ends.
  virtual uint64_t next_pause(const fit_state& st) const;

  /// After every chunk, with no closure running; st.progress counts the
  /// chunk's closures (at an epoch's last chunk, step_in_epoch ==
  /// closures_per_epoch and on_epoch_end follows). Closures a callback
  /// cancelled (cluster_coordinator::cancel, to stop a job at once) never
  /// pushed and are not counted; the epoch goes on with new ones unless a
  /// callback throws or stops training.
  virtual void on_pause(fit_state& st);

  /// After an epoch's closures finished and the test set was evaluated; `m`
  /// is st.history.back(), which callbacks may extend (m.test) for the
  /// callbacks after them. st.progress counts the epoch as done.
  virtual void on_epoch_end(fit_state& st, epoch_metrics& m);

  /// After the last epoch, or when a callback stopped training; not when
  /// fit throws.
  virtual void on_train_end(fit_state& st);

  /// Each window of fit_options::progressive_window examples, once its
  /// closures are done (at the pause that follows).
  virtual void on_window(fit_state& st, const window_metrics& w);
};

/// A callback made of functions (Keras' LambdaCallback); an empty function
/// does nothing.
struct lambda_callback : fit_callback {
  std::function<void(fit_state&)> train_begin;
  std::function<void(fit_state&)> epoch_begin;
  std::function<void(fit_state&, const step_result&)> step_end;
  std::function<void(fit_state&, epoch_metrics&)> epoch_end;
  std::function<void(fit_state&)> train_end;

  void on_train_begin(fit_state& st) override;
  void on_epoch_begin(fit_state& st) override;
  void on_step_end(fit_state& st, const step_result& r) override;
  void on_epoch_end(fit_state& st, epoch_metrics& m) override;
  void on_train_end(fit_state& st) override;
};

/// How fit trains.
struct fit_options {
  /// The last epoch number (training runs epochs progress.epoch + 1 ..
  /// epochs); at least 1.
  uint32_t epochs = 1;
  /// Steps (closures) per worker per epoch, as the job config's
  /// training.steps_per_epoch after effective_steps_per_epoch: an epoch is
  /// steps_per_epoch x workers closures. At least 1.
  uint64_t steps_per_epoch = 1;
  /// Called in this order at every event.
  std::vector<std::shared_ptr<fit_callback>> callbacks;
  /// Evaluated on the servers' values after each epoch (metrics in
  /// epoch_metrics::test); nullptr: no evaluation.
  std::shared_ptr<const dataset> validation_data;
  /// The step function each closure runs (models/step_function.hpp).
  std::string step_function = train_step_name;
  /// The coordinator hands out the examples (cluster/services/data_plan.hpp,
  /// a stream): epoch e has data->closures(e) closures, each on the
  /// examples of its data_range, and steps_per_epoch is not used. Their
  /// predictions before each update (progressive evaluation, "test then
  /// train") become the epoch's metrics progressive_loss and
  /// progressive_auc (binary models). Null: the workers' own sources.
  std::shared_ptr<data_plan> data;
  /// With a data plan: progressive loss and AUC over every window of this
  /// many examples (rounded up to whole batches; on_window), besides each
  /// epoch's; 0: epochs only.
  uint64_t progressive_window = 0;
  /// Where to start: a restored checkpoint's progress (epochs and steps
  /// done, data positions), or empty for a new run. The servers and workers
  /// must already be at that point (restore_checkpoint).
  training_progress start_at;
  /// What epoch_metrics::elapsed_s counts from (default: fit's start).
  std::chrono::steady_clock::time_point start
    = std::chrono::steady_clock::time_point::min();
};

/// What fit did (Keras' History).
struct fit_history {
  /// The epochs this run completed, in order.
  std::vector<epoch_metrics> epochs;
  /// Where training stopped.
  training_progress progress;
  /// Training time, seconds (see fit_state::train_s), and examples.
  double train_s = 0;
  uint64_t samples = 0;
  /// Whether a callback stopped training (and why).
  bool stopped = false;
  std::string stop_reason;
};

/// Trains on the cluster `cl`, whose workers already hold their datasets and
/// whose servers hold `net`'s variables: for each epoch, schedules
/// opts.steps_per_epoch x workers closures of opts.step_function (in chunks
/// that end at the callbacks' pauses), waits for them while calling the
/// callbacks, and evaluates opts.validation_data on the servers' values.
/// Blocking; call it from a non-actor thread.
/// @throws input_error for options out of range (epochs 0, steps 0, a start
///         past the last epoch); runtime_failure with the first error of a
///         closure (cluster_coordinator::join) or of the evaluation; what a
///         callback throws.
fit_history fit(cluster& cl, const model& net, const fit_options& opts);

} // namespace actorps
