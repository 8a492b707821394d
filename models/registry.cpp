#include "models/registry.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/options.hpp"
#include "core/registry.hpp"
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

/// The built-in models: one line per model.
const struct {
  const char* name;
  std::shared_ptr<const model> (*make)(const job_config&, const data_schema&);
} built_in_models[] = {
  {"mlp", make_mlp},
  {"sparse_logistic_regression", make_sparse_logreg},
  {"embedding_mlp", make_embedding_mlp},
};

/// The built-in models, then those added at run time (register_model).
registry<model_factory>& models() {
  static registry<model_factory> r{
    "register_model", "model", built_in_models,
    [](auto& line) { return model_factory{line.make}; }};
  return r;
}

} // namespace

std::shared_ptr<const model> make_model(const job_config& cfg,
                                        const data_schema& schema) {
  if (auto make = models().find(cfg.model)) {
    try {
      return (*make)(cfg, schema);
    } catch (const input_error& err) {
      // Errors name the field; say which config file it is in, as the
      // config parser does.
      throw input_error(fmt::format("{}: {}", cfg.source, err.what()));
    }
  }
  throw input_error(fmt::format("{}: model.type: unknown model \"{}\" "
                                "(known: {})",
                                cfg.source, cfg.model, models().known()));
}

std::vector<std::string> model_names() {
  return models().names();
}

void register_model(const std::string& name, model_factory make) {
  if (!make)
    throw std::invalid_argument(
      fmt::format("register_model(\"{}\"): empty factory", name));
  models().add(name, std::move(make));
}

bool unregister_model(const std::string& name) {
  return models().remove(name).has_value();
}

} // namespace actorps
