#include "cluster/services/fit.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "caf/actor_system.hpp"

#include "cluster/job/cluster.hpp"
#include "cluster/services/data_plan.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/seconds.hpp"
#include "models/model.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

/// The closures of one epoch and which of them the callbacks have seen.
struct epoch_closures {
  std::vector<remote_value> values;
  /// With a data plan: the range of each closure of `values`.
  std::vector<data_range> ranges;
  std::vector<bool> reported;
  /// Every closure before this one is reported.
  size_t first_unreported = 0;

  /// Calls on_step_end for each closure that finished with a value and was
  /// not reported yet. Failed ones are left to join(), which raises their
  /// error once. With `all` (after join, when every closure reads as done),
  /// takes each closure's value.
  void report(fit_state& st, const fit_options& opts, bool all = false) {
    for (auto i = first_unreported; i < values.size(); ++i) {
      if (reported[i])
        continue;
      if (all)
        values[i].wait();
      if (!values[i].done() || values[i].error())
        continue;
      auto r = values[i].get();
      reported[i] = true;
      for (auto& cb : opts.callbacks)
        cb->on_step_end(st, *r);
    }
    while (first_unreported < values.size() && reported[first_unreported])
      ++first_unreported;
  }
};

/// The closures of the next chunk: up to the epoch's end and the nearest
/// pause a callback asks for.
uint64_t chunk_size(const fit_state& st, const fit_options& opts) {
  auto& p = st.progress;
  auto chunk = st.closures_per_epoch - p.step_in_epoch;
  for (auto& cb : opts.callbacks) {
    auto at = cb->next_pause(st);
    if (at > p.global_step)
      chunk = std::min(chunk, at - p.global_step);
  }
  return chunk;
}

std::chrono::milliseconds poll_interval(const fit_state& st,
                                        const fit_options& opts) {
  auto result = std::chrono::milliseconds(200);
  for (auto& cb : opts.callbacks)
    result = std::min(result, cb->poll_interval(st));
  return std::max(result, std::chrono::milliseconds(1));
}

/// Adds a closure's predictions to the open progressive window and, when
/// that closes it, calls on_window.
void add_to_window(fit_state& st, const fit_options& opts,
                   const step_result& r) {
  auto m = st.windows.add(r);
  if (!m)
    return;
  for (auto& cb : opts.callbacks)
    cb->on_window(st, *m);
}

/// Runs one chunk of closures: schedules them, calls on_wait and
/// on_step_end while they run, joins, and moves st.progress past them.
void run_chunk(fit_state& st, const fit_options& opts, epoch_closures& ec,
               uint64_t chunk) {
  auto& coord = st.cl->coordinator();
  auto begin = ec.values.size();
  auto finished_at_start = coord.counts().finished;
  for (uint64_t i = 0; i < chunk; ++i) {
    if (opts.data) {
      ec.ranges.push_back(
        opts.data->range(st.progress.epoch, st.progress.step_in_epoch + i));
      ec.values.push_back(coord.schedule(opts.step_function, ec.ranges.back()));
    } else
      ec.values.push_back(coord.schedule(opts.step_function));
    ec.reported.push_back(false);
  }
  while (!coord.join_for(poll_interval(st, opts))) {
    auto done = st.progress.global_step + coord.counts().finished
                - finished_at_start;
    for (auto& cb : opts.callbacks)
      cb->on_wait(st, done);
    ec.report(st, opts);
  }
  coord.join();
  ec.report(st, opts, true);
  // Each worker's data position after its last closure of the chunk. A
  // closure cancelled by a callback (cluster_coordinator::cancel, a job
  // stopped early) never pushed and does not count.
  // With a data plan the closures' examples are fixed: only the finished
  // prefix counts as done (a resume goes on after it), and a finished
  // closure after a cancelled one is trained again then (counted).
  uint64_t finished = 0;
  bool gap = false;
  for (auto i = begin; i < ec.values.size(); ++i) {
    if (ec.values[i].error() == errc::cancelled) {
      gap = true;
      continue;
    }
    if (opts.data && gap) {
      st.retrain_after_resume += ec.values[i].fetch().samples;
      continue;
    }
    ++finished;
    auto r = ec.values[i].fetch();
    if (opts.progressive_window > 0 && !r.scores.empty())
      add_to_window(st, opts, r);
    // A worker that joined the running job has an index past the start's.
    if (r.worker >= st.progress.workers.size())
      st.progress.workers.resize(r.worker + 1);
    auto& pos = st.progress.workers[r.worker];
    if (std::make_pair(r.data_epoch, r.data_offset)
        > std::make_pair(pos.epoch, pos.offset))
      pos = data_position{r.data_epoch, r.data_offset};
  }
  st.progress.step_in_epoch += finished;
  st.progress.global_step += finished;
  for (auto& cb : opts.callbacks)
    cb->on_pause(st);
}

} // namespace

// -- epoch_metrics ------------------------------------------------------------

bool epoch_metric(const epoch_metrics& m, const std::string& name,
                  double& value) {
  if (name == "train_loss") {
    value = m.train_loss;
    return true;
  }
  if (name == "samples_per_sec") {
    value = m.samples_per_sec;
    return true;
  }
  for (auto& [key, x] : m.test) {
    if (key == name) {
      value = x;
      return true;
    }
  }
  return false;
}

// -- fit_callback ---------------------------------------------------------------

fit_callback::~fit_callback() {
  // nop
}

void fit_callback::on_train_begin(fit_state&) {
  // nop
}

void fit_callback::on_epoch_begin(fit_state&) {
  // nop
}

void fit_callback::on_step_end(fit_state&, const step_result&) {
  // nop
}

void fit_callback::on_wait(fit_state&, uint64_t) {
  // nop
}

std::chrono::milliseconds fit_callback::poll_interval(const fit_state&) const {
  return std::chrono::milliseconds(200);
}

uint64_t fit_callback::next_pause(const fit_state&) const {
  return 0;
}

void fit_callback::on_pause(fit_state&) {
  // nop
}

void fit_callback::on_epoch_end(fit_state&, epoch_metrics&) {
  // nop
}

void fit_callback::on_train_end(fit_state&) {
  // nop
}

void fit_callback::on_window(fit_state&, const window_metrics&) {
  // nop
}

void lambda_callback::on_train_begin(fit_state& st) {
  if (train_begin)
    train_begin(st);
}

void lambda_callback::on_epoch_begin(fit_state& st) {
  if (epoch_begin)
    epoch_begin(st);
}

void lambda_callback::on_step_end(fit_state& st, const step_result& r) {
  if (step_end)
    step_end(st, r);
}

void lambda_callback::on_epoch_end(fit_state& st, epoch_metrics& m) {
  if (epoch_end)
    epoch_end(st, m);
}

void lambda_callback::on_train_end(fit_state& st) {
  if (train_end)
    train_end(st);
}

// -- fit ------------------------------------------------------------------------

fit_history fit(cluster& cl, const model& net, const fit_options& opts) {
  auto workers = cl.workers().size();
  if (opts.epochs == 0)
    throw input_error("fit: epochs must be at least 1");
  if (opts.steps_per_epoch == 0 && !opts.data)
    throw input_error("fit: steps_per_epoch must be at least 1");
  for (auto& cb : opts.callbacks)
    if (!cb)
      throw input_error("fit: a callback is null");
  fit_state st;
  st.cl = &cl;
  st.net = &net;
  st.epochs = opts.epochs;
  st.closures_per_epoch = opts.steps_per_epoch * workers;
  st.progress = opts.start_at;
  st.progress.workers.resize(workers);
  st.windows = progressive_windows{opts.progressive_window};
  if (st.progress.epoch >= opts.epochs)
    throw input_error(fmt::format("fit: {} epochs done already, {} asked for",
                                  st.progress.epoch, opts.epochs));
  if (!opts.data && st.progress.step_in_epoch >= st.closures_per_epoch)
    throw input_error(fmt::format("fit: {} steps of epoch {} done, but an "
                                  "epoch has {} steps",
                                  st.progress.step_in_epoch,
                                  st.progress.epoch + 1,
                                  st.closures_per_epoch));
  auto start = opts.start == steady_clock::time_point::min() ? steady_clock::now()
                                                           : opts.start;
  for (auto& cb : opts.callbacks)
    cb->on_train_begin(st);
  while (!st.stop_training && st.progress.epoch < opts.epochs) {
    auto epoch = st.progress.epoch + 1;
    if (opts.data) {
      st.closures_per_epoch = opts.data->closures(st.progress.epoch);
      if (st.closures_per_epoch == 0) {
        st.stop_training = true;
        st.stop_reason = opts.data->ended_reason();
        break;
      }
      if (st.progress.step_in_epoch >= st.closures_per_epoch)
        throw input_error(fmt::format("fit: {} steps of part {} done, but it "
                                      "has {} batches",
                                      st.progress.step_in_epoch,
                                      st.progress.epoch,
                                      st.closures_per_epoch));
    }
    for (auto& cb : opts.callbacks)
      cb->on_epoch_begin(st);
    auto t0 = steady_clock::now();
    epoch_closures ec;
    ec.values.reserve(st.closures_per_epoch - st.progress.step_in_epoch);
    // Closures go out in chunks that end at the callbacks' pauses; between
    // chunks nothing runs (a consistent checkpoint).
    while (!st.stop_training
           && st.progress.step_in_epoch < st.closures_per_epoch)
      run_chunk(st, opts, ec, chunk_size(st, opts));
    if (st.progress.step_in_epoch < st.closures_per_epoch)
      break; // stopped within the epoch
    st.progress.epoch = epoch;
    st.progress.step_in_epoch = 0;
    auto epoch_time = seconds(steady_clock::now() - t0);
    epoch_metrics m;
    m.epoch = epoch;
    uint64_t samples = 0;
    eval_accumulator progressive;
    for (size_t i = 0; i < ec.values.size(); ++i) {
      auto& rv = ec.values[i];
      if (opts.data)
        m.examples_planned += ec.ranges[i].rows();
      if (rv.error() == errc::cancelled)
        continue; // see run_chunk
      auto r = rv.fetch();
      if (opts.data) {
        auto& range = ec.ranges[i];
        if (r.data_epoch == range.part && r.data_offset == range.end
            && r.samples == range.rows())
          m.examples_trained += r.samples;
        else
          log::error("coordinator", -1,
                     "closure {} was to train examples {}-{} of epoch {}; "
                     "worker {} trained {} ending at {} of epoch {}",
                     rv.closure_id(), range.begin, range.end, range.part,
                     r.worker, r.samples, r.data_offset, r.data_epoch);
      }
      ++m.steps;
      m.train_loss += r.loss;
      samples += r.samples;
      add_predictions(progressive, r);
    }
    if (opts.data && !progressive.scores.empty()) {
      // Test, then train: each example scored before its own update.
      auto part = progressive_metrics(progressive);
      m.test.insert(m.test.end(), part.begin(), part.end());
      m.test_loss = progressive.mean_loss();
    }
    m.train_loss /= double(std::max<uint64_t>(m.steps, 1));
    m.samples_per_sec = double(samples) / epoch_time;
    st.train_s += epoch_time;
    st.samples += samples;
    if (opts.validation_data) {
      m.test = cl.evaluate(net, *opts.validation_data);
      m.test_loss = metric_value(m.test, "test_loss");
      m.test_accuracy = metric_value(m.test, "test_accuracy");
    }
    m.elapsed_s = seconds(steady_clock::now() - start);
    st.history.push_back(m);
    for (auto& cb : opts.callbacks)
      cb->on_epoch_end(st, st.history.back());
  }
  if (st.stop_training)
    log::info("coordinator", -1, "training stopped after {} epochs and {} "
              "steps: {}",
              st.progress.epoch, st.progress.global_step,
              st.stop_reason.empty() ? std::string{"a callback asked"}
                                     : st.stop_reason);
  if (st.retrain_after_resume > 0)
    log::warn("coordinator", -1, "{} examples finished after a cancelled "
              "closure: a resume trains them again",
              st.retrain_after_resume);
  for (auto& cb : opts.callbacks)
    cb->on_train_end(st);
  fit_history h;
  h.epochs = std::move(st.history);
  h.progress = std::move(st.progress);
  h.train_s = st.train_s;
  h.samples = st.samples;
  h.stopped = st.stop_training;
  h.stop_reason = std::move(st.stop_reason);
  return h;
}

} // namespace actorps
