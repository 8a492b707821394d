#include "cluster/services/dataset_plan.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace actorps {

dataset_plan::dataset_plan(uint64_t rows, uint64_t batch_size,
                           uint64_t max_closures)
  : rows_(rows), batch_size_(batch_size) {
  if (rows == 0 || batch_size == 0)
    throw std::invalid_argument("dataset_plan: rows and batch size must be "
                                "at least 1");
  closures_ = (rows + batch_size - 1) / batch_size;
  if (max_closures > 0)
    closures_ = std::min(closures_, max_closures);
}

uint64_t dataset_plan::closures(uint64_t) {
  return closures_;
}

data_range dataset_plan::range(uint64_t epoch, uint64_t k) {
  if (k >= closures_)
    throw std::logic_error(fmt::format("dataset_plan: closure {} of epoch {} "
                                       "asked for, it has {}",
                                       k, epoch, closures_));
  data_range r;
  r.part = epoch;
  r.begin = k * batch_size_;
  r.end = std::min(rows_, r.begin + batch_size_);
  r.progressive = false;
  return r;
}

std::string dataset_plan::ended_reason() const {
  return "the dataset ended"; // never: closures() is never 0
}

uint64_t dataset_plan::examples_per_epoch() const {
  return std::min(rows_, closures_ * batch_size_);
}

} // namespace actorps
