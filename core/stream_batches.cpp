#include "core/stream_batches.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

stream_batches::stream_batches(std::shared_ptr<stream_source> source,
                               input_context ctx, uint64_t batch_size,
                               std::optional<uint64_t> shuffle_seed)
  : source_(std::move(source)),
    ctx_(ctx),
    batch_size_(batch_size),
    seed_(shuffle_seed) {
  if (!source_)
    throw std::invalid_argument("stream_batches: no source");
  if (ctx_.num_input_pipelines == 0
      || ctx_.input_pipeline_id >= ctx_.num_input_pipelines)
    throw std::invalid_argument(
      fmt::format("stream_batches: worker {} of {}", ctx_.input_pipeline_id,
                  ctx_.num_input_pipelines));
  if (batch_size_ == 0)
    throw input_error("data.batch_size: must be at least 1");
}

void stream_batches::seek(data_position pos, const std::string& part_name) {
  source_->seek(pos.epoch, part_name);
  part_.reset();
  rows_.clear();
  pos_ = pos;
  part_name_ = part_name;
  pending_offset_ = pos.offset;
  ended_ = false;
}

void stream_batches::take(stream_part part) {
  const auto& schema = source_->schema();
  const auto& got = part.data->schema;
  if (got.dense_dim != schema.dense_dim
      || got.fields.size() != schema.fields.size())
    throw input_error(fmt::format("{}: part {} has {} dense features and {} "
                                  "fields, the stream {} and {}",
                                  source_->describe(), part.name,
                                  got.dense_dim, got.fields.size(),
                                  schema.dense_dim, schema.fields.size()));
  const auto n = part.data->rows();
  const uint64_t w = ctx_.input_pipeline_id;
  const uint64_t workers = ctx_.num_input_pipelines;
  rows_.clear();
  for (uint64_t j = w; j < n; j += workers)
    rows_.push_back(j);
  if (seed_) {
    // As batch_iterator: seed_seq keeps 32 bits of each value.
    auto lo = [](uint64_t x) { return static_cast<uint32_t>(x); };
    auto hi = [](uint64_t x) { return static_cast<uint32_t>(x >> 32); };
    std::seed_seq seq{lo(*seed_), hi(*seed_), ctx_.input_pipeline_id,
                      lo(part.index), hi(part.index)};
    std::mt19937_64 rng{seq};
    std::shuffle(rows_.begin(), rows_.end(), rng);
  }
  uint64_t offset = 0;
  if (pending_offset_) {
    if (part.index == pos_.epoch) {
      if (*pending_offset_ > rows_.size())
        throw input_error(fmt::format("data position offset {} is past the "
                                      "{} rows of worker {} in part {} ({})",
                                      *pending_offset_, rows_.size(), w,
                                      part.index, part.name));
      offset = *pending_offset_;
    }
    pending_offset_.reset();
  }
  pos_ = data_position{part.index, offset};
  part_name_ = std::move(part.name);
  part_ = std::move(part.data);
}

bool stream_batches::try_next(example_batch& out,
                              std::chrono::milliseconds wait) {
  const auto& schema = source_->schema();
  out.reset(schema.dense_dim, schema.fields.size());
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!part_ || pos_.offset == rows_.size()) {
    if (ended_)
      return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    auto part = source_->next_part(std::max(left, decltype(left){0}));
    if (!part) {
      ended_ = source_->ended() != stream_end::none;
      return false;
    }
    take(std::move(*part));
  }
  const auto& src = part_->examples;
  auto end = std::min<uint64_t>(rows_.size(), pos_.offset + batch_size_);
  for (auto i = pos_.offset; i < end; ++i)
    out.append_row(src, rows_[i]);
  pos_.offset = end;
  return true;
}

} // namespace actorps
