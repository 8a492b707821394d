#include "models/registry.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "models/step_function.hpp"

using namespace actorps;

namespace {

/// 20 dense features, 5 classes (an image dataset).
data_schema images() {
  data_schema s;
  s.dense_dim = 20;
  s.labels = label_kind::multiclass;
  s.classes = 5;
  return s;
}

/// Fields "ad" (vocabulary 10) and "words" (unbounded, weighted), 3 dense
/// features, 0/1 labels (a click log). Concatenated width with
/// embedding_dim d: 2 d + 3.
data_schema clicks() {
  data_schema s;
  s.dense_dim = 3;
  s.fields = {{"ad", 10, false}, {"words", 0, true}};
  s.labels = label_kind::binary;
  return s;
}

job_config config(const std::string& model, std::vector<uint64_t> layers = {},
                  option_map options = {}) {
  job_config cfg;
  cfg.model = model;
  cfg.layers = std::move(layers);
  cfg.model_options = std::move(options);
  cfg.source = "job.json";
  return cfg;
}

/// make_model's input_error message after the config's name ("job.json: "),
/// or "" if it builds.
std::string refusal(const job_config& cfg, const data_schema& schema) {
  try {
    make_model(cfg, schema);
  } catch (const input_error& e) {
    std::string what = e.what();
    CHECK_THAT(what, Catch::StartsWith(cfg.source + ": "));
    return what.substr(std::min(what.size(), cfg.source.size() + 2));
  }
  return "";
}

} // namespace

TEST_CASE("the registry builds every model it names", "[models][registry]") {
  CHECK(model_names()
        == std::vector<std::string>{"embedding_mlp", "mlp",
                                    "sparse_logistic_regression"});
  for (auto& name : model_names()) {
    INFO(name);
    auto schema = name == "mlp" ? images() : clicks();
    auto net = make_model(config(name), schema);
    REQUIRE(net != nullptr);
    CHECK_NOTHROW(net->check_schema(schema));
    CHECK(net->dense_parameters() > 0);
  }
}

TEST_CASE("an mlp without layers takes its input width and classes from the "
          "data",
          "[models][registry]") {
  auto net = make_model(config("mlp"), images());
  auto vars = net->variables();
  REQUIRE(vars.size() == 6);
  CHECK(vars[0].name == "dense_0/kernel");
  CHECK(vars[0].rows == 20);
  CHECK(vars[0].cols == 256);
  CHECK(vars[4].rows == 128);
  CHECK(vars[4].cols == 5);
  CHECK(vars[5].rows == 5);
  CHECK(make_model(config("mlp", {20, 7, 5}), images())->dense_parameters()
        == 20 * 7 + 7 + 7 * 5 + 5);
}

TEST_CASE("models read their own options from the model section",
          "[models][registry]") {
  auto net = make_model(config("embedding_mlp", {},
                               {{"embedding_dim", "4"},
                                {"combiner", "\"sum\""},
                                {"init_scale", "0.1"}}),
                        clicks());
  auto vars = net->variables();
  REQUIRE(vars.size() == 2 + 6);
  CHECK(vars[0].name == "embedding/ad");
  CHECK(vars[0].kind == variable_kind::table);
  CHECK(vars[0].cols == 4);
  CHECK(vars[0].init_scale == 0.1f);
  CHECK(vars[1].name == "embedding/words");
  CHECK(vars[2].rows == 2 * 4 + 3); // default layers: 11 -> 64 -> 32 -> 1
  CHECK(vars[2].cols == 64);
  CHECK(vars.back().rows == 1);
  // The combiner reaches the model: with zero biases the tower is positively
  // homogeneous, so the sum of two rows gives twice the mean's logit.
  auto with = [&](const char* combiner) {
    auto m = make_model(config("embedding_mlp", {7, 4, 1},
                               {{"embedding_dim", "2"},
                                {"combiner", combiner}}),
                        clicks());
    std::vector<float> dense(m->dense_parameters());
    m->initialize(dense.data(), 3);
    example_batch b;
    b.reset(3, 2);
    b.fields[0].keys = {1, 2};
    b.fields[0].offsets = {0, 2};
    b.fields[1].offsets = {0, 0};
    b.dense = {0, 0, 0};
    b.labels = {1};
    b.rows = 1;
    std::vector<table_lookup> tables(2);
    tables[0].dim = tables[1].dim = 2;
    tables[1].variable = 1;
    m->collect_keys(b, tables);
    for (auto& t : tables)
      t.deduplicate();
    tables[0].rows = {0.5f, -0.25f, 0.75f, 1.0f};
    auto ws = m->make_workspace(1);
    eval_accumulator acc;
    m->evaluate({dense.data(), &tables}, b, acc, *ws);
    return double{acc.scores.at(0)};
  };
  auto mean = with("\"mean\"");
  CHECK(mean != 0.0);
  CHECK(with("\"sum\"") == Approx(2 * mean));
}

TEST_CASE("an unknown model, an unknown model field and a bad value are "
          "input errors naming the field",
          "[models][registry]") {
  CHECK_THROWS_AS(make_model(config("resnet"), images()), input_error);
  auto msg = refusal(config("resnet"), images());
  CHECK_THAT(msg, Catch::StartsWith("model.type: unknown model \"resnet\""));
  CHECK_THAT(msg, Catch::Contains("(known: embedding_mlp, mlp, "
                                  "sparse_logistic_regression"));
  CHECK(refusal(config("embedding_mlp", {}, {{"dimension", "8"}}), clicks())
        == "model.dimension: unknown field for embedding_mlp");
  CHECK(refusal(config("mlp", {}, {{"embedding_dim", "8"}}), images())
        == "model.embedding_dim: unknown field for mlp");
  CHECK(refusal(config("sparse_logistic_regression", {}, {{"l2", "0.1"}}),
                clicks())
        == "model.l2: unknown field for sparse_logistic_regression");
  struct bad_value {
    const char* field;
    const char* text;
  };
  for (auto& c : {bad_value{"embedding_dim", "0"},
                  bad_value{"embedding_dim", "5000"},
                  bad_value{"embedding_dim", "2.5"},
                  bad_value{"embedding_dim", "\"big\""},
                  bad_value{"combiner", "\"max\""},
                  bad_value{"combiner", "1"},
                  bad_value{"init_scale", "-1"},
                  bad_value{"init_scale", "\"small\""}}) {
    INFO(c.field << " = " << c.text);
    CHECK_THAT(refusal(config("embedding_mlp", {}, {{c.field, c.text}}),
                       clicks()),
               Catch::StartsWith(std::string{"model."} + c.field + ": "));
  }
}

TEST_CASE("layers that do not fit the data are refused, naming model.layers",
          "[models][registry]") {
  struct refused {
    const char* model;
    std::vector<uint64_t> layers;
    data_schema schema;
    const char* starts_with;
  };
  // clicks() with the default embedding_dim 16: 2 x 16 + 3 = 35 inputs.
  const std::vector<refused> cases{
    {"embedding_mlp", {34, 8, 1}, clicks(), "model.layers[0]: must be 35"},
    {"embedding_mlp", {35, 8, 2}, clicks(), "model.layers: the last width"},
    {"embedding_mlp", {35, 0, 1}, clicks(), "model.layers[1]"},
    {"embedding_mlp", {35}, clicks(), "model.layers"},
    {"mlp", {19, 8, 5}, images(), "model.layers[0]: is 19"},
    {"mlp", {20, 8, 4}, images(), "model.layers: the last width is 4"},
    {"mlp", {20, 8, 1}, images(), "model.layers: the last layer"},
    {"sparse_logistic_regression", {35, 1}, clicks(), "model.layers"},
  };
  for (auto& c : cases) {
    INFO(c.model << " " << Catch::Detail::stringify(c.layers));
    CHECK_THAT(refusal(config(c.model, c.layers), c.schema),
               Catch::StartsWith(c.starts_with));
  }
  // The right widths build.
  CHECK(refusal(config("embedding_mlp", {35, 8, 1}), clicks()).empty());
  CHECK(refusal(config("mlp", {20, 8, 5}), images()).empty());
}

TEST_CASE("a model refuses labels of the wrong kind and data without the "
          "features it needs",
          "[models][registry]") {
  auto binary = images();
  binary.labels = label_kind::binary;
  binary.classes = 2;
  CHECK_THAT(refusal(config("mlp", {20, 2}), binary),
             Catch::StartsWith("model.type: mlp")
               && Catch::Contains("multiclass labels"));
  auto multiclass = clicks();
  multiclass.labels = label_kind::multiclass;
  CHECK_THAT(refusal(config("sparse_logistic_regression"), multiclass),
             Catch::StartsWith("model.type"));
  CHECK_THAT(refusal(config("embedding_mlp"), multiclass),
             Catch::StartsWith("model.type"));
  auto dense_only = clicks();
  dense_only.fields.clear();
  CHECK_THAT(refusal(config("embedding_mlp"), dense_only),
             Catch::StartsWith("model.type: embedding_mlp needs sparse "
                               "fields"));
  // Without dense features the default mlp would have an input width of 0.
  auto sparse_only = clicks();
  sparse_only.dense_dim = 0;
  sparse_only.labels = label_kind::multiclass;
  CHECK_THAT(refusal(config("mlp"), sparse_only),
             Catch::StartsWith("model.layers[0]: width must be > 0"));
}

TEST_CASE("binary and multiclass metrics of hand-computed accumulators",
          "[models][metrics]") {
  // Scores 0.9 (1), 0.3 (0), -0.2 (1), -1 (0): the positives beat the
  // negatives in 3 of 4 pairs.
  eval_accumulator acc;
  acc.loss_sum = 2.0;
  acc.count = 4;
  acc.correct = 3;
  acc.scores = {0.9f, 0.3f, -0.2f, -1.0f};
  acc.labels = {1, 0, 1, 0};
  auto m = binary_metrics(acc);
  REQUIRE(m.size() == 3);
  CHECK(m[0].first == "test_loss");
  CHECK(m[0].second == 0.5);
  CHECK(m[1].first == "test_auc");
  CHECK(m[1].second == Approx(0.75));
  CHECK(m[2].first == "test_accuracy");
  CHECK(m[2].second == 0.75);
  CHECK(metric_value(m, "test_auc") == Approx(0.75));
  eval_accumulator softmax;
  softmax.loss_sum = 3.0;
  softmax.count = 4;
  softmax.correct = 1;
  auto s = multiclass_metrics(softmax);
  REQUIRE(s.size() == 2);
  CHECK(s[0] == std::make_pair(std::string{"test_loss"}, 0.75));
  CHECK(s[1] == std::make_pair(std::string{"test_accuracy"}, 0.25));
  auto empty = multiclass_metrics(eval_accumulator{});
  CHECK(empty[0].second == 0.0);
  CHECK(empty[1].second == 0.0);
}

TEST_CASE("train_step pushes the model's gradient, loss_step only reads, and "
          "unknown names are not found",
          "[models][step_function]") {
  CHECK(step_function_names()
        == std::vector<std::string>{"loss_step", "train_step"});
  CHECK(std::string{train_step_name} == "train_step");
  CHECK(find_step_function("sgd_step") == nullptr);
  CHECK(find_step_function("") == nullptr);
  auto* train = find_step_function("train_step");
  auto* loss = find_step_function("loss_step");
  REQUIRE(train != nullptr);
  REQUIRE(loss != nullptr);
  CHECK(std::string{train->name} == "train_step");
  CHECK(train->pushes);
  CHECK(std::string{loss->name} == "loss_step");
  CHECK_FALSE(loss->pushes);
  // Both on one batch of sparse logistic regression: logits 0.5 and -1.
  auto net = make_model(config("sparse_logistic_regression"), clicks());
  std::vector<float> dense{0, 0, 0, 0};
  example_batch b;
  b.reset(3, 2);
  b.fields[0].keys = {1, 2};
  b.fields[0].offsets = {0, 1, 2};
  b.fields[1].offsets = {0, 0, 0};
  b.dense.assign(6, 0.0f);
  b.labels = {1, 0};
  b.rows = 2;
  std::vector<table_lookup> tables(2);
  tables[0].dim = tables[1].dim = 1;
  tables[1].variable = 1;
  net->collect_keys(b, tables);
  for (auto& t : tables)
    t.deduplicate();
  tables[0].rows = {0.5f, -1.0f};
  auto ws = net->make_workspace(2);
  double expected = (std::log1p(std::exp(-0.5)) + std::log1p(std::exp(-1.0)))
                    / 2;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> grad(4, nan);
  CHECK(loss->compute(*net, {dense.data(), &tables}, b, grad.data(), *ws)
        == Approx(expected));
  CHECK(std::all_of(grad.begin(), grad.end(),
                    [](float g) { return std::isnan(g); }));
  CHECK(tables[0].grad == std::vector<float>{0.0f, 0.0f});
  CHECK(train->compute(*net, {dense.data(), &tables}, b, grad.data(), *ws)
        == Approx(expected));
  // bias: (sigmoid(0.5) - 1 + sigmoid(-1)) / 2; ad 1: its first half.
  auto sig = [](double z) { return 1 / (1 + std::exp(-z)); };
  CHECK(grad[3] == Approx((sig(0.5) - 1 + sig(-1.0)) / 2));
  CHECK(tables[0].grad[0] == Approx((sig(0.5) - 1) / 2));
  CHECK(tables[0].grad[1] == Approx(sig(-1.0) / 2));
}
