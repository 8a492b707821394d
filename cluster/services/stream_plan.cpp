#include "cluster/services/stream_plan.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "cluster/services/checkpointer.hpp"
#include "core/error.hpp"

namespace actorps {

stream_plan::stream_plan(std::unique_ptr<stream_source> source,
                         uint64_t batch_size)
  : source_(std::move(source)), batch_size_(batch_size) {
  if (!source_ || batch_size_ == 0)
    throw std::invalid_argument("stream_plan: a source and a batch size of "
                                "at least 1 are needed");
}

uint64_t stream_plan::closures(uint64_t epoch) {
  if (have_ && epoch == epoch_)
    return (rows_ + batch_size_ - 1) / batch_size_;
  if (have_ && epoch != epoch_ + 1)
    throw std::logic_error(fmt::format("stream_plan: epoch {} asked for "
                                       "after {}",
                                       epoch, epoch_));
  for (;;) {
    auto part = source_->next_part(std::chrono::milliseconds(1000));
    if (part) {
      if (part->data->rows() == 0)
        continue; // nothing to train on (a source hands none out)
      have_ = true;
      epoch_ = epoch;
      part_ = part->index;
      name_ = part->name;
      rows_ = part->data->rows();
      return (rows_ + batch_size_ - 1) / batch_size_;
    }
    if (source_->ended() != stream_end::none)
      return 0;
  }
}

data_range stream_plan::range(uint64_t epoch, uint64_t k) {
  if (!have_ || epoch != epoch_)
    throw std::logic_error("stream_plan: a range of an epoch not asked for");
  auto begin = k * batch_size_;
  if (begin >= rows_)
    throw std::logic_error(fmt::format("stream_plan: closure {} of part {} "
                                       "({} rows)",
                                       k, name_, rows_));
  return data_range{part_, name_, begin, std::min(rows_, begin + batch_size_)};
}

std::string stream_plan::ended_reason() const {
  auto& s = source_->stats();
  const char* why = "it ended";
  switch (source_->ended()) {
    case stream_end::stopped:
      why = "a stop was requested";
      break;
    case stream_end::end_after:
      why = "its last part (data.stream_end_after) was read";
      break;
    case stream_end::idle:
      why = "no new part came within data.stream_idle_timeout_ms";
      break;
    case stream_end::none:
      break;
  }
  return fmt::format("the stream ended: {} ({} parts, {} examples read)", why,
                     s.parts, s.rows);
}

uint64_t stream_resume_part(const training_progress& progress) {
  if (progress.global_step == 0)
    return 0;
  uint64_t last = 0;
  for (auto& w : progress.workers)
    last = std::max(last, w.epoch);
  return progress.step_in_epoch > 0 ? last : last + 1;
}

} // namespace actorps
