#include "core/dataset_ranges.hpp"

#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/example_batch.hpp"

namespace actorps {

std::vector<uint32_t> epoch_order(uint64_t rows, uint64_t seed,
                                  uint64_t epoch) {
  if (rows > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument("epoch_order: more than 2^32 - 1 rows");
  std::vector<uint32_t> order(rows);
  for (uint32_t i = 0; i < order.size(); ++i)
    order[i] = i;
  // seed_seq keeps 32 bits of each value: 64-bit values go as two halves.
  // The constant keeps these orders apart from the static shards' shuffles
  // (batch_iterator), which seed with (seed, pipeline, epoch).
  auto lo = [](uint64_t x) { return static_cast<uint32_t>(x); };
  auto hi = [](uint64_t x) { return static_cast<uint32_t>(x >> 32); };
  std::seed_seq seq{lo(seed), hi(seed), 0x64796eu, lo(epoch), hi(epoch)};
  std::mt19937_64 rng{seq};
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

dataset_ranges::dataset_ranges(std::shared_ptr<const dataset> data,
                               uint64_t seed)
  : data_(std::move(data)), seed_(seed) {
  if (!data_ || data_->rows() == 0)
    throw input_error("dynamic data shards: the training split has no "
                      "examples");
}

std::shared_ptr<const std::vector<uint32_t>>
dataset_ranges::order(uint64_t epoch) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [e, o] : orders_)
    if (e == epoch)
      return o;
  // Built under the lock: the other workers of the process want the same
  // epoch next, and wait for it rather than build it again.
  auto o = std::make_shared<const std::vector<uint32_t>>(
    epoch_order(data_->rows(), seed_, epoch));
  orders_.emplace_back(epoch, o);
  if (orders_.size() > 2)
    orders_.erase(orders_.begin());
  return o;
}

void dataset_ranges::read(const data_range& r, example_batch& out) {
  auto rows = data_->rows();
  if (r.end > rows || r.begin > r.end)
    throw input_error(fmt::format("data range {}-{} of epoch {}: the training "
                                  "split holds {} rows",
                                  r.begin, r.end, r.part, rows));
  auto held = order(r.part);
  auto& src = data_->examples;
  out.reset(src.dense_dim, src.fields.size());
  for (auto i = r.begin; i < r.end; ++i)
    out.append_row(src, (*held)[i]);
}

} // namespace actorps
