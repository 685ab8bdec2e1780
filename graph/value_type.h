#pragma once

/// \file
/// The type of each node's result: a tensor, an int (with the function of the batch it is,
/// for a size node of a dynamic trace), a float, a bool, None, or a list or tuple of them.
/// Worked out from the graph alone — an operator's schema, an item of a list or tuple, size
/// arithmetic on ints — so it holds for a traced, an edited and a loaded graph alike. The
/// readable code prints an int that follows the batch as torch.export prints a SymInt
/// (`mul: "Sym(5*s0)"`); a graph module (when it compiles), ONNX export and both archive
/// loaders refuse a node that takes a value of a type it cannot (an item of a tensor,
/// arithmetic on a tensor, an item past a tuple's end), and a graph module's plan a list
/// argument holding an item its schema's list cannot (a tensor among `int[]` sizes); ONNX
/// export reads from it whether a value is a tensor, a size or a list.
///
///     ValueTypes types(graph);
///     types.of(max_node).str();     // "Tuple[Tensor, Tensor]"
///     types.of(size_node).str();    // "Sym(s0)" in a dynamic trace, "int" otherwise

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tdfx/graph/node.h"
#include "tdfx/graph/size_expr.h"

namespace c10 {
struct Type;
}  // namespace c10

namespace tdfx {

class Graph;

/// The type of one value.
struct ValueType {
  /// Which type: unknown (nothing says: a call_module without a body, an op returning `Any`), None,
  /// Tensor, int, float, bool, Scalar (a number of any kind, `Scalar` in a schema), a list or a
  /// tuple.
  enum class Kind : uint8_t {
    kUnknown,  // nothing says (a call_module without a body, an op returning `Any`)
    kNone,
    kTensor,
    kInt,
    kFloat,
    kBool,
    kScalar,  // a number of any kind (`Scalar` in a schema)
    kList,
    kTuple,
  };
  /// The value's type; a list's or tuple's items are in `items`.
  Kind kind = Kind::kUnknown;
  /// A list's element type (one entry) or a tuple's, one per element.
  std::vector<ValueType> items;
  /// For an int: the function of the batch it is, when it is one (`s0`, `5*s0`).
  std::optional<SizeExpr> size;

  /// The type of `kind`, without items or size.
  static ValueType of_kind(Kind kind) { return ValueType{kind, {}, std::nullopt}; }
  /// A list of `element`s.
  static ValueType list(ValueType element) { return ValueType{Kind::kList, {element}, {}}; }
  /// A tuple of `items`, one per element.
  static ValueType tuple(std::vector<ValueType> items) {
    return ValueType{Kind::kTuple, std::move(items), {}};
  }

  /// As Python's typing spells it, and a batch-derived int as torch.export prints a SymInt:
  /// `Tensor`, `int`, `Sym(s0)`, `float`, `bool`, `None`, `number`, `List[Tensor]`,
  /// `Tuple[Tensor, Tensor]`, `Any` (unknown).
  std::string str() const;

  /// Equal when kind, items and size are.
  friend bool operator==(const ValueType& a, const ValueType& b) {
    return a.kind == b.kind && a.items == b.items && a.size == b.size;
  }
  /// Not equal: !(a == b).
  friend bool operator!=(const ValueType& a, const ValueType& b) { return !(a == b); }
};

/// The type a schema's return (or argument) type stands for: `Tensor`, `int` (SymInt too),
/// `Tensor[]` as List[Tensor], `Tensor?` as Tensor, anything else as kUnknown.
ValueType value_type_of(const c10::Type& type);

/// The type of every node's result in one graph, worked out in one walk in program order
/// (no recursion: a chain of 100,000 nodes is no deeper than one).
///
/// - placeholder: a tensor when its meta records one (a trace's, an export's, an archive's),
///   else unknown; get_attr: a tensor (a parameter, buffer or constant);
/// - an aten call (function or method): its schema's return, or a tuple of its returns;
/// - getitem: the element of a list, the item of a tuple;
/// - size arithmetic: an int, and its function of the batch when its operands have one;
///   `aten::size.int` of a dimension that follows the batch (TensorMeta) is `s0`;
/// - call_module: what its body returns (a value, or a tuple of them); unknown without a body;
/// - output: None.
class ValueTypes {
 public:
  /// Works out the type of every node of `graph`, by the rules above.
  explicit ValueTypes(const Graph& graph);
  /// The type of the result of `node`, a node of the graph these were worked out for.
  const ValueType& of(const Node* node) const { return types_.get(node); }

 private:
  NodeTable<ValueType> types_;
};

/// GraphError naming the node when a node takes a value its target cannot: getitem of a
/// tensor or of a number, an item past a tuple's end, size arithmetic on a value that is no
/// int. What a loaded program is checked for before it runs.
void check_value_types(const Graph& graph, const ValueTypes& types);

}  // namespace tdfx
