#include "tdfx/graph/value_type.h"

#include <ATen/core/function_schema.h>
#include <ATen/core/jit_type.h>
#include <fmt/format.h>

#include <algorithm>

#include "tdfx/core/error.h"
#include "tdfx/graph/graph.h"

namespace tdfx {
namespace {

using Kind = ValueType::Kind;

std::string items_str(const std::vector<ValueType>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i].str();
  return out;
}

// The function of the batch an int argument is: its node's (a size node), or a constant's
// none. `constant` receives the value of a constant int.
std::optional<SizeExpr> size_operand(const Argument& arg, const ValueTypes& types,
                                     std::optional<int64_t>& constant) {
  if (Node* node = arg.node()) return types.of(node).size;
  if (arg.is<int64_t>()) constant = arg.as<int64_t>();
  return std::nullopt;
}

// `a op c` for a size `a` and a constant `c`, when it is again (s0 * scale) // divisor +
// offset with scale and divisor at least 1 and a divisor only over s0 itself (SizeExpr).
std::optional<SizeExpr> size_arithmetic(Target::SizeArith op, SizeExpr a, int64_t c) {
  int64_t v = 0;
  switch (op) {
    case Target::SizeArith::kAdd:
      if (__builtin_add_overflow(a.offset, c, &v)) return std::nullopt;
      a.offset = v;
      return a;
    case Target::SizeArith::kSub:
      if (__builtin_sub_overflow(a.offset, c, &v)) return std::nullopt;
      a.offset = v;
      return a;
    case Target::SizeArith::kMul:
      if (c < 1 || a.divisor != 1 || __builtin_mul_overflow(a.scale, c, &a.scale) ||
          __builtin_mul_overflow(a.offset, c, &a.offset)) {
        return std::nullopt;
      }
      return a;
    case Target::SizeArith::kFloorDiv:
      if (c < 1 || !a.is_batch()) return std::nullopt;
      a.divisor = c;
      return a;
  }
  return std::nullopt;
}

ValueType size_arith_type(const Node& node, const ValueTypes& types) {
  ValueType out = ValueType::of_kind(Kind::kInt);
  if (node.args().size() != 2) return out;
  std::optional<int64_t> left_constant, right_constant;
  const auto left = size_operand(node.args()[0], types, left_constant);
  const auto right = size_operand(node.args()[1], types, right_constant);
  const Target::SizeArith op = node.target().arith();
  if (left && right_constant) {
    out.size = size_arithmetic(op, *left, *right_constant);
  } else if (right && left_constant &&
             (op == Target::SizeArith::kAdd || op == Target::SizeArith::kMul)) {
    out.size = size_arithmetic(op, *right, *left_constant);  // c + s0, c * s0
  }
  return out;
}

// aten::size.int(x, dim) of a dimension that follows the batch, or is a function of it.
std::optional<SizeExpr> size_read(const Node& node) {
  if (node.target().op_name() != "size" || node.args().size() != 2) return std::nullopt;
  const Node* input = node.args()[0].node();
  if (!input || !node.args()[1].is<int64_t>()) return std::nullopt;
  const TensorMeta& meta = input->meta().tensor;
  int64_t dim = node.args()[1].as<int64_t>();
  if (!meta.shape) return std::nullopt;
  const auto rank = static_cast<int64_t>(meta.shape->size());
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return std::nullopt;
  if (meta.follows_batch(static_cast<size_t>(dim))) return SizeExpr{};
  if (const SizeExpr* derived = meta.derived(static_cast<size_t>(dim))) return *derived;
  return std::nullopt;
}

ValueType operator_type(const Node& node) {
  const c10::FunctionSchema& schema = node.target().schema();
  const auto& returns = schema.returns();
  if (returns.size() == 1) {
    ValueType out = value_type_of(*returns[0].type());
    if (out.kind == Kind::kInt) out.size = size_read(node);
    return out;
  }
  if (returns.empty()) return ValueType::of_kind(Kind::kNone);
  std::vector<ValueType> items;
  for (const c10::Argument& r : returns) items.push_back(value_type_of(*r.type()));
  return ValueType::tuple(std::move(items));
}

// A getitem's index: an int, or a key (a TensorDict read in the FX view).
ValueType item_type(const Node& node, const ValueTypes& types) {
  if (node.args().size() != 2) return {};
  const Argument& index = node.args()[1];
  if (index.is<std::string>() || index.is<NestedKey>()) return ValueType::of_kind(Kind::kTensor);
  const Node* source = node.args()[0].node();
  if (!source || !index.is<int64_t>()) return {};
  const ValueType& of = types.of(source);
  if (of.kind == Kind::kList && !of.items.empty()) return of.items[0];
  if (of.kind == Kind::kTuple) {
    int64_t i = index.as<int64_t>();
    const auto n = static_cast<int64_t>(of.items.size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return of.items[static_cast<size_t>(i)];
  }
  return {};
}

// The type of a constant argument: a number, None, or a list or tuple of them.
ValueType constant_type(const Argument& arg) {
  if (arg.is<int64_t>()) return ValueType::of_kind(Kind::kInt);
  if (arg.is<double>()) return ValueType::of_kind(Kind::kFloat);
  if (arg.is<bool>()) return ValueType::of_kind(Kind::kBool);
  if (arg.is<None>()) return ValueType::of_kind(Kind::kNone);
  return {};
}

// What a call_module's body returns: its output's value, or a tuple of its values.
ValueType body_result_type(const Graph& body) {
  const Node* out = body.output_node();
  if (!out || out->args().empty()) return {};
  const ValueTypes inner(body);
  auto type_of = [&](const Argument& arg) {
    return arg.node() ? inner.of(arg.node()) : constant_type(arg);
  };
  const Argument& result = out->args()[0];
  if (!result.is<ArgumentList>()) return type_of(result);
  std::vector<ValueType> items;
  for (const Argument& item : result.as<ArgumentList>().items) items.push_back(type_of(item));
  // A list of one type is a List of it; a tuple keeps each item's type.
  const bool tuple = result.as<ArgumentList>().is_tuple;
  if (!tuple && !items.empty() &&
      std::all_of(items.begin(), items.end(), [&](const ValueType& t) { return t == items[0]; })) {
    return ValueType::list(items[0]);
  }
  return tuple ? ValueType::tuple(std::move(items)) : ValueType{};
}

ValueType node_type(const Node& node, const ValueTypes& types) {
  switch (node.op()) {
    case OpCode::kPlaceholder:
      // A placeholder a trace, an export or an archive made records its tensor; one a user
      // added may take anything (a tuple, a TensorDict).
      return node.meta().tensor.dtype ? ValueType::of_kind(Kind::kTensor) : ValueType{};
    case OpCode::kGetAttr:
      return ValueType::of_kind(Kind::kTensor);
    case OpCode::kCallFunction:
    case OpCode::kCallMethod:
      if (node.target().has_operator()) return operator_type(node);
      if (node.target().is_getitem()) return item_type(node, types);
      if (node.target().is_size_arith()) return size_arith_type(node, types);
      return {};
    case OpCode::kCallModule:
      return node.body() ? body_result_type(*node.body()) : ValueType{};
    case OpCode::kOutput:
      return ValueType::of_kind(Kind::kNone);
  }
  return {};
}

}  // namespace

std::string ValueType::str() const {
  switch (kind) {
    case Kind::kUnknown:
      return "Any";
    case Kind::kNone:
      return "None";
    case Kind::kTensor:
      return "Tensor";
    case Kind::kInt:
      return size ? fmt::format("Sym({})", size->str()) : "int";
    case Kind::kFloat:
      return "float";
    case Kind::kBool:
      return "bool";
    case Kind::kScalar:
      return "number";
    case Kind::kList:
      return fmt::format("List[{}]", items_str(items));
    case Kind::kTuple:
      return fmt::format("Tuple[{}]", items_str(items));
  }
  return "Any";
}

ValueType value_type_of(const c10::Type& type) {
  switch (type.kind()) {
    case c10::TypeKind::TensorType:
      return ValueType::of_kind(Kind::kTensor);
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      return ValueType::of_kind(Kind::kInt);
    case c10::TypeKind::FloatType:
      return ValueType::of_kind(Kind::kFloat);
    case c10::TypeKind::BoolType:
      return ValueType::of_kind(Kind::kBool);
    case c10::TypeKind::NumberType:
      return ValueType::of_kind(Kind::kScalar);
    case c10::TypeKind::NoneType:
      return ValueType::of_kind(Kind::kNone);
    case c10::TypeKind::OptionalType:
      return value_type_of(*type.expectRef<c10::OptionalType>().getElementType());
    case c10::TypeKind::ListType:
      return ValueType::list(value_type_of(*type.expectRef<c10::ListType>().getElementType()));
    case c10::TypeKind::TupleType: {
      std::vector<ValueType> items;
      for (const auto& element : type.expectRef<c10::TupleType>().elements()) {
        items.push_back(value_type_of(*element));
      }
      return ValueType::tuple(std::move(items));
    }
    default:
      return {};
  }
}

ValueTypes::ValueTypes(const Graph& graph) {
  for (const Node* node : graph.nodes()) types_.set(node, node_type(*node, *this));
}

void check_value_types(const Graph& graph, const ValueTypes& types) {
  auto taken = [&](const Node& node, const Node& input) {
    return fmt::format("%{} takes %{}, a {}", node.name(), input.name(), types.of(&input).str());
  };
  for (const Node* node : graph.nodes()) {
    if (node->op() == OpCode::kCallModule && node->body()) {
      check_value_types(*node->body(), ValueTypes(*node->body()));
    }
    if (node->op() != OpCode::kCallFunction) continue;
    if (node->target().is_getitem() && node->args().size() == 2 && node->args()[1].is<int64_t>()) {
      const Node* source = node->args()[0].node();
      if (!source) continue;
      const ValueType& of = types.of(source);
      const bool sequence = of.kind == Kind::kList || of.kind == Kind::kTuple;
      if (!sequence && of.kind != Kind::kUnknown) {
        fail<GraphError>("{}, where operator.getitem takes a list or a tuple",
                         taken(*node, *source));
      }
      if (of.kind == Kind::kTuple) {
        const auto n = static_cast<int64_t>(of.items.size());
        const int64_t i = node->args()[1].as<int64_t>();
        if (i >= n || i < -n) {
          fail<GraphError>("%{} takes item {} of %{}, a {} of {} item(s)", node->name(), i,
                           source->name(), of.str(), n);
        }
      }
    }
    if (node->target().is_size_arith()) {
      for (const Argument& arg : node->args()) {
        const Node* input = arg.node();
        if (!input) continue;
        const Kind kind = types.of(input).kind;
        if (kind != Kind::kInt && kind != Kind::kUnknown) {
          fail<GraphError>("{}, where {} takes ints", taken(*node, *input), node->target().str());
        }
      }
    }
  }
}

}  // namespace tdfx
