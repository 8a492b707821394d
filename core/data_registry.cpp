#include "core/data_registry.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/libsvm.hpp"
#include "core/movielens.hpp"
#include "core/options.hpp"
#include "core/synthetic_ctr.hpp"

namespace actorps {

data_provider::~data_provider() {
  // nop
}

namespace {

// -- helpers --------------------------------------------------------------------

/// The job's data_dir, or `fallback` when the job left it empty or at the
/// job config's default (Fashion-MNIST's folder), which belongs to another
/// dataset.
std::string data_dir_or(const job_config& cfg, const std::string& fallback) {
  if (cfg.data_dir.empty() || cfg.data_dir == job_config{}.data_dir)
    return fallback;
  return cfg.data_dir;
}

/// `file` inside `dir`, unless `file` is absolute or `dir` is empty.
std::string resolve(const std::string& dir, const std::string& file) {
  if (dir.empty() || (!file.empty() && file.front() == '/'))
    return file;
  return dir + "/" + file;
}

/// Keeps the first `limit` rows of `ds` (0 = all).
void truncate(dataset& ds, uint64_t limit) {
  auto& ex = ds.examples;
  if (limit == 0 || limit >= ex.rows)
    return;
  ex.rows = limit;
  if (ex.dense_bytes.empty())
    ex.dense.resize(limit * ex.dense_dim);
  else
    ex.dense_bytes.resize(limit * ex.dense_dim);
  for (auto& f : ex.fields) {
    f.offsets.resize(limit + 1);
    f.keys.resize(f.offsets.back());
    if (!f.values.empty())
      f.values.resize(f.offsets.back());
  }
  ex.labels.resize(limit);
}

bool same_schema(const data_schema& a, const data_schema& b) {
  if (a.dense_dim != b.dense_dim || a.labels != b.labels
      || a.classes != b.classes || a.fields.size() != b.fields.size())
    return false;
  for (size_t f = 0; f < a.fields.size(); ++f)
    if (a.fields[f].name != b.fields[f].name
        || a.fields[f].vocabulary != b.fields[f].vocabulary
        || a.fields[f].weighted != b.fields[f].weighted)
      return false;
  return true;
}

std::string to_string(const data_schema& s) {
  std::string fields;
  for (auto& f : s.fields)
    fields += fmt::format(" {}[{}{}]", f.name, f.vocabulary,
                          f.weighted ? ", weighted" : "");
  return fmt::format("{} dense,{} {} labels ({} classes)", s.dense_dim,
                     fields.empty() ? " no fields," : fields + ",",
                     s.labels == label_kind::binary ? "binary" : "multiclass",
                     s.classes);
}

// -- in-memory datasets ---------------------------------------------------------

/// A dataset whose splits are loaded into memory on first use, each once.
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
class memory_provider final : public data_provider {
public:
  using loader = std::function<dataset()>;

  /// Loads the shards `ids` of `pipelines` input pipelines of the training
  /// split in one pass (with no ids: checks and counts the split).
  using shard_loader = std::function<split_shards(
    uint32_t pipelines, const std::vector<uint32_t>& ids)>;

  /// @param known  the schema if it is known without loading (it is then
  ///               checked against the loaded splits).
  /// @param shards  loads training shards alone (none: the whole training
  ///                split is loaded for every source, as `train` gives it).
  memory_provider(std::string description, loader train, loader test,
                  std::optional<data_schema> known = std::nullopt,
                  shard_loader shards = nullptr)
    : description_(std::move(description)),
      load_train_(std::move(train)),
      load_test_(std::move(test)),
      load_shards_(std::move(shards)),
      schema_(std::move(known)) {
    // nop
  }

  const data_schema& schema() override {
    if (!schema_)
      schema_ = train()->schema;
    return *schema_;
  }

  uint64_t train_rows() override {
    if (!load_shards_)
      return train()->rows();
    if (!train_rows_)
      train_rows_ = load_shards_(1, {}).split_rows;
    counted_ = true;
    return *train_rows_;
  }

  std::shared_ptr<batch_source> train_source(const input_context& ctx,
                                             uint64_t batch_size,
                                             uint64_t seed) override {
    if (!load_shards_ || ctx.num_input_pipelines == 0
        || ctx.input_pipeline_id >= ctx.num_input_pipelines)
      return std::make_shared<batch_iterator>(train(), ctx, batch_size, seed);
    return std::make_shared<batch_iterator>(shard(ctx), batch_size, seed);
  }

  std::shared_ptr<const dataset> test_set() override {
    if (!test_)
      test_ = checked(load_test_(), "test");
    return test_;
  }

  std::string describe() const override {
    return description_;
  }

private:
  const std::shared_ptr<const dataset>& train() {
    if (!train_)
      train_ = checked(load_train_(), "training");
    return train_;
  }

  /// The training shard of `ctx`, loaded on first use: alone in a worker
  /// process, with every other shard not loaded yet otherwise (see above).
  const dataset_shard& shard(const input_context& ctx) {
    auto key = std::make_pair(ctx.num_input_pipelines, ctx.input_pipeline_id);
    if (auto i = shards_.find(key); i != shards_.end())
      return i->second;
    std::vector<uint32_t> ids{ctx.input_pipeline_id};
    bool alone = !counted_;
    for (auto& [k, loaded] : shards_)
      alone = alone && k.first != ctx.num_input_pipelines;
    if (!alone) {
      ids.clear();
      for (uint32_t id = 0; id < ctx.num_input_pipelines; ++id)
        if (shards_.count({ctx.num_input_pipelines, id}) == 0)
          ids.push_back(id);
    }
    auto loaded = load_shards_(ctx.num_input_pipelines, ids);
    train_rows_ = loaded.split_rows;
    if (loaded.split_rows == 0)
      throw input_error(fmt::format("{}: the training split has no examples",
                                    description_));
    for (auto& sh : loaded.shards) {
      if (schema_ && !same_schema(*schema_, sh.rows->schema))
        throw input_error(fmt::format("{}: the training split holds {}, "
                                      "expected {}",
                                      description_,
                                      to_string(sh.rows->schema),
                                      to_string(*schema_)));
      shards_.emplace(std::make_pair(sh.ctx.num_input_pipelines,
                                     sh.ctx.input_pipeline_id),
                      std::move(sh));
    }
    return shards_.at(key);
  }

  std::shared_ptr<const dataset> checked(dataset ds, const char* split) {
    if (ds.rows() == 0)
      throw input_error(fmt::format("{}: the {} split has no examples",
                                    description_, split));
    if (schema_ && !same_schema(*schema_, ds.schema))
      throw input_error(fmt::format("{}: the {} split holds {}, expected {}",
                                    description_, split,
                                    to_string(ds.schema),
                                    to_string(*schema_)));
    if (!schema_)
      schema_ = ds.schema;
    return std::make_shared<const dataset>(std::move(ds));
  }

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

/// The schema of a LIBSVM file with `num_features` features.
data_schema libsvm_schema(uint64_t num_features) {
  data_schema s;
  s.fields.push_back(field_schema{"features", num_features, true});
  s.labels = label_kind::binary;
  s.classes = 2;
  return s;
}

std::unique_ptr<data_provider>
libsvm_provider(const std::string& name, const std::string& train_path,
                const std::string& test_path, uint64_t num_features,
                bool one_based, const job_config& cfg) {
  auto train_limit = cfg.train_limit;
  auto test_limit = cfg.test_limit;
  return std::make_unique<memory_provider>(
    fmt::format("{} from {} and {}", name, train_path, test_path),
    [=] { return load_libsvm(train_path, num_features, one_based,
                             train_limit); },
    [=] { return load_libsvm(test_path, num_features, one_based,
                             test_limit); },
    libsvm_schema(num_features));
}

// -- registry entries ---------------------------------------------------------------

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

std::unique_ptr<data_provider> open_libsvm(const job_config& cfg) {
  option_reader opts{cfg.data_options, "data", "libsvm"};
  for (auto field : {"train_file", "test_file", "num_features"})
    if (!opts.has(field))
      throw input_error(fmt::format("data.{}: required for libsvm", field));
  auto train_file = opts.get_string("train_file", "");
  auto test_file = opts.get_string("test_file", "");
  auto num_features = opts.get_uint("num_features", 0, 1, uint64_t{1} << 40);
  auto one_based = opts.get_bool("one_based", true);
  opts.finish();
  if (train_file.empty() || test_file.empty())
    throw input_error(fmt::format("data.{}: must name a file",
                                  train_file.empty() ? "train_file"
                                                     : "test_file"));
  auto dir = data_dir_or(cfg, "");
  return libsvm_provider("libsvm", resolve(dir, train_file),
                         resolve(dir, test_file), num_features, one_based,
                         cfg);
}

std::unique_ptr<data_provider> open_a9a(const job_config& cfg) {
  option_reader opts{cfg.data_options, "data", "a9a"};
  opts.finish();
  auto dir = data_dir_or(cfg, "data/a9a");
  return libsvm_provider("a9a", resolve(dir, "a9a.gz"),
                         resolve(dir, "a9a.t.gz"), 123, true, cfg);
}

std::unique_ptr<data_provider> open_movielens(const job_config& cfg) {
  option_reader opts{cfg.data_options, "data", "movielens"};
  opts.finish();
  auto dir = data_dir_or(cfg, "data/movielens");
  // One read of the CSV gives both splits; each loader takes its own.
  auto both = std::make_shared<std::optional<movielens_data>>();
  auto load = [both, dir] {
    if (!*both)
      *both = load_movielens(dir);
    return both;
  };
  auto train_limit = cfg.train_limit;
  auto test_limit = cfg.test_limit;
  return std::make_unique<memory_provider>(
    "movielens from " + dir + "/movielens.csv",
    [=] {
      auto ds = std::move((*load())->train);
      truncate(ds, train_limit);
      return ds;
    },
    [=] {
      auto ds = std::move((*load())->test);
      truncate(ds, test_limit);
      return ds;
    });
}

/// The synthetic click log: training batches generated on the fly.
class synthetic_ctr_provider final : public data_provider {
public:
  synthetic_ctr_provider(synthetic_ctr_config cfg, uint64_t test_limit)
    : cfg_(std::move(cfg)), test_limit_(test_limit) {
    // nop
  }

  const data_schema& schema() override {
    return gen()->schema();
  }

  uint64_t train_rows() override {
    return cfg_.rows_per_epoch;
  }

  std::shared_ptr<batch_source> train_source(const input_context& ctx,
                                             uint64_t batch_size,
                                             uint64_t seed) override {
    return std::make_shared<synthetic_ctr_source>(gen(), ctx, batch_size,
                                                  seed);
  }

  std::shared_ptr<const dataset> test_set() override {
    if (!test_) {
      auto rows = cfg_.test_rows;
      if (test_limit_ != 0)
        rows = std::min(rows, test_limit_);
      test_ = std::make_shared<const dataset>(gen()->make_test_set(rows));
    }
    return test_;
  }

  std::string describe() const override {
    return fmt::format("synthetic_ctr (seed {}, {} dense features, {} "
                       "fields, {} rows per epoch, {} test rows)",
                       cfg_.seed, cfg_.dense_features,
                       cfg_.cardinalities.size(), cfg_.rows_per_epoch,
                       cfg_.test_rows);
  }

private:
  const std::shared_ptr<const synthetic_ctr>& gen() {
    if (!gen_)
      gen_ = std::make_shared<const synthetic_ctr>(cfg_);
    return gen_;
  }

  synthetic_ctr_config cfg_;
  uint64_t test_limit_;
  std::shared_ptr<const synthetic_ctr> gen_;
  std::shared_ptr<const dataset> test_;
};

std::unique_ptr<data_provider> open_synthetic_ctr(const job_config& cfg) {
  option_reader opts{cfg.data_options, "data", "synthetic_ctr"};
  auto sc = read_synthetic_ctr_config(opts);
  opts.finish();
  if (cfg.train_limit != 0)
    sc.rows_per_epoch = std::min(sc.rows_per_epoch, cfg.train_limit);
  return std::make_unique<synthetic_ctr_provider>(std::move(sc),
                                                  cfg.test_limit);
}

/// The registry: one line per dataset.
const dataset_entry registry[] = {
  {"fashion_mnist", open_fashion_mnist},
  {"libsvm", open_libsvm},
  {"a9a", open_a9a},
  {"movielens", open_movielens},
  {"synthetic_ctr", open_synthetic_ctr},
};

} // namespace

std::unique_ptr<data_provider> open_dataset(const job_config& cfg) {
  for (auto& entry : registry)
    if (cfg.dataset == entry.name)
      return entry.open(cfg);
  throw input_error(fmt::format("data.dataset: unknown dataset \"{}\" "
                                "(known: {})",
                                cfg.dataset, fmt::join(dataset_names(), ", ")));
}

std::vector<std::string> dataset_names() {
  std::vector<std::string> result;
  for (auto& entry : registry)
    result.emplace_back(entry.name);
  return result;
}

} // namespace actorps
