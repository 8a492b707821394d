#include "core/dataset.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/memory_provider.hpp"
#include "core/options.hpp"
#include "core/idx.hpp"

namespace actorps {

namespace {

/// load_idx_shards's work: the split's rows and the shards, still mutable.
std::pair<uint64_t, std::vector<dataset>>
load_idx_rows(const std::string& images, const std::string& labels,
              uint32_t classes, uint64_t limit, uint32_t num_pipelines,
              const std::vector<uint32_t>& ids) {
  if (num_pipelines == 0)
    throw std::invalid_argument("load_idx_shards: 0 input pipelines");
  // slot[p]: where pipeline p's rows go in result.shards, or -1.
  std::vector<int64_t> slot(num_pipelines, -1);
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] >= num_pipelines || slot[ids[k]] >= 0)
      throw std::invalid_argument(
        fmt::format("load_idx_shards: pipeline id {} of {} is out of range or "
                    "repeated",
                    ids[k], num_pipelines));
    slot[ids[k]] = static_cast<int64_t>(k);
  }
  // The image header first, so that a missing image file is named first;
  // the labels (one byte per row) are read whole.
  idx_reader img{images};
  auto lab = read_idx(labels, limit);
  if (img.dims().size() < 2)
    throw input_error(fmt::format("{}: expected an image array of rank >= 2, "
                                  "got rank {}",
                                  images, img.dims().size()));
  if (lab.dims.size() != 1)
    throw input_error(fmt::format("{}: expected a label vector (rank 1), got "
                                  "rank {}",
                                  labels, lab.dims.size()));
  auto rows = img.items();
  if (limit > 0 && limit < rows)
    rows = limit;
  if (rows != lab.items())
    throw input_error(fmt::format("{} has {} images but {} has {} labels",
                                  images, rows, labels, lab.items()));
  for (size_t i = 0; i < lab.data.size(); ++i)
    if (lab.data[i] >= classes)
      throw input_error(fmt::format("{}: label {} at item {} is out of range "
                                    "[0, {})",
                                    labels, lab.data[i], i, classes));
  const auto dim = img.item_size();
  std::vector<dataset> shards(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    auto& ds = shards[k];
    ds.schema.dense_dim = dim;
    ds.schema.labels = label_kind::multiclass;
    ds.schema.classes = classes;
    auto& ex = ds.examples;
    ex.reset(dim, 0);
    ex.byte_scale = 1.0f / 255.0f;
    ex.rows = shard_size(rows, input_context{num_pipelines, ids[k]});
    // Filled as the images arrive (in row order, so each pipeline's rows
    // are appended in order), not sized from the image header up front: a
    // header promising more than the file holds must fail as a truncated
    // file, not allocate a byte per promised pixel first. 64 MiB holds any
    // shard of (Fashion-)MNIST exactly, so it is never regrown.
    ex.dense_bytes.reserve(std::min<uint64_t>(ex.rows * dim,
                                              uint64_t{64} << 20));
    ex.labels.reserve(ex.rows);
    for (uint64_t i = ids[k]; i < rows; i += num_pipelines)
      ex.labels.push_back(lab.data[i]);
  }
  // Where each pipeline's pixels go (nullptr: not kept). They stay bytes;
  // example_batch::append_row scales them to floats a batch at a time.
  std::vector<std::vector<uint8_t>*> dense(num_pipelines, nullptr);
  for (uint32_t p = 0; p < num_pipelines; ++p)
    if (slot[p] >= 0)
      dense[p] = &shards[slot[p]].examples.dense_bytes;
  img.read_items(rows, [&](uint64_t first, uint64_t count,
                           const uint8_t* bytes) {
    for (uint64_t k = 0; k < count; ++k) {
      auto i = first + k;
      auto* out = dense[i % num_pipelines];
      if (out == nullptr)
        continue;
      const auto* in = bytes + k * dim;
      out->insert(out->end(), in, in + dim);
    }
  });
  return {rows, std::move(shards)};
}

void check_split(const std::string& split) {
  if (split != "train" && split != "t10k")
    throw input_error("fashion-mnist split must be train or t10k, got "
                      + split);
}

} // namespace

split_shards load_idx_shards(const std::string& images,
                             const std::string& labels, uint32_t classes,
                             uint64_t limit, uint32_t num_pipelines,
                             const std::vector<uint32_t>& ids) {
  auto [rows, shards] = load_idx_rows(images, labels, classes, limit,
                                      num_pipelines, ids);
  split_shards result;
  result.split_rows = rows;
  for (size_t k = 0; k < shards.size(); ++k)
    result.shards.push_back(
      dataset_shard{std::make_shared<const dataset>(std::move(shards[k])),
                    input_context{num_pipelines, ids[k]}, rows});
  return result;
}

dataset load_idx_dataset(const std::string& images, const std::string& labels,
                         uint32_t classes, uint64_t limit) {
  return std::move(load_idx_rows(images, labels, classes, limit, 1, {0})
                     .second.front());
}

dataset load_fashion_mnist(const std::string& dir, const std::string& split,
                           uint64_t limit) {
  check_split(split);
  return load_idx_dataset(dir + "/" + split + "-images-idx3-ubyte.gz",
                          dir + "/" + split + "-labels-idx1-ubyte.gz", 10,
                          limit);
}

split_shards load_fashion_mnist_shards(const std::string& dir,
                                       const std::string& split,
                                       uint64_t limit, uint32_t num_pipelines,
                                       const std::vector<uint32_t>& ids) {
  check_split(split);
  return load_idx_shards(dir + "/" + split + "-images-idx3-ubyte.gz",
                         dir + "/" + split + "-labels-idx1-ubyte.gz", 10,
                         limit, num_pipelines, ids);
}

std::unique_ptr<data_provider> open_fashion_mnist(const job_config& cfg) {
  option_reader opts{cfg.data_options, "data", "fashion_mnist"};
  opts.finish();
  auto dir = cfg.data_dir.empty() ? job_config{}.data_dir : cfg.data_dir;
  auto train_limit = cfg.train_limit;
  auto test_limit = cfg.test_limit;
  data_schema known;
  known.dense_dim = 784;
  known.labels = label_kind::multiclass;
  known.classes = 10;
  return std::make_unique<memory_provider>(
    "fashion_mnist from " + dir,
    [=] { return load_fashion_mnist(dir, "train", train_limit); },
    [=] { return load_fashion_mnist(dir, "t10k", test_limit); }, known,
    [=](uint32_t pipelines, const std::vector<uint32_t>& ids) {
      return load_fashion_mnist_shards(dir, "train", train_limit, pipelines,
                                       ids);
    });
}

batch_source::~batch_source() {
  // nop
}

std::vector<uint32_t> shard_indices(uint64_t rows, const input_context& ctx) {
  std::vector<uint32_t> result;
  auto n = shard_size(rows, ctx);
  if (n == 0)
    return result;
  result.reserve(n);
  for (uint64_t i = ctx.input_pipeline_id; i < rows;
       i += ctx.num_input_pipelines)
    result.push_back(static_cast<uint32_t>(i));
  return result;
}

uint64_t shard_size(uint64_t rows, const input_context& ctx) noexcept {
  if (ctx.num_input_pipelines == 0
      || ctx.input_pipeline_id >= ctx.num_input_pipelines
      || ctx.input_pipeline_id >= rows)
    return 0;
  return (rows - ctx.input_pipeline_id - 1) / ctx.num_input_pipelines + 1;
}

batch_iterator::batch_iterator(std::shared_ptr<const dataset> data,
                               input_context ctx, uint64_t batch_size,
                               uint64_t seed)
  : data_(std::move(data)),
    ctx_(ctx),
    batch_size_(batch_size),
    seed_(seed),
    base_(shard_indices(data_->rows(), ctx)) {
  check_batch_size(data_->rows());
  shuffle_for_epoch();
}

batch_iterator::batch_iterator(dataset_shard shard, uint64_t batch_size,
                               uint64_t seed)
  : data_(std::move(shard.rows)),
    ctx_(shard.ctx),
    batch_size_(batch_size),
    seed_(seed) {
  auto expected = shard_size(shard.split_rows, ctx_);
  if (data_->rows() != expected)
    throw input_error(fmt::format("the shard of worker {} holds {} rows; {} "
                                  "rows over {} workers give it {}",
                                  ctx_.input_pipeline_id, data_->rows(),
                                  shard.split_rows, ctx_.num_input_pipelines,
                                  expected));
  base_.resize(expected);
  for (uint32_t j = 0; j < base_.size(); ++j)
    base_[j] = j;
  check_batch_size(shard.split_rows);
  shuffle_for_epoch();
}

void batch_iterator::check_batch_size(uint64_t split_rows) const {
  if (batch_size_ == 0)
    throw input_error("data.batch_size: must be at least 1");
  if (batch_size_ > base_.size())
    throw input_error(fmt::format("data.batch_size: {} is larger than the "
                                  "shard of worker {} ({} rows of {} over {} "
                                  "workers)",
                                  batch_size_, ctx_.input_pipeline_id,
                                  base_.size(), split_rows,
                                  ctx_.num_input_pipelines));
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
