#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/data_registry.hpp"

namespace actorps {

/// A data_provider whose splits are loaded into memory on first use, each
/// once: what most datasets' openers return (fashion_mnist, libsvm, a9a,
/// movielens), and what a dataset registered at run time may return around
/// its own loaders.
///
/// With a shard loader, the training split is never held whole:
/// - train_rows() reads the files to count and check them, keeping no row:
///   the coordinator of a multi-process job needs the count, not the rows.
/// - A process that asks for one worker's source without counting first (a
///   worker process: `actorps node --role worker`) loads that worker's shard
///   alone, 1/workers of the split.
/// - A process that counted first (the trainer does) or asks for a second
///   shard runs every worker itself (`actorps train`): it loads every shard
///   not loaded yet, in one pass over the files. The shards are disjoint, so
///   together they hold each row once, as the whole split did.
/// So a worker process reads the files once, `actorps train` twice (count,
/// then all shards; 0.2 s each for Fashion-MNIST here), the coordinator of a
/// multi-process job once.
///
/// Errors (input_error, naming the description): a split with no examples,
/// or one whose schema differs from the known one or the other split's.
/// Not thread-safe, as data_provider.
class memory_provider final : public data_provider {
public:
  /// Loads a whole split.
  using loader = std::function<dataset()>;

  /// Loads the shards `ids` of `pipelines` input pipelines of the training
  /// split in one pass (with no ids: checks and counts the split).
  using shard_loader = std::function<split_shards(
    uint32_t pipelines, const std::vector<uint32_t>& ids)>;

  /// @param description  for messages and describe() ("a9a from DIR").
  /// @param known  the schema if it is known without loading (it is then
  ///               checked against the loaded splits).
  /// @param shards  loads training shards alone (none: the whole training
  ///                split is loaded for every source, as `train` gives it).
  memory_provider(std::string description, loader train, loader test,
                  std::optional<data_schema> known = std::nullopt,
                  shard_loader shards = nullptr);

  const data_schema& schema() override;

  uint64_t train_rows() override;

  std::shared_ptr<batch_source> train_source(const input_context& ctx,
                                             uint64_t batch_size,
                                             uint64_t seed) override;

  std::shared_ptr<const dataset> test_set() override;

  /// Loads the whole training split (also in a worker process) and reads
  /// its ranges (dataset_ranges).
  std::shared_ptr<range_reader> train_ranges(uint64_t seed) override;

  std::string describe() const override;

private:
  const std::shared_ptr<const dataset>& train();

  /// The training shard of `ctx`, loaded on first use: alone in a worker
  /// process, with every other shard not loaded yet otherwise (see above).
  const dataset_shard& shard(const input_context& ctx);

  std::shared_ptr<const dataset> checked(dataset ds, const char* split);

  std::string description_;
  loader load_train_;
  loader load_test_;
  shard_loader load_shards_;
  std::optional<data_schema> schema_;
  std::shared_ptr<const dataset> train_;
  std::shared_ptr<const dataset> test_;
  std::optional<uint64_t> train_rows_;
  /// Whether train_rows() was asked: this process runs the job.
  bool counted_ = false;
  /// Loaded training shards by (pipelines, id).
  std::map<std::pair<uint32_t, uint32_t>, dataset_shard> shards_;
};

} // namespace actorps
