#include "models/export/onnx_graph.hpp"

#include <cstring>

#include <fmt/format.h>

namespace actorps::export_detail {

namespace {

void set_type(onnx::ValueInfoProto& v, int32_t type,
              const std::vector<onnx_dim>& dims, const std::string& doc) {
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  auto* shape = t->mutable_shape();
  for (auto& d : dims) {
    auto* dim = shape->add_dim();
    if (d.name.empty())
      dim->set_dim_value(d.value);
    else
      dim->set_dim_param(d.name);
  }
  v.set_doc_string(doc);
}

} // namespace

const std::string& onnx_builder::floats(const std::string& name,
                                        const std::vector<int64_t>& dims,
                                        const float* data) {
  auto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  uint64_t n = 1;
  for (auto d : dims) {
    t->add_dims(d);
    n *= static_cast<uint64_t>(d);
  }
  // raw_data is little-endian IEEE 754 (the ONNX spec); so is this host
  // (x86-64, aarch64): the bytes are the floats as they are.
  t->set_raw_data(std::string(reinterpret_cast<const char*>(data),
                              n * sizeof(float)));
  return t->name();
}

std::string onnx_builder::ints(const std::string& hint,
                               const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& values) {
  auto* t = graph_.add_initializer();
  t->set_name(fmt::format("{}_{}", hint, next_++));
  t->set_data_type(onnx::TensorProto::INT64);
  for (auto d : dims)
    t->add_dims(d);
  for (auto v : values)
    t->add_int64_data(v);
  return t->name();
}

void onnx_builder::input(const std::string& name, int32_t type,
                         const std::vector<onnx_dim>& dims,
                         const std::string& doc) {
  auto* v = graph_.add_input();
  v->set_name(name);
  set_type(*v, type, dims, doc);
}

void onnx_builder::output(const std::string& name, int32_t type,
                          const std::vector<onnx_dim>& dims,
                          const std::string& doc) {
  auto* v = graph_.add_output();
  v->set_name(name);
  set_type(*v, type, dims, doc);
}

onnx::NodeProto& onnx_builder::add(const std::string& op,
                                   const std::vector<std::string>& inputs,
                                   const std::string& out) {
  auto* n = graph_.add_node();
  n->set_op_type(op);
  n->set_name(fmt::format("{}_{}", op, next_));
  for (auto& in : inputs)
    n->add_input(in);
  n->add_output(out.empty() ? fmt::format("{}_{}", op, next_) : out);
  ++next_;
  return *n;
}

std::string onnx_builder::node(const std::string& op,
                               const std::vector<std::string>& inputs,
                               const std::string& out) {
  return add(op, inputs, out).output(0);
}

std::string onnx_builder::node(const std::string& op,
                               const std::vector<std::string>& inputs,
                               const std::string& attr, int64_t value,
                               const std::string& out) {
  auto& n = add(op, inputs, out);
  auto* a = n.add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
  return n.output(0);
}

} // namespace actorps::export_detail
