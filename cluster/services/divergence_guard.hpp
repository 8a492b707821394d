#pragma once

// Stops a job whose training loss turns non-finite or explodes, saying why
// (many async workers make staleness, and with it the loss, grow).

#include <cstdint>

#include "cluster/services/fit.hpp"

namespace actorps {

/// A fit callback in the manner of Keras' TerminateOnNaN, extended to
/// losses that explode: it watches every step's minibatch loss and throws
/// runtime_failure (the job fails, exit status 1) when
/// - a step's loss is NaN or infinite, or
/// - the mean loss of a window of `window` consecutive steps exceeds both
///   `factor` times the lowest window mean seen so far and the first
///   window's mean (so that a loss falling from 2.3 to 0.01 may rise to 0.1
///   again without alarm, but one that climbs above where it started, and
///   far above its best, stops the job).
/// The message names the step, the means, the number of workers and what
/// to try: optimizer.staleness_aware, a lower learning rate or
/// training.mode "ssp". Config: training.divergence_factor (10; 0 turns the
/// guard off); the window is max(20, workers / 2) steps, short enough that
/// the first window holds the steps computed on the initial values (with n
/// async workers, the first n steps all read about them).
class divergence_guard : public fit_callback {
public:
  /// @param factor  > 1 (a factor of 0 means: do not construct a guard).
  /// @param window  steps per window, >= 1.
  /// @param workers the job's workers (for the message).
  divergence_guard(double factor, uint64_t window, uint32_t workers);

  void on_step_end(fit_state& st, const step_result& r) override;

private:
  [[noreturn]] void diverged(const std::string& what);

  double factor_;
  uint64_t window_;
  uint32_t workers_;
  double sum_ = 0;      // of the current window's losses
  uint64_t count_ = 0;  // steps in the current window
  uint64_t steps_ = 0;  // steps seen by this run
  double first_ = -1;   // the first window's mean (-1: not yet)
  double lowest_ = -1;  // the lowest window mean (-1: none yet)
};

} // namespace actorps
