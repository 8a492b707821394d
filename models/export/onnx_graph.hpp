#pragma once

// Building an ONNX graph (the protobuf classes of Debian's libonnx-dev,
// onnx/onnx_pb.h) one node at a time: the exporters of models/export/
// describe a model's forward pass with it. Only the operators of the
// default domain at opset onnx_opset are used.

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace actorps::export_detail {

/// The opset the graphs are written for (ONNX 1.8, 2020: Squeeze,
/// Unsqueeze and ReduceSum take their axes as an input; Softmax works on
/// one axis). ONNX Runtime and onnx.checker of ONNX 1.12 accept it.
constexpr int64_t onnx_opset = 13;

/// A dimension of an input or output: a number, or a name for a size
/// chosen at run time ("N", the batch).
struct onnx_dim {
  int64_t value = -1;
  std::string name;

  onnx_dim(int64_t v) : value(v) { // NOLINT: a number reads as itself
    // nop
  }
  onnx_dim(const char* n) : name(n) { // NOLINT
    // nop
  }
  onnx_dim(std::string n) : name(std::move(n)) { // NOLINT
    // nop
  }
};

/// Appends nodes, initializers, inputs and outputs to `graph`, naming the
/// intermediate values so that no two collide.
class onnx_builder {
public:
  explicit onnx_builder(onnx::GraphProto& graph) : graph_(graph) {
    // nop
  }

  /// A float tensor `name` of shape `dims` (row-major, product(dims)
  /// floats from `data`), stored as raw little-endian bytes.
  const std::string& floats(const std::string& name,
                            const std::vector<int64_t>& dims,
                            const float* data);

  /// A 64-bit integer tensor (axes, shapes).
  std::string ints(const std::string& hint, const std::vector<int64_t>& dims,
                   const std::vector<int64_t>& values);

  /// A graph input or output with element type `type`
  /// (onnx::TensorProto::FLOAT or INT64) and a doc string.
  void input(const std::string& name, int32_t type,
             const std::vector<onnx_dim>& dims, const std::string& doc);
  void output(const std::string& name, int32_t type,
              const std::vector<onnx_dim>& dims, const std::string& doc);

  /// A node `op` reading `inputs` and writing one output, named `out` or,
  /// when empty, a fresh name made from `op`; returns the output's name.
  std::string node(const std::string& op,
                   const std::vector<std::string>& inputs,
                   const std::string& out = "");

  /// As node(), with one integer attribute (Softmax's axis, ReduceSum's
  /// keepdims, Concat's axis).
  std::string node(const std::string& op,
                   const std::vector<std::string>& inputs,
                   const std::string& attr, int64_t value,
                   const std::string& out = "");

private:
  onnx::NodeProto& add(const std::string& op,
                       const std::vector<std::string>& inputs,
                       const std::string& out);

  onnx::GraphProto& graph_;
  uint64_t next_ = 0;
};

} // namespace actorps::export_detail
