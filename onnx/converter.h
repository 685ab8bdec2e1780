#pragma once

/// \file
/// The ONNX converter: an ExportedProgram written node by node into an ONNX GraphProto, each
/// aten call by its rule (onnx/rules/rules.h), and the helpers the rules write with. Internal
/// to the onnx library (namespace onnx_detail); onnx_export.h is its public face.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/export/program.h"
#include "tdfx/graph/value_type.h"
#include "tdfx/onnx/onnx_export.h"

namespace tdfx::onnx_detail {

using onnx::NodeProto;
using onnx::TensorProto;

/// Where a program node's value is in the ONNX graph. What the value is — a tensor, a size
/// (an int), a list or tuple — is its type (ValueTypes, graph/value_type.h).
struct Value {
  /// A tensor's name; for a size, the name of a 1-D int64 tensor of one element. Empty for a
  /// list or tuple, and for a node with no ONNX form of its own (an attention path guard).
  std::string name;
  /// A list's or tuple's items (chunk, lstm).
  std::vector<Value> items;
};

/// The ONNX tensor type of `dtype`; OnnxError naming `where` for a dtype that has none.
int32_t onnx_type(c10::ScalarType dtype, const std::string& where);

/// Adds the attribute `name` holding `value` (an int, a float, ints, a string or strings) to
/// `node`.
void set_attr(NodeProto* node, const std::string& name, int64_t value);
void set_attr(NodeProto* node, const std::string& name, double value);
void set_attr(NodeProto* node, const std::string& name, const std::vector<int64_t>& values);
void set_attr(NodeProto* node, const std::string& name, const std::string& value);
void set_attr(NodeProto* node, const std::string& name, const std::vector<std::string>& values);

/// Writes `tensor`'s bytes into `proto` (raw_data, little-endian as the machine).
void fill_tensor(TensorProto* proto, const at::Tensor& tensor, const std::string& where);

/// Converts one program, node by node, into a GraphProto.
class Converter {
 public:
  Converter(const ExportedProgram& program, onnx::GraphProto* graph, uint64_t memory_budget)
      : program_(program), budget_(memory_budget), graph_(graph), types_(program.graph()) {}

  void convert();

  // --- the node being converted, for the rules ---

  const Node& node() const { return *node_; }
  std::string where() const {
    return fmt::format("node '{}' ({})", node_->name(), node_->target().str());
  }
  [[noreturn]] void refuse(const std::string& why) const {
    throw OnnxError(fmt::format("cannot write {} as ONNX: {}", where(), why));
  }
  size_t arg_count() const { return args_.size(); }
  const Argument& arg(size_t i) const {
    if (i >= args_.size()) throw InternalError(where() + ": argument index out of range");
    return args_[i];
  }
  bool is_none(size_t i) const { return i >= args_.size() || args_[i].is<None>(); }
  /// Argument `i` as a tensor value: a node's tensor, or a number as a 0-d tensor of
  /// `dtype_for_numbers` (the output's dtype when unset).
  std::string tensor(size_t i, std::optional<c10::ScalarType> dtype_for_numbers = std::nullopt);
  std::vector<std::string> tensors(size_t i);
  int64_t int_arg(size_t i) const;
  double double_arg(size_t i) const;
  bool bool_arg(size_t i) const;
  std::vector<int64_t> ints_arg(size_t i) const;
  std::string string_arg(size_t i) const;
  /// Argument `i`, a list of ints some of which may be size nodes, as a 1-D int64 tensor.
  std::string ints_tensor(size_t i);
  /// True when argument `i` is a list of constant ints.
  bool ints_constant(size_t i) const;

  /// The dtype of argument `i`'s node (a number: its own kind).
  c10::ScalarType dtype_of(size_t i) const;
  c10::ScalarType out_dtype() const;
  /// The traced shape of argument `i`'s node.
  const std::vector<int64_t>& shape_of(size_t i) const;
  int64_t rank_of(size_t i) const { return static_cast<int64_t>(shape_of(i).size()); }
  /// Dimension `dim` of argument `i` normalised to [0, rank).
  int64_t norm_dim(int64_t dim, int64_t rank) const;
  /// True when dimension `dim` of argument `i` follows the batch: is s0 or a function of it
  /// (TensorMeta::derived_dims).
  bool follows_batch(size_t i, int64_t dim) const;

  // --- emitting ---

  /// Adds an ONNX node of `op` reading `inputs` with `outputs` fresh outputs.
  NodeProto* emit(const std::string& op, const std::vector<std::string>& inputs, int outputs = 1);
  /// emit() of a node with one output; returns the output.
  std::string op(const std::string& op, const std::vector<std::string>& inputs) {
    return emit(op, inputs)->output(0);
  }
  std::string const_ints(const std::vector<int64_t>& values);
  std::string const_scalar(double value, c10::ScalarType dtype);
  /// An initializer holding `value`.
  std::string const_tensor(const at::Tensor& value);
  /// An initializer of `sizes` filled with `value`, made by the converter: refused (refuse())
  /// when it would take the converter's tensors past the memory budget.
  std::string filled(const std::vector<int64_t>& sizes, double value, c10::ScalarType dtype);
  std::string cast(const std::string& value, c10::ScalarType to);
  /// `value` (of dtype `from`) cast to `to` unless it already is.
  std::string cast_if(const std::string& value, c10::ScalarType from, c10::ScalarType to) {
    return from == to ? value : cast(value, to);
  }
  std::string shape(const std::string& value) { return op("Shape", {value}); }
  std::string reshape(const std::string& value, const std::string& shape_tensor) {
    return op("Reshape", {value, shape_tensor});
  }
  /// Reshapes `value` to the output's traced shape, taking each dimension that follows the
  /// batch from the same dimension of argument `from`.
  std::string reshape_to_output(const std::string& value, size_t from);
  /// The size of dimension `dim` of `value` as a 1-D int64 tensor of one element.
  std::string dim_size(const std::string& value, int64_t dim);
  /// `size` computed from `batch` (a 1-D int64 tensor of one element), as one too.
  std::string size_of(const SizeExpr& size, const std::string& batch);
  /// Python's `a // b` on two 1-D int64 tensors of one element: (a - a mod b) / b, ONNX's
  /// Mod (fmod 0) taking the divisor's sign as Python's % does, so Div divides exactly.
  std::string floor_div(const std::string& a, const std::string& b) {
    return op("Div", {op("Sub", {a, op("Mod", {a, b})}), b});
  }

 private:
  Value convert_node();
  /// A size arithmetic node (`size * 2`) on ints, each a 1-D int64 tensor of one element.
  Value size_arith();
  /// Fills `info` (a graph input or output) with `name` and `node`'s dtype and shape, `s0`
  /// for a dimension that follows the batch.
  void value_info(onnx::ValueInfoProto* info, const std::string& name, const Node& node);
  /// A value name not yet used.
  std::string fresh(const std::string& candidate) { return unique(names_, candidate); }
  /// A node name not yet used (nodes and values are named apart in ONNX).
  std::string fresh_node(const std::string& candidate) { return unique(node_names_, candidate); }
  static std::string unique(std::unordered_set<std::string>& used, const std::string& candidate);
  const Value& value_of(const Node* node) const;
  /// True when `node`'s value is a size (an int), a list or tuple.
  bool is_int(const Node* node) const { return types_.of(node).kind == ValueType::Kind::kInt; }
  bool is_sequence(const Node* node) const {
    const ValueType::Kind kind = types_.of(node).kind;
    return kind == ValueType::Kind::kList || kind == ValueType::Kind::kTuple;
  }
  /// Gives the value `value` the name of `node` when it has a made-up name (`linear/MatMul`)
  /// and was computed by a node emitted for the program node being converted or `from`.
  void adopt_name(Value& value, const Node& node);

  const ExportedProgram& program_;
  /// The memory budget of the tensors the converter makes (OnnxOptions::memory_budget; 0:
  /// none), and the bytes made so far.
  uint64_t budget_ = 0;
  uint64_t made_ = 0;
  onnx::GraphProto* graph_;
  std::unordered_map<const Node*, Value> values_;
  ValueTypes types_;
  std::unordered_set<std::string> names_, node_names_;
  std::unordered_map<std::string, std::string> const_cache_;
  // Each node output's node index and output slot, so that a value can be renamed.
  std::unordered_map<std::string, std::pair<int, int>> producer_;
  // The ONNX nodes emitted for the program node being converted.
  const Node* node_ = nullptr;
  Args args_;
  int first_emitted_ = 0;
  std::string doc_;
};

// --- helpers the rules share ---

/// The value of the tensor `name`.
Value tensor_value(std::string name);

/// The dtype two operands compute in: ATen's promotion, where a number operand does not
/// widen a tensor of its own category.
c10::ScalarType operand_dtype(Converter& c, size_t a, size_t b);

/// Operands `a` and `b` cast to the dtype they compute in.
std::pair<std::string, std::string> operands(Converter& c, size_t a, size_t b);

/// Clip with optional constant bounds in arguments `lo` and `hi`.
Value clip(Converter& c, std::optional<size_t> lo, std::optional<size_t> hi);

/// The sizes of the pieces of `each` elements (the last may be smaller) that split argument 0
/// along `dim`, from its traced shape.
std::vector<int64_t> piece_sizes(Converter& c, int64_t each, int64_t dim);

/// The sizes of the pieces chunk(x, chunks, dim) gives, from the traced shape.
std::vector<int64_t> chunk_sizes(Converter& c, int64_t chunks, int64_t dim);

/// Argument 0 split along `dim` into pieces of `sizes`: a list of them (Split).
Value split_into(Converter& c, const std::vector<int64_t>& sizes, int64_t dim);

}  // namespace tdfx::onnx_detail
