#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/example_batch.hpp"

namespace actorps {

class data_provider;
struct job_config;

/// A labelled dataset held in memory: its schema and all its examples.
struct dataset {
  data_schema schema;
  example_batch examples;

  uint64_t rows() const noexcept {
    return examples.rows;
  }
};

/// Loads an image/label pair of IDX files (gzip or plain) as a multiclass
/// dataset whose dense features are the pixels scaled to [0, 1] (byte / 255).
/// Keeps the first `limit` rows (0 = all). The pixels are held as bytes
/// (examples.dense_bytes, rows x pixels per image, byte_scale 1/255; a
/// quarter of the floats' memory); the batches built from it
/// (example_batch::append_row, batch_iterator) hold floats, exactly
/// `static_cast<float>(byte) * (1.0f / 255.0f)`.
/// @throws input_error naming the file if either is missing, truncated or
///         corrupt, or if their item counts differ, or if a label is >= classes.
dataset load_idx_dataset(const std::string& images, const std::string& labels,
                         uint32_t classes, uint64_t limit = 0);

/// Loads Fashion-MNIST's "train" or "t10k" split from `dir` (Debian's
/// dataset-fashion-mnist installs it in /usr/share/datasets/fashion-mnist).
dataset load_fashion_mnist(const std::string& dir, const std::string& split,
                           uint64_t limit = 0);

/// Opens the dataset "fashion_mnist" (core/data_registry.hpp): the splits
/// "train" and "t10k" in data.data_dir (the job config's default folder when
/// empty), 784 dense pixels and 10 classes, known without reading; a worker
/// process loads its own shard of the training split alone. No data fields.
/// @throws input_error for a data field. Files are not read yet.
std::unique_ptr<data_provider> open_fashion_mnist(const job_config& cfg);

/// What a per-worker dataset function learns about the worker it builds for,
/// as TensorFlow's `tf.distribute.InputContext`.
struct input_context {
  /// Number of input pipelines (= workers) and this one's index.
  uint32_t num_input_pipelines = 1;
  uint32_t input_pipeline_id = 0;
};

/// Row indices of the shard of a dataset of `rows` rows that input pipeline
/// `ctx.input_pipeline_id` reads: every row i with
/// i % num_input_pipelines == input_pipeline_id (TF's `Dataset.shard`). The
/// shards of all pipelines are disjoint and together cover every row.
std::vector<uint32_t> shard_indices(uint64_t rows, const input_context& ctx);

/// The number of rows shard_indices(rows, ctx) names, without building them.
uint64_t shard_size(uint64_t rows, const input_context& ctx) noexcept;

/// The shard of one input pipeline held without the rest of its split: row j
/// of `rows` is row `ctx.input_pipeline_id + j * ctx.num_input_pipelines` of
/// a split of `split_rows` rows, i.e. the rows shard_indices(split_rows, ctx)
/// names, in that order. A worker process keeps only this (1/workers of the
/// split), not the split.
struct dataset_shard {
  std::shared_ptr<const dataset> rows;
  input_context ctx;
  uint64_t split_rows = 0;
};

/// Some shards of a split, read in one pass over its files.
struct split_shards {
  /// Rows of the split (after its limit), all shards together.
  uint64_t split_rows = 0;
  /// One per requested pipeline id, in the order requested.
  std::vector<dataset_shard> shards;
};

/// Loads from an image/label pair of IDX files, as load_idx_dataset, only
/// the shards of the input pipelines `ids` of `num_pipelines` (of the first
/// `limit` rows; 0 = all). Reads each file once, a chunk at a time, and
/// keeps only the kept rows: the memory held is the kept shards (pixels as
/// bytes, as load_idx_dataset) plus the labels file, never the whole image
/// file. With no ids it
/// checks the files and counts the rows (split_rows) while keeping nothing.
/// @throws input_error as load_idx_dataset (every row of the split is
///         checked, also those of other shards); std::invalid_argument if
///         num_pipelines is 0 or an id is >= num_pipelines or repeated.
split_shards load_idx_shards(const std::string& images,
                             const std::string& labels, uint32_t classes,
                             uint64_t limit, uint32_t num_pipelines,
                             const std::vector<uint32_t>& ids);

/// load_idx_shards on Fashion-MNIST's "train" or "t10k" split in `dir`.
split_shards load_fashion_mnist_shards(const std::string& dir,
                                       const std::string& split,
                                       uint64_t limit, uint32_t num_pipelines,
                                       const std::vector<uint32_t>& ids);

/// Where a batch source is: the epoch over its shard and the offset within
/// it. Enough to restart a source exactly (for checkpoints).
struct data_position {
  uint64_t epoch = 0;
  uint64_t offset = 0;
};

/// A worker's endless stream of minibatches (TF's per-worker dataset
/// iterator). Not thread-safe: one source per worker.
class batch_source {
public:
  virtual ~batch_source();

  /// Fills `out` with the next batch_size() examples and advances. `out` is
  /// reset first (example_batch::reset), which keeps its memory: a batch
  /// reused every step allocates nothing once it has grown.
  virtual void next(example_batch& out) = 0;

  /// Jumps to `pos` (as returned by position()).
  /// @throws input_error if pos.offset > shard_rows().
  virtual void seek(data_position pos) = 0;

  virtual data_position position() const = 0;

  /// Examples per batch.
  virtual uint64_t batch_size() const = 0;

  /// Examples of this worker's shard in one epoch.
  virtual uint64_t shard_rows() const = 0;

  virtual const data_schema& schema() const = 0;
};

/// A shuffled, repeated, batched view of a shard of an in-memory dataset:
/// TF's `ds.shard(n, i).shuffle(...).repeat().batch(b)` with a full reshuffle
/// of the shard at each epoch, seeded by (seed, pipeline, epoch), so that the
/// order is reproducible from a data_position. Batches run across epoch
/// boundaries (repeat before batch), so every batch is full.
class batch_iterator final : public batch_source {
public:
  /// Reads the shard of `ctx` from the whole split `data`.
  /// @throws input_error if batch_size is 0 or larger than the shard.
  batch_iterator(std::shared_ptr<const dataset> data, input_context ctx,
                 uint64_t batch_size, uint64_t seed);

  /// Reads a shard held alone. Gives exactly the batches (rows and order, for
  /// every data_position) that the constructor above gives for shard.ctx on
  /// the whole split: a shuffle permutes positions in the shard whatever
  /// their values, so shuffling the shard's own row numbers 0..n-1 picks
  /// row j where the split's row numbers pick split row id + j x pipelines.
  /// @throws input_error if batch_size is 0 or larger than the shard, or the
  ///         shard does not hold shard_size(split_rows, ctx) rows.
  batch_iterator(dataset_shard shard, uint64_t batch_size, uint64_t seed);

  void next(example_batch& out) override;
  void seek(data_position pos) override;

  data_position position() const override {
    return pos_;
  }

  uint64_t batch_size() const override {
    return batch_size_;
  }

  uint64_t shard_rows() const override {
    return indices_.size();
  }

  const data_schema& schema() const override {
    return data_->schema;
  }

  /// The rows it reads from: the whole split, or the shard alone.
  const dataset& data() const noexcept {
    return *data_;
  }

private:
  void check_batch_size(uint64_t split_rows) const;

  void shuffle_for_epoch();

  std::shared_ptr<const dataset> data_;
  input_context ctx_;
  uint64_t batch_size_;
  uint64_t seed_;
  std::vector<uint32_t> base_;    // the shard's rows of data_, in order
  std::vector<uint32_t> indices_; // the shard, in this epoch's order
  data_position pos_;
};

/// Builds a worker's batch source from its input context; the coordinator
/// calls it once per worker (TF's `create_per_worker_dataset(dataset_fn)`).
using dataset_fn
  = std::function<std::shared_ptr<batch_source>(const input_context&)>;

} // namespace actorps
