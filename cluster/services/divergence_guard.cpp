#include "cluster/services/divergence_guard.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "actors/messages.hpp"
#include "core/error.hpp"

namespace actorps {

divergence_guard::divergence_guard(double factor, uint64_t window,
                                   uint32_t workers)
  : factor_(factor), window_(window), workers_(workers) {
  if (!(factor > 1.0) || window == 0)
    throw std::invalid_argument(fmt::format(
      "divergence_guard: factor must be > 1 and window >= 1 (got {} and {})",
      factor, window));
}

void divergence_guard::diverged(const std::string& what) {
  throw runtime_failure(fmt::format(
    "training diverged after {} steps of this run: {}. Async staleness grows with the "
    "number of workers ({} here): try optimizer.staleness_aware true "
    "(--staleness-aware: each step divided by its staleness), a lower "
    "learning rate, or training.mode \"ssp\" (bounded staleness) "
    "(training.divergence_factor 0 turns this check off)",
    steps_, what, workers_));
}

void divergence_guard::on_step_end(fit_state& st, const step_result& r) {
  ++steps_;
  if (!std::isfinite(r.loss))
    diverged(fmt::format("the loss of a step of worker {} is {}",
                             r.worker, r.loss));
  sum_ += r.loss;
  if (++count_ < window_)
    return;
  auto mean = sum_ / double(count_);
  sum_ = 0;
  count_ = 0;
  if (!std::isfinite(mean))
    diverged(fmt::format("the mean loss of the last {} steps is {}",
                             window_, mean));
  if (first_ < 0) {
    first_ = lowest_ = mean;
    return;
  }
  if (mean > factor_ * lowest_ && mean > first_)
    diverged(fmt::format("the mean loss of the last {} steps is {:.4g}, "
                             "{:.1f} times its lowest ({:.4g}) and above "
                             "where it started ({:.4g})",
                             window_, mean, mean / lowest_, lowest_, first_));
  if (mean < lowest_)
    lowest_ = mean;
}

} // namespace actorps
