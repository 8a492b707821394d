#include "models/export/model_graphs.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/embedding_mlp.hpp"
#include "models/mlp.hpp"
#include "models/sparse_logreg.hpp"

namespace actorps::export_detail {

namespace {

constexpr int32_t f32 = onnx::TensorProto::FLOAT;
constexpr int32_t i64 = onnx::TensorProto::INT64;

/// One table per sparse field, in field order (collect_field_keys).
std::vector<export_table> field_tables(const model& net,
                                       const std::string& combiner) {
  std::vector<export_table> out;
  auto vars = net.variables();
  for (uint32_t v = 0; v < vars.size(); ++v) {
    if (vars[v].kind != variable_kind::table)
      continue;
    export_table t;
    t.variable = v;
    t.name = vars[v].name;
    t.field = static_cast<uint32_t>(out.size());
    t.dim = vars[v].cols;
    t.vocabulary = vars[v].rows;
    t.init_scale = vars[v].init_scale;
    t.combiner = combiner;
    out.push_back(std::move(t));
  }
  return out;
}

/// The dense input "dense" [N, dense_dim].
std::string dense_input(const data_schema& schema, onnx_builder& b) {
  b.input("dense", f32, {"N", static_cast<int64_t>(schema.dense_dim)},
          "the dense features, N x dense_dim, as in training");
  return "dense";
}

/// A field's combined vector, N x dim: its keys' rows (looked up by Gather
/// in the table's initializer, or given as FIELD.rows) weighted by
/// FIELD.weights and summed, then for "mean" divided by the weights' sum
/// (0 where it is 0, as TensorFlow's div_no_nan).
std::string combine_field(const data_schema& schema, const export_table& t,
                          onnx_builder& b) {
  auto& field = schema.fields[t.field].name;
  auto k = "K_" + field;
  auto dim = static_cast<int64_t>(t.dim);
  std::string rows;
  if (t.in_onnx) {
    b.input(keys_input(field), i64, {"N", k},
            fmt::format("the keys of field {} per example, padded to K with "
                        "any key below the vocabulary ({}) and weight 0",
                        field, t.vocabulary));
    auto& table = b.floats(t.name,
                           {static_cast<int64_t>(t.vocabulary), dim},
                           t.rows);
    rows = b.node("Gather", {table, keys_input(field)});
  } else {
    b.input(rows_input(field), f32, {"N", k, dim},
            fmt::format("the rows of table {} for the keys of field {}, "
                        "looked up in its table shard files (a key not "
                        "there: its initial row), padded with zero rows",
                        t.name, field));
    rows = rows_input(field);
  }
  b.input(weights_input(field), f32, {"N", k},
          fmt::format("the value of each key of field {} (1 in a field "
                      "without values), 0 for padding",
                      field));
  auto axis2 = b.ints("axis2", {1}, {2});
  auto axis1 = b.ints("axis1", {1}, {1});
  auto w3 = b.node("Unsqueeze", {weights_input(field), axis2});
  auto weighted = b.node("Mul", {rows, w3});
  auto sum = b.node("ReduceSum", {weighted, axis1}, "keepdims", 0);
  if (t.combiner != "mean")
    return sum;
  auto total = b.node("ReduceSum", {weights_input(field), axis1}, "keepdims",
                      1);
  float zero_one[2] = {0.0f, 1.0f};
  auto zero = b.floats(field + ".zero", {}, zero_one);
  auto one = b.floats(field + ".one", {}, zero_one + 1);
  auto inv = b.node("Div", {one, total});
  auto empty = b.node("Equal", {total, zero});
  auto scale = b.node("Where", {empty, zero, inv});
  return b.node("Mul", {sum, scale});
}

/// The tower's layers as Gemm (+ Relu between them) from `x`; returns the
/// logits' name.
std::string write_tower(const dense_tower& tower, const float* params,
                        std::string x, onnx_builder& b) {
  auto vars = tower.variables();
  const float* p = params;
  for (size_t i = 0; i < tower.layers(); ++i) {
    auto in = static_cast<int64_t>(tower.widths()[i]);
    auto out = static_cast<int64_t>(tower.widths()[i + 1]);
    auto& w = b.floats(vars[2 * i].name, {in, out}, p);
    p += in * out;
    // The bias as a vector (the variable is out x 1, the same floats):
    // Gemm's C broadcasts along the rows.
    auto& bias = b.floats(vars[2 * i + 1].name, {out}, p);
    p += out;
    x = b.node("Gemm", {x, w, bias}, i + 1 == tower.layers() ? "logits" : "");
    if (i + 1 < tower.layers())
      x = b.node("Relu", {x});
  }
  return x;
}

void binary_outputs(onnx_builder& b) {
  b.node("Sigmoid", {"logits"}, "probabilities");
  b.output("logits", f32, {"N", 1}, "the logit of label 1");
  b.output("probabilities", f32, {"N", 1},
           "the probability of label 1 (sigmoid of the logit)");
}

// -- mlp ----------------------------------------------------------------------

std::vector<export_table> mlp_tables(const model&, const data_schema&) {
  return {};
}

void mlp_write(const model& net, const data_schema& schema,
               const float* dense, const std::vector<export_table>&,
               onnx_builder& b) {
  auto& m = dynamic_cast<const mlp&>(net);
  write_tower(m.tower(), dense, dense_input(schema, b), b);
  b.node("Softmax", {"logits"}, "axis", 1, "probabilities");
  auto c = static_cast<int64_t>(m.classes());
  b.output("logits", f32, {"N", c}, "the logits of the classes");
  b.output("probabilities", f32, {"N", c},
           "the softmax probabilities of the classes (rows sum to 1)");
}

// -- sparse_logistic_regression -------------------------------------------------

std::vector<export_table> logreg_tables(const model& net, const data_schema&) {
  return field_tables(net, "sum");
}

void logreg_write(const model& net, const data_schema& schema,
                  const float* dense, const std::vector<export_table>& tables,
                  onnx_builder& b) {
  std::vector<std::string> terms;
  for (auto& t : tables)
    terms.push_back(combine_field(schema, t, b));
  auto d = static_cast<int64_t>(schema.dense_dim);
  if (d > 0) {
    auto& w = b.floats("dense_weights", {d, 1}, dense);
    terms.push_back(b.node("MatMul", {dense_input(schema, b), w}));
  }
  terms.push_back(b.floats("bias", {1}, dense + d));
  b.node("Sum", terms, "logits");
  binary_outputs(b);
}

// -- embedding_mlp --------------------------------------------------------------

std::vector<export_table> embedding_tables(const model& net,
                                           const data_schema&) {
  auto& m = dynamic_cast<const embedding_mlp&>(net);
  return field_tables(net, m.mean_combiner() ? "mean" : "sum");
}

void embedding_write(const model& net, const data_schema& schema,
                     const float* dense,
                     const std::vector<export_table>& tables,
                     onnx_builder& b) {
  auto& m = dynamic_cast<const embedding_mlp&>(net);
  std::vector<std::string> parts;
  for (auto& t : tables)
    parts.push_back(combine_field(schema, t, b));
  if (schema.dense_dim > 0)
    parts.push_back(dense_input(schema, b));
  auto x = parts.size() == 1 ? parts[0] : b.node("Concat", parts, "axis", 1);
  write_tower(m.tower(), dense, x, b);
  binary_outputs(b);
}

const struct {
  const char* type;
  model_graph graph;
} built_in_graphs[] = {
  {"mlp", {mlp_tables, mlp_write}},
  {"sparse_logistic_regression", {logreg_tables, logreg_write}},
  {"embedding_mlp", {embedding_tables, embedding_write}},
};

} // namespace

std::string keys_input(const std::string& field) {
  return field + ".keys";
}

std::string weights_input(const std::string& field) {
  return field + ".weights";
}

std::string rows_input(const std::string& field) {
  return field + ".rows";
}

const model_graph& graph_of(const std::string& type) {
  std::string known;
  for (auto& g : built_in_graphs) {
    if (type == g.type)
      return g.graph;
    known += known.empty() ? g.type : std::string{", "} + g.type;
  }
  throw input_error(fmt::format("model.type: \"{}\" cannot be exported (no "
                                "ONNX graph for it; these can: {})",
                                type, known));
}

} // namespace actorps::export_detail
