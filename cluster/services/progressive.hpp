#pragma once

// Progressive evaluation ("test, then train", the standard metric of online
// learning): each closure of a stream scores its examples with the values
// its worker pulled before its own update, and fit (cluster/services/fit.hpp)
// turns those predictions into a loss and an AUC per part and per window of
// examples. The arithmetic lives here, apart from fit's scheduling.

#include <cstdint>
#include <optional>

#include "actors/messages.hpp"
#include "core/metrics.hpp"

namespace actorps {

/// Progressive evaluation over a window of examples (fit_options::
/// progressive_window): the predictions closures made before their own
/// updates, in the order the coordinator handed out their examples.
struct window_metrics {
  uint64_t window = 0;        ///< 1-based, counted over this run
  uint64_t first_example = 0; ///< examples before it in this run
  uint64_t examples = 0;      ///< at least the window (whole batches)
  double loss = 0;            ///< mean log loss (nats)
  double auc = 0;             ///< roc_auc of the window's scores
};

/// Adds the predictions a closure made before its update to `acc`: its
/// scores and labels (r.scores[i] belongs to r.labels[i]) for the AUC, and
/// its minibatch loss weighted by its examples (loss_sum += r.loss x
/// r.samples, count += r.samples), so that acc.mean_loss() is the mean loss
/// per example over all closures added, whatever their sizes.
void add_predictions(eval_accumulator& acc, const step_result& r);

/// A part's progressive metrics from the predictions of its closures:
/// {"progressive_loss", acc.mean_loss()} and {"progressive_auc",
/// roc_auc(acc.scores, acc.labels)}, in that order; empty when `acc` holds
/// no scores (a model without a binary score).
metric_list progressive_metrics(const eval_accumulator& acc);

/// Cuts closures' predictions, taken in handing-out order, into windows of
/// at least `size` examples. A closure is never split: a window closes with
/// the closure that brings it to `size` or more examples, so it may hold up
/// to a batch less one more (windows span closures and parts alike; nothing
/// resets at a part's end). The predictions of the open window are kept
/// until it closes: memory is about `size` scores and labels.
/// Not thread-safe; fit owns one.
class progressive_windows {
public:
  /// @param size  examples per window; 0: no windows (add never closes one).
  explicit progressive_windows(uint64_t size = 0) : size_(size) {
    // nop
  }

  /// Adds the predictions of closure `r` (add_predictions) to the open
  /// window. @returns the window they close, if any: its number (1-based),
  /// the examples of the windows before it, its examples, its mean loss and
  /// its AUC; the next window then starts empty.
  std::optional<window_metrics> add(const step_result& r);

  /// Windows closed so far.
  uint64_t windows() const {
    return windows_;
  }

  /// Examples of the windows closed so far.
  uint64_t examples() const {
    return examples_;
  }

  /// Examples added to the open window.
  uint64_t open_examples() const {
    return open_.count;
  }

private:
  uint64_t size_;
  eval_accumulator open_;
  uint64_t windows_ = 0;
  uint64_t examples_ = 0;
};

} // namespace actorps
