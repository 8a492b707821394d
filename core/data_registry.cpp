#include "core/data_registry.hpp"
#include "core/stream_ranges.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/libsvm.hpp"
#include "core/movielens.hpp"
#include "core/registry.hpp"
#include "core/synthetic_ctr.hpp"

namespace actorps {

data_provider::~data_provider() {
  // nop
}

std::shared_ptr<range_reader> data_provider::train_ranges(uint64_t) {
  return nullptr;
}

namespace {

/// The built-in datasets: one line per dataset; each opener lives beside
/// its loader.
const struct {
  const char* name;
  std::unique_ptr<data_provider> (*open)(const job_config& cfg);
} built_in[] = {
  {"fashion_mnist", open_fashion_mnist},
  {"libsvm", open_libsvm},
  {"a9a", open_a9a},
  {"movielens", open_movielens},
  {"synthetic_ctr", open_synthetic_ctr},
};

/// The built-in datasets, then those added at run time (register_dataset).
registry<dataset_opener>& datasets() {
  static registry<dataset_opener> r{
    "register_dataset", "dataset", built_in,
    [](auto& line) { return dataset_opener{line.open}; }};
  return r;
}

} // namespace

std::unique_ptr<data_provider> open_dataset(const job_config& cfg) {
  if (!cfg.stream_dir.empty())
    return open_stream_provider(cfg);
  if (auto open = datasets().find(cfg.dataset))
    return (*open)(cfg);
  throw input_error(fmt::format("data.dataset: unknown dataset \"{}\" "
                                "(known: {})",
                                cfg.dataset, datasets().known()));
}

std::vector<std::string> dataset_names() {
  return datasets().names();
}

void register_dataset(const std::string& name, dataset_opener open) {
  if (!open)
    throw std::invalid_argument(
      fmt::format("register_dataset(\"{}\"): empty opener", name));
  datasets().add(name, std::move(open));
}

bool unregister_dataset(const std::string& name) {
  return datasets().remove(name).has_value();
}

// -- helpers for openers --------------------------------------------------------

std::string dataset_dir(const job_config& cfg, const std::string& fallback) {
  if (cfg.data_dir.empty() || cfg.data_dir == job_config{}.data_dir)
    return fallback;
  return cfg.data_dir;
}

std::string resolve_data_file(const std::string& dir,
                              const std::string& file) {
  if (dir.empty() || (!file.empty() && file.front() == '/'))
    return file;
  return dir + "/" + file;
}

} // namespace actorps
