// The divergence guard: a non-finite step loss or a windowed loss
// that climbs far above its lowest and above where it started fails the job
// with a message saying what to try; a loss that falls and wobbles does not.

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "actors/messages.hpp"
#include "cluster/services/divergence_guard.hpp"
#include "core/error.hpp"

using namespace actorps;

namespace {

/// Feeds `losses` to `guard` as consecutive steps of worker 0.
void feed(divergence_guard& guard, const std::vector<double>& losses) {
  fit_state st;
  for (auto loss : losses) {
    step_result r;
    r.loss = loss;
    guard.on_step_end(st, r);
  }
}

std::vector<double> repeat(double loss, size_t n) {
  return std::vector<double>(n, loss);
}

} // namespace

TEST_CASE("a non-finite step loss fails the job at once, naming it",
          "[cluster][divergence]") {
  divergence_guard guard{10, 4, 64};
  feed(guard, {2.3, 2.2});
  CHECK_THROWS_WITH(feed(guard, {std::numeric_limits<double>::quiet_NaN()}),
                    Catch::Contains("training diverged after 3 steps")
                      && Catch::Contains("is nan")
                      && Catch::Contains("64 here")
                      && Catch::Contains("ssp")
                      && Catch::Contains("staleness_aware"));
  divergence_guard other{10, 4, 2};
  CHECK_THROWS_AS(feed(other, {std::numeric_limits<double>::infinity()}),
                  runtime_failure);
}

TEST_CASE("a windowed loss far above its lowest and above its start fails "
          "the job",
          "[cluster][divergence]") {
  divergence_guard guard{10, 4, 256};
  feed(guard, repeat(2.3, 4)); // first window: 2.3
  feed(guard, repeat(0.5, 4)); // lowest: 0.5
  feed(guard, repeat(4.9, 4)); // 9.8x the lowest: not yet
  CHECK_THROWS_WITH(feed(guard, repeat(5.1, 4)),
                    Catch::Contains("10.2 times its lowest (0.5)")
                      && Catch::Contains("where it started (2.3)"));
}

TEST_CASE("a loss that falls and then rises tenfold but stays below where "
          "it started goes on",
          "[cluster][divergence]") {
  divergence_guard guard{10, 4, 8};
  feed(guard, repeat(2.3, 4));
  feed(guard, repeat(0.01, 8));
  CHECK_NOTHROW(feed(guard, repeat(0.5, 12))); // 50x the lowest, < 2.3
  // One wild step is averaged over its window: no alarm while the window's
  // mean stays below where the loss started.
  CHECK_NOTHROW(feed(guard, {0.01, 0.01, 0.01, 4.0}));
}

TEST_CASE("a guard refuses a factor of at most 1 or an empty window",
          "[cluster][divergence]") {
  CHECK_THROWS_AS(divergence_guard(1.0, 4, 1), std::invalid_argument);
  CHECK_THROWS_AS(divergence_guard(10, 0, 1), std::invalid_argument);
}
