#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/data_range.hpp"
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

  /// Dynamic data shards (data.sharding dynamic, core/dataset_ranges.hpp):
  /// a reader of any range of the whole training split, range r being the
  /// positions [r.begin, r.end) of epoch r.part's order of the split
  /// (shuffled with `seed`), the same in every process. A worker process
  /// then holds the whole split, not 1/workers of it. Null (the default):
  /// the dataset cannot be read so (the job refuses dynamic shards).
  /// @throws input_error for unreadable data.
  virtual std::shared_ptr<range_reader> train_ranges(uint64_t seed);

  /// Where the data comes from, for messages ("fashion_mnist from DIR").
  virtual std::string describe() const = 0;
};

/// Opens the stream cfg.stream_dir names (open_stream_provider,
/// core/stream_ranges.hpp), else the dataset cfg.dataset names, with the data section's fields
/// (cfg.data_dir, limits, cfg.data_options). The registry
/// (core/data_registry.cpp) holds fashion_mnist (core/dataset.hpp), libsvm
/// and a9a (core/libsvm.hpp), movielens (core/movielens.hpp), synthetic_ctr
/// (core/synthetic_ctr.hpp), and those added with register_dataset.
/// @throws input_error "data.dataset: unknown dataset \"x\" (known: ...)" or
///         naming a data option that is wrong. Files are not read yet.
std::unique_ptr<data_provider> open_dataset(const job_config& cfg);

/// The names the dataset registry knows, sorted.
std::vector<std::string> dataset_names();

/// Opens a dataset from a job config: reads the data section's fields
/// (cfg.data_options through an option_reader, whose finish() refuses the
/// fields it did not read), reads no file yet. Throws input_error naming the
/// field for a wrong one.
using dataset_opener
  = std::function<std::unique_ptr<data_provider>(const job_config& cfg)>;

/// Adds the dataset `name` to the registry at run time, so that a program
/// built on the library (an outside project) can train on its own data by
/// name (data.dataset) without editing actorps; memory_provider
/// (core/memory_provider.hpp) wraps loaders that read whole splits.
///
/// Call it before the job config is validated, in every process of a
/// cluster (each process opens its data itself). Thread-safe.
/// @throws std::invalid_argument "register_dataset(\"NAME\"): ..." if `name`
///         is empty or taken (built in or registered before), or `open` is
///         empty; the registry is then unchanged.
void register_dataset(const std::string& name, dataset_opener open);

/// Removes the dataset `name` that register_dataset added, so that the name
/// is free again (a test that registered its own, a plug-in being unloaded).
/// Built-in datasets are never removed; providers opened before stay valid.
/// Thread-safe.
/// @returns whether `name` was a registered dataset.
bool unregister_dataset(const std::string& name);

// -- helpers for openers ----------------------------------------------------------

/// The job's data_dir, or `fallback` when the job left it empty or at the
/// job config's default (Fashion-MNIST's folder), which belongs to another
/// dataset.
std::string dataset_dir(const job_config& cfg, const std::string& fallback);

/// `file` inside `dir`, unless `file` is absolute or `dir` is empty.
std::string resolve_data_file(const std::string& dir, const std::string& file);

} // namespace actorps
