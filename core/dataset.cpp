#include "core/dataset.hpp"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/idx.hpp"

namespace actorps {

dataset load_idx_dataset(const std::string& images, const std::string& labels,
                         uint32_t classes, uint64_t limit) {
  auto img = read_idx(images, limit);
  auto lab = read_idx(labels, limit);
  if (img.dims.size() < 2)
    throw input_error(fmt::format("{}: expected an image array of rank >= 2, "
                                  "got rank {}",
                                  images, img.dims.size()));
  if (lab.dims.size() != 1)
    throw input_error(fmt::format("{}: expected a label vector (rank 1), got "
                                  "rank {}",
                                  labels, lab.dims.size()));
  if (img.items() != lab.items())
    throw input_error(fmt::format("{} has {} images but {} has {} labels",
                                  images, img.items(), labels, lab.items()));
  dataset result;
  result.schema.dense_dim = img.item_size();
  result.schema.labels = label_kind::multiclass;
  result.schema.classes = classes;
  auto& ex = result.examples;
  ex.reset(img.item_size(), 0);
  ex.rows = img.items();
  ex.dense.resize(img.data.size());
  constexpr float scale = 1.0f / 255.0f;
  for (size_t i = 0; i < img.data.size(); ++i)
    ex.dense[i] = static_cast<float>(img.data[i]) * scale;
  ex.labels.resize(lab.data.size());
  for (size_t i = 0; i < lab.data.size(); ++i) {
    if (lab.data[i] >= classes)
      throw input_error(fmt::format("{}: label {} at item {} is out of range "
                                    "[0, {})",
                                    labels, lab.data[i], i, classes));
    ex.labels[i] = lab.data[i];
  }
  return result;
}

dataset load_fashion_mnist(const std::string& dir, const std::string& split,
                           uint64_t limit) {
  if (split != "train" && split != "t10k")
    throw input_error("fashion-mnist split must be train or t10k, got " + split);
  return load_idx_dataset(dir + "/" + split + "-images-idx3-ubyte.gz",
                          dir + "/" + split + "-labels-idx1-ubyte.gz", 10,
                          limit);
}

batch_source::~batch_source() {
  // nop
}

std::vector<uint32_t> shard_indices(uint64_t rows, const input_context& ctx) {
  std::vector<uint32_t> result;
  if (ctx.num_input_pipelines == 0
      || ctx.input_pipeline_id >= ctx.num_input_pipelines)
    return result;
  result.reserve(rows / ctx.num_input_pipelines + 1);
  for (uint64_t i = ctx.input_pipeline_id; i < rows;
       i += ctx.num_input_pipelines)
    result.push_back(static_cast<uint32_t>(i));
  return result;
}

batch_iterator::batch_iterator(std::shared_ptr<const dataset> data,
                               input_context ctx, uint64_t batch_size,
                               uint64_t seed)
  : data_(std::move(data)),
    ctx_(ctx),
    batch_size_(batch_size),
    seed_(seed),
    base_(shard_indices(data_->rows(), ctx)) {
  if (batch_size_ == 0)
    throw input_error("data.batch_size: must be at least 1");
  if (batch_size_ > base_.size())
    throw input_error(fmt::format("data.batch_size: {} is larger than the "
                                  "shard of worker {} ({} rows of {} over {} "
                                  "workers)",
                                  batch_size_, ctx.input_pipeline_id,
                                  base_.size(), data_->rows(),
                                  ctx.num_input_pipelines));
  shuffle_for_epoch();
}

void batch_iterator::shuffle_for_epoch() {
  indices_ = base_;
  // seed_seq keeps 32 bits of each value: pass 64-bit values as two halves.
  auto lo = [](uint64_t x) { return static_cast<uint32_t>(x); };
  auto hi = [](uint64_t x) { return static_cast<uint32_t>(x >> 32); };
  std::seed_seq seq{lo(seed_), hi(seed_), ctx_.input_pipeline_id,
                    lo(pos_.epoch), hi(pos_.epoch)};
  std::mt19937_64 rng{seq};
  std::shuffle(indices_.begin(), indices_.end(), rng);
}

void batch_iterator::next(example_batch& out) {
  const auto& src = data_->examples;
  out.reset(src.dense_dim, src.fields.size());
  for (uint64_t i = 0; i < batch_size_; ++i) {
    if (pos_.offset == indices_.size()) {
      ++pos_.epoch;
      pos_.offset = 0;
      shuffle_for_epoch();
    }
    out.append_row(src, indices_[pos_.offset++]);
  }
}

void batch_iterator::seek(data_position pos) {
  if (pos.offset > base_.size())
    throw input_error(fmt::format("data position offset {} is past the shard "
                                  "size {}",
                                  pos.offset, base_.size()));
  pos_ = pos;
  shuffle_for_epoch();
}

} // namespace actorps
