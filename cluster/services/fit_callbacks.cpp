#include "cluster/services/fit_callbacks.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "cluster/services/checkpointer.hpp"
#include "cluster/job/cluster.hpp"
#include "cluster/job/job_setup.hpp"
#include "cluster/services/report.hpp"
#include "core/checkpoint.hpp"
#include "core/checkpoint_chain.hpp"
#include "core/checkpoint_files.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/seconds.hpp"
#include "models/export/exporter.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

/// "train_loss, test_loss, test_accuracy, samples_per_sec" for an error.
std::string metric_names(const epoch_metrics& m) {
  std::string names = "train_loss, samples_per_sec";
  for (auto& entry : m.test)
    names += ", " + entry.first;
  return names;
}

} // namespace

// -- early_stopping -------------------------------------------------------------

early_stopping::early_stopping(std::string monitor, uint32_t patience,
                               double min_delta, direction mode)
  : monitor_(std::move(monitor)), patience_(patience), min_delta_(min_delta) {
  if (monitor_.empty())
    throw input_error("early stopping: no metric to monitor");
  if (!(min_delta_ >= 0))
    throw input_error(fmt::format("early stopping: min_delta {} must be a "
                                  "number >= 0",
                                  min_delta_));
  if (mode == direction::automatic)
    maximize_ = monitor_.find("accuracy") != std::string::npos
                || monitor_.find("auc") != std::string::npos;
  else
    maximize_ = mode == direction::max;
}

void early_stopping::on_epoch_end(fit_state& st, epoch_metrics& m) {
  double x = 0;
  if (!epoch_metric(m, monitor_, x))
    throw input_error(fmt::format("early stopping: epoch {} has no metric "
                                  "\"{}\" (it has: {})",
                                  m.epoch, monitor_, metric_names(m)));
  bool improved = best_epoch_ == 0
                  || (maximize_ ? x > best_ + min_delta_
                                : x < best_ - min_delta_);
  if (improved) {
    best_ = x;
    best_epoch_ = m.epoch;
    wait_ = 0;
    return;
  }
  // As Keras: stop after `patience` epochs in a row without improvement
  // (0 and 1 both stop at the first).
  if (++wait_ < std::max<uint32_t>(patience_, 1))
    return;
  st.stop_training = true;
  st.stop_reason = fmt::format(
    "early stopping: {} has not improved by more than {} for {} epoch(s) "
    "(best {:.4f} at epoch {})",
    monitor_, min_delta_, wait_, best_, best_epoch_);
}

// -- checkpoint_callback --------------------------------------------------------

checkpoint_callback::checkpoint_callback(const job_config& cfg,
                                         const data_schema& schema)
  : cfg_(cfg), schema_(schema) {
  if (cfg_.export_dir.empty())
    return;
  if (cfg_.checkpoint_dir.empty())
    throw input_error("training.export_dir (--export-dir): exports are made "
                      "from checkpoints; give training.checkpoint_dir "
                      "(--checkpoint-dir) too");
  check_exportable(cfg_, schema_);
  try {
    detail::make_root(cfg_.export_dir);
  } catch (const runtime_failure& e) {
    throw input_error(fmt::format("training.export_dir (--export-dir): {}",
                                  e.what()));
  }
}

uint64_t checkpoint_callback::next_pause(const fit_state& st) const {
  auto every = cfg_.checkpoint_every_steps;
  if (cfg_.checkpoint_dir.empty() || every == 0)
    return 0;
  auto step = st.progress.global_step;
  return step + (every - step % every);
}

void checkpoint_callback::on_pause(fit_state& st) {
  auto every = cfg_.checkpoint_every_steps;
  // At an epoch's end on_epoch_end saves, after the evaluation.
  if (every > 0 && st.progress.global_step % every == 0
      && st.progress.step_in_epoch < st.closures_per_epoch)
    save_or_skip(st);
}

void checkpoint_callback::on_epoch_end(fit_state& st, epoch_metrics&) {
  save_or_skip(st);
}

void checkpoint_callback::save_or_skip(fit_state& st) {
  try {
    save(st);
  } catch (const checkpoint_interrupted& e) {
    log::warn("coordinator", -1,
              "checkpoint at step {} skipped: {} (the newest one on disk "
              "stays)",
              st.progress.global_step, e.what());
  }
}

checkpoint_request
checkpoint_callback::next_request(const fit_state& st) const {
  checkpoint_request req;
  req.id = detail::new_checkpoint_id();
  // A delta never replaces its own base (same step), and needs the base
  // still in place.
  if (cfg_.delta_checkpoints == 0 || last_id_ == 0
      || deltas_ >= cfg_.delta_checkpoints
      || last_name_ == detail::checkpoint_dir_name(st.progress.global_step)
      || !std::filesystem::exists(detail::join_path(
        detail::join_path(cfg_.checkpoint_dir, last_name_),
        detail::checkpoint_manifest_name)))
    return req;
  req.base = last_name_;
  req.base_id = last_id_;
  return req;
}

void checkpoint_callback::save(fit_state& st) {
  if (cfg_.checkpoint_dir.empty())
    return;
  auto t = steady_clock::now();
  auto req = next_request(st);
  // Until this one is written, the servers' marks match no checkpoint on
  // disk: if anything below fails, the next checkpoint is full.
  last_id_ = 0;
  auto snap = capture_checkpoint(*st.cl, cfg_, st.progress, req);
  bool delta = snap.delta;
  auto path = write_checkpoint(cfg_.checkpoint_dir, snap,
                               cfg_.keep_checkpoints);
  last_name_ = detail::base_name(path);
  last_id_ = req.id;
  deltas_ = delta ? deltas_ + 1 : 0;
  if (delta)
    log::info("coordinator", -1, "checkpoint {} ({:.2f} s, delta of {})",
              path, seconds(steady_clock::now() - t), req.base);
  else
    log::info("coordinator", -1, "checkpoint {} ({:.2f} s)", path,
              seconds(steady_clock::now() - t));
  export_checkpoint_of(snap, path);
}

void checkpoint_callback::export_checkpoint_of(const checkpoint_state& snap,
                                               const std::string& path) {
  if (cfg_.export_dir.empty() || ++written_ % cfg_.export_every != 0)
    return;
  auto t = steady_clock::now();
  try {
    // A delta holds only the rows changed since its base: the export is
    // made from the chain's whole state, read back (and verified) from
    // disk.
    auto r = snap.delta
               ? export_checkpoint(path, cfg_, schema_, cfg_.export_dir)
               : export_state(snap, detail::base_name(path),
                              checkpoint_time_of(path), cfg_, schema_,
                              cfg_.export_dir);
    log::info("coordinator", -1, "export {} ({:.1f} MB, {:.2f} s)", r.dir,
              static_cast<double>(r.bytes) / 1e6,
              seconds(steady_clock::now() - t));
  } catch (const std::exception& e) {
    // Serving lags one export behind; training goes on.
    log::error("coordinator", -1, "export of {} into {} failed: {}", path,
               cfg_.export_dir, e.what());
  }
}

// -- epoch_printer ----------------------------------------------------------------

epoch_printer::epoch_printer(std::FILE* out, bool progress_bar)
  : out_(out), bar_(progress_bar && out != nullptr) {
  // nop
}

void epoch_printer::on_epoch_begin(fit_state& st) {
  epoch_start_ = steady_clock::now();
  last_draw_ = epoch_start_;
  finished_before_ = st.cl->coordinator().counts().finished;
  to_run_ = st.closures_per_epoch - st.progress.step_in_epoch;
}

void epoch_printer::on_wait(fit_state& st, uint64_t) {
  if (!bar_)
    return;
  auto now = steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(200))
    return;
  last_draw_ = now;
  draw_progress(out_, st.progress.epoch + 1, st.epochs,
                st.cl->coordinator().counts().finished - finished_before_,
                to_run_, seconds(now - epoch_start_));
}

void epoch_printer::on_pause(fit_state&) {
  if (bar_)
    std::fputs("\r\033[K", out_);
  last_draw_ = steady_clock::now();
}

void epoch_printer::on_epoch_end(fit_state& st, epoch_metrics& m) {
  print_epoch(out_, m, st.epochs);
}

void epoch_printer::on_window(fit_state&, const window_metrics& w) {
  if (out_ == nullptr)
    return;
  fmt::print(out_,
             "window {:>4}  examples {}-{}  progressive_loss {:.4f}  "
             "progressive_auc {:.4f}\n",
             w.window, w.first_example, w.first_example + w.examples, w.loss,
             w.auc);
  std::fflush(out_);
}

// -- json_lines_callback ----------------------------------------------------------

json_lines_callback::json_lines_callback(metrics_file& file) : file_(file) {
  // nop
}

void json_lines_callback::on_epoch_end(fit_state&, epoch_metrics& m) {
  file_.write_epoch(m);
}

void json_lines_callback::on_window(fit_state&, const window_metrics& w) {
  file_.write_window(w);
}

// -- fault_injector -----------------------------------------------------------------

fault_injector::fault_injector(std::vector<fault_spec> faults)
  : faults_(std::move(faults)) {
  std::stable_sort(faults_.begin(), faults_.end(),
                   [](const fault_spec& a, const fault_spec& b) {
                     return a.step < b.step;
                   });
}

void fault_injector::on_train_begin(fit_state& st) {
  next_ = 0;
  while (next_ < faults_.size()
         && faults_[next_].step < st.progress.global_step)
    ++next_; // planned before the restored step
}

void fault_injector::on_wait(fit_state& st, uint64_t done) {
  fire_until(st, done);
}

std::chrono::milliseconds
fault_injector::poll_interval(const fit_state&) const {
  return std::chrono::milliseconds(next_ < faults_.size() ? 2 : 200);
}

void fault_injector::on_pause(fit_state& st) {
  fire_until(st, st.progress.global_step);
}

void fault_injector::fire_until(fit_state& st, uint64_t step) {
  while (next_ < faults_.size() && faults_[next_].step <= step)
    st.cl->inject(faults_[next_++]);
}

} // namespace actorps
