#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dataset.hpp"

namespace actorps {

struct job_config;

/// A job's data, as one registry entry provides it: the schema, the
/// training split as one batch source per worker, and the test split in
/// memory. Loading happens on first use and is cached, so a parameter server
/// that needs only the schema, or a worker that needs only its training
/// source, loads no more than that.
/// Not thread-safe.
class data_provider {
public:
  virtual ~data_provider();

  /// The shape of the examples.
  /// @throws input_error if the data cannot be read (missing, malformed).
  virtual const data_schema& schema() = 0;

  /// Training examples in one pass over the whole training split (all
  /// workers together); steps_per_epoch is derived from it.
  virtual uint64_t train_rows() = 0;

  /// The training batches of worker `ctx` (its shard of the training split),
  /// `batch_size` examples each, shuffled with `seed`.
  /// @throws input_error for unreadable data or a batch larger than the shard.
  virtual std::shared_ptr<batch_source>
  train_source(const input_context& ctx, uint64_t batch_size, uint64_t seed)
    = 0;

  /// The test split.
  virtual std::shared_ptr<const dataset> test_set() = 0;

  /// Where the data comes from, for messages ("fashion_mnist from DIR").
  virtual std::string describe() const = 0;
};

/// Opens the dataset cfg.dataset names (the registry: fashion_mnist, libsvm,
/// a9a, movielens, synthetic_ctr), with the data section's fields
/// (cfg.data_dir, limits, cfg.data_options).
/// @throws input_error "data.dataset: unknown dataset \"x\" (known: ...)" or
///         naming a data option that is wrong. Files are not read yet.
std::unique_ptr<data_provider> open_dataset(const job_config& cfg);

/// The names the dataset registry knows, in registry order.
std::vector<std::string> dataset_names();

/// One registry entry: its name and how to open it.
struct dataset_entry {
  const char* name;
  std::unique_ptr<data_provider> (*open)(const job_config& cfg);
};

} // namespace actorps
