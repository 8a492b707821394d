#include "models/registry.hpp"

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/options.hpp"
#include "models/embedding_mlp.hpp"
#include "models/mlp.hpp"
#include "models/sparse_logreg.hpp"

namespace actorps {

namespace {

/// mlp: model.layers (default: the data's dense width -> 256 -> 128 ->
/// classes). No other fields.
std::shared_ptr<const model> make_mlp(const job_config& cfg,
                                      const data_schema& schema) {
  option_reader opts{cfg.model_options, "model", "mlp"};
  opts.finish();
  auto layers = cfg.layers;
  if (layers.empty())
    layers = {schema.dense_dim, 256, 128, schema.classes};
  auto net = std::make_shared<mlp>(std::move(layers));
  net->check_schema(schema);
  return net;
}

/// sparse_logistic_regression: no layers, no other fields.
std::shared_ptr<const model> make_sparse_logreg(const job_config& cfg,
                                                const data_schema& schema) {
  option_reader opts{cfg.model_options, "model", "sparse_logistic_regression"};
  opts.finish();
  if (!cfg.layers.empty())
    throw input_error("model.layers: sparse_logistic_regression has no "
                      "layers; remove the field");
  return std::make_shared<sparse_logreg>(schema);
}

/// embedding_mlp: embedding_dim, combiner, init_scale; model.layers (default:
/// the concatenated width -> 64 -> 32 -> 1).
std::shared_ptr<const model> make_embedding_mlp(const job_config& cfg,
                                                const data_schema& schema) {
  option_reader opts{cfg.model_options, "model", "embedding_mlp"};
  auto dim = opts.get_uint("embedding_dim", 16, 1, 4096);
  auto combiner = opts.get_string("combiner", "mean", {"mean", "sum"});
  auto scale = opts.get_real("init_scale", 0.05, 0.0, 10.0);
  opts.finish();
  auto layers = cfg.layers;
  if (layers.empty())
    layers = {schema.fields.size() * dim + schema.dense_dim, 64, 32, 1};
  return std::make_shared<embedding_mlp>(schema, std::move(layers), dim,
                                         combiner == "mean",
                                         static_cast<float>(scale));
}

struct model_entry {
  const char* name;
  std::shared_ptr<const model> (*make)(const job_config&, const data_schema&);
};

/// The registry: one line per model.
const model_entry registry[] = {
  {"mlp", make_mlp},
  {"sparse_logistic_regression", make_sparse_logreg},
  {"embedding_mlp", make_embedding_mlp},
};

/// Models added at run time (register_model), after the built-in ones.
struct registered_models {
  std::mutex mtx;
  std::vector<std::pair<std::string, model_factory>> entries;
};

registered_models& added() {
  static registered_models x;
  return x;
}

/// The factory of `name`: built in first, then registered; empty if none.
model_factory find_factory(const std::string& name) {
  for (auto& e : registry)
    if (name == e.name)
      return e.make;
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  for (auto& [n, make] : r.entries)
    if (n == name)
      return make;
  return {};
}

} // namespace

std::shared_ptr<const model> make_model(const job_config& cfg,
                                        const data_schema& schema) {
  if (auto make = find_factory(cfg.model)) {
    try {
      return make(cfg, schema);
    } catch (const input_error& err) {
      // Errors name the field; say which config file it is in, as the
      // config parser does.
      throw input_error(fmt::format("{}: {}", cfg.source, err.what()));
    }
  }
  std::string known;
  for (auto& name : model_names())
    known += (known.empty() ? "" : ", ") + name;
  throw input_error(fmt::format("{}: model.type: unknown model \"{}\" "
                                "(known: {})",
                                cfg.source, cfg.model, known));
}

std::vector<std::string> model_names() {
  std::vector<std::string> result;
  for (auto& e : registry)
    result.emplace_back(e.name);
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  for (auto& entry : r.entries)
    result.push_back(entry.first);
  return result;
}

void register_model(const std::string& name, model_factory make) {
  if (name.empty())
    throw std::invalid_argument("register_model: empty name");
  if (!make)
    throw std::invalid_argument(
      fmt::format("register_model(\"{}\"): empty factory", name));
  for (auto& e : registry)
    if (name == e.name)
      throw std::invalid_argument(fmt::format(
        "register_model(\"{}\"): a built-in model has that name", name));
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  for (auto& entry : r.entries)
    if (entry.first == name)
      throw std::invalid_argument(fmt::format(
        "register_model(\"{}\"): registered before", name));
  r.entries.emplace_back(name, std::move(make));
}

bool unregister_model(const std::string& name) {
  auto& r = added();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto i = std::find_if(r.entries.begin(), r.entries.end(),
                        [&](auto& entry) { return entry.first == name; });
  if (i == r.entries.end())
    return false;
  r.entries.erase(i);
  return true;
}

} // namespace actorps
