#pragma once

// The sidecar evaluator (`actorps node --role evaluator`, TensorFlow's
// tf.keras.utils.SidecarEvaluator): watches the job's checkpoint folder and
// evaluates each new checkpoint on the test set in its own process, reading
// files only, so that it never blocks training.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/checkpoint.hpp"
#include "core/dataset.hpp"
#include "core/metrics.hpp"
#include "core/placement.hpp"

namespace actorps {

class model;
struct job_config;

/// Test metrics of `net` with the variables of checkpoint `st` (checked
/// with check_checkpoint_variables against `layout`), computed in this
/// process: the dense shards are copied into the flat model buffer, the
/// table shards' rows are looked up by key, and a key the checkpoint does
/// not hold reads as its initial row (initial_row with cfg.init_seed), as a
/// parameter server would answer. `threads` as evaluate_model.
metric_list evaluate_checkpoint(const checkpoint_state& st,
                                const placement& layout, const model& net,
                                const job_config& cfg, const dataset& data,
                                unsigned threads = 1);

/// The predictions of `net` (model::predict) for every example of `data`
/// with the variables of checkpoint `st`, read as evaluate_checkpoint
/// reads them: rows x prediction_width() floats, row-major.
std::vector<float> predict_checkpoint(const checkpoint_state& st,
                                      const placement& layout,
                                      const model& net, const job_config& cfg,
                                      const dataset& data,
                                      unsigned threads = 1);

/// How run_evaluator watches and reports.
struct evaluator_options {
  /// Lines for people ("evaluator: ck/ckpt-0000000200 (epoch 1, step 200):
  /// test_loss 0.4512  test_accuracy 0.8391"); nullptr: none.
  std::FILE* out = stdout;
  /// JSON lines, one per checkpoint evaluated or skipped, written and
  /// flushed as they happen ("" = none): {"type": "evaluation",
  /// "checkpoint", "global_step", "epoch", "step_in_epoch", the test
  /// metrics, "eval_s", "elapsed_s"} or {"type": "skipped", "checkpoint",
  /// "reason"}.
  std::string metrics_out;
  /// Serve Prometheus metrics on this port (-1: none; 0: a free port).
  int metrics_port = -1;
  /// The address it binds ("" = 127.0.0.1).
  std::string metrics_address;
  /// As train_options::metrics_auth, metrics_token, metrics_tls.
  std::string metrics_auth;
  std::string metrics_token;
  std::string metrics_tls;
  /// How often the folder is looked at.
  std::chrono::milliseconds poll{250};
  /// Evaluation threads: 1 by default, so that training keeps the cores.
  unsigned threads = 1;
};

/// Runs the sidecar evaluator of job `cfg` until the job's last checkpoint
/// (epoch cfg.epochs done) is evaluated, or a stop is requested
/// (cluster/job/stop_request.hpp, SIGTERM). Each time cfg.checkpoint_dir holds
/// a complete checkpoint newer than the last one looked at, the newest is
/// read, checked against the job and evaluated (older new ones are passed
/// over, as TensorFlow's evaluator does). A checkpoint being written is
/// invisible (write_checkpoint renames it into place when complete); one
/// that cannot be read (corrupt, truncated, removed while being read) or
/// belongs to another job is skipped with a message naming it and why.
/// Needs no parameter server and no coordinator.
/// @returns the exit status: 0 after the last checkpoint, exit_stopped on a
///          stop request.
/// @throws input_error for a job without checkpoint_dir, unusable data, a
///         metrics file that cannot be written or a metrics port in use.
int run_evaluator(const job_config& cfg, const evaluator_options& opts);

} // namespace actorps
