#include "tdfx/codegen/torchscript_code.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/graph/graph_printer.h"
#include "tdfx/graph/schema_arguments.h"

namespace tdfx {
namespace {

bool is_number(const Argument& arg) {
  return arg.is<bool>() || arg.is<int64_t>() || arg.is<double>();
}

c10::TypePtr without_optional(const c10::TypePtr& type) {
  if (auto optional = type->cast<c10::OptionalType>()) return optional->getElementType();
  return type;
}

bool is_tensor_type(const c10::TypePtr& type) {
  return without_optional(type)->kind() == c10::TypeKind::TensorType;
}

// A float literal the TorchScript lexer reads back as the same double.
std::string float_literal(double value) {
  if (std::isnan(value)) return "float('nan')";
  if (std::isinf(value)) return value > 0 ? "float('inf')" : "-float('inf')";
  return python_float_repr(value);
}

std::string int_literal(int64_t value) {
  // -2**63 has no literal: its magnitude does not fit an int64.
  if (value == INT64_MIN) return "(-9223372036854775807 - 1)";
  return std::to_string(value);
}

// The overload that takes a number where `schema` takes the Tensor at `index`
// (`add.Tensor` → `add.Scalar`), with the same argument names; nullptr if none.
// TorchScript picks it for a number, and it wraps the number exactly as the
// graph runner does, so the values stay bit for bit the same.
const c10::FunctionSchema* scalar_sibling(const c10::FunctionSchema& schema, size_t index) {
  std::string overload = schema.overload_name();
  if (overload.empty()) {
    overload = "Scalar";
  } else if (const auto at = overload.find("Tensor"); at != std::string::npos) {
    overload.replace(at, 6, "Scalar");
  } else {
    return nullptr;
  }
  auto handle = c10::Dispatcher::singleton().findSchema({schema.name(), overload});
  if (!handle) return nullptr;
  const c10::FunctionSchema& sibling = handle->schema();
  const auto& ours = schema.arguments();
  const auto& theirs = sibling.arguments();
  if (ours.size() != theirs.size()) return nullptr;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (ours[i].name() != theirs[i].name()) return nullptr;
  }
  if (without_optional(theirs[index].type())->kind() != c10::TypeKind::NumberType) return nullptr;
  return &sibling;
}

// Writes a graph as a TorchScript forward and records, for each aten call, the
// overload TorchScript must resolve it to. One printer per forward: the names it
// makes up for typed lists are fresh against the graph's.
class TorchScriptPrinter {
 public:
  TorchScriptPrinter(const Graph& graph, const TorchScriptSignature& signature,
                     TorchScriptOutputs outputs)
      : graph_(graph),
        signature_(signature),
        outputs_(outputs),
        attributes_(signature.attributes.begin(), signature.attributes.end()) {
    for (const Node* node : graph.nodes()) used_names_.insert(node->name());
  }

  TorchScriptForward print() {
    std::vector<std::string> parameters{"self"};
    for (const auto& input : signature_.inputs) {
      check_local_name(input);
      parameters.push_back(input + ": Tensor");
    }
    std::string result_type;
    for (const Node* node : graph_.nodes()) {
      switch (node->op()) {
        case OpCode::kPlaceholder:
          shape_guard(*node);
          break;
        case OpCode::kCallFunction:
          check_local_name(node->name());
          if (node->target().is_aten() && node->target().op_name() == "_assert_async") {
            line(assertion(*node));
            break;
          }
          line(node->name() + " = " +
               (node->target().is_getitem()      ? getitem(*node)
                : node->target().is_size_arith() ? size_arith(*node)
                                                 : aten_call(*node)));
          break;
        case OpCode::kOutput:
          line(output(*node, result_type));
          break;
        default:
          fail<Error>(
              "to_torchscript: %{} is a {} ({}); TorchScript export supports aten calls, "
              "getitem and size arithmetic only",
              node->name(), to_string(node->op()), node->target().str());
      }
    }
    std::string source =
        fmt::format("def forward({}) -> {}:\n", fmt::join(parameters, ", "), result_type);
    for (const auto& text : lines_) source += "    " + text + "\n";
    return {std::move(source), std::move(expected_)};
  }

 private:
  void line(std::string text) { lines_.push_back(std::move(text)); }

  // For a user input whose shape was traced: a refusal of any other rank or size, but in the
  // dimensions that follow the batch (TensorMeta::batch_dims), as ExportedModule refuses
  // them; TorchScript would otherwise run a static program at any batch.
  void shape_guard(const Node& node) {
    const TensorMeta& meta = node.meta().tensor;
    const bool user_input = std::find(signature_.inputs.begin(), signature_.inputs.end(),
                                      node.name()) != signature_.inputs.end();
    if (!user_input || !meta.shape) return;
    const std::vector<int64_t>& shape = *meta.shape;
    std::vector<std::string> tests{fmt::format("{}.dim() == {}", node.name(), shape.size())};
    std::vector<std::string> expected;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (meta.follows_batch(i)) {
        expected.push_back("s0");
        continue;
      }
      tests.push_back(fmt::format("{}.size({}) == {}", node.name(), i, shape[i]));
      expected.push_back(std::to_string(shape[i]));
    }
    const std::string message =
        fmt::format("input {} has another shape than [{}], which the program was exported for{}",
                    node.name(), fmt::join(expected, ", "),
                    meta.batch_dims.empty() ? " (static shapes)" : " (s0: any batch size)");
    line(fmt::format("assert {}, {}", fmt::join(tests, " and "), torchscript_string(message)));
    // The assert's first test runs outside its branches (aten::dim, aten::eq.int): the check
    // of the overloads TorchScript resolved sees them among the program's own calls.
    expected_.push_back({"aten::dim", ""});
    expected_.push_back({"aten::eq", "int"});
  }

  void check_local_name(const std::string& name) const {
    if (name == "self" || !is_python_identifier(name)) {
      fail<Error>("to_torchscript: %{} cannot be a TorchScript variable name", name);
    }
  }

  std::string fresh_name(const std::string& base) {
    std::string name = base;
    for (int i = 1; used_names_.count(name); ++i) name = fmt::format("{}_{}", base, i);
    used_names_.insert(name);
    return name;
  }

  std::string reference(const Node& user, const Node* node) const {
    if (node->op() == OpCode::kPlaceholder && attributes_.count(node->name())) {
      return "self." + node->name();
    }
    if (node->op() != OpCode::kPlaceholder && node->op() != OpCode::kCallFunction) {
      fail<Error>("to_torchscript: %{} reads %{}, a {}", user.name(), node->name(),
                  to_string(node->op()));
    }
    return node->name();
  }

  // `arg` as a TorchScript expression of the schema type `type`.
  std::string value(const Node& node, const Argument& arg, const c10::TypePtr& type) {
    const c10::TypePtr bare = without_optional(type);
    if (arg.is<None>()) return "None";
    if (arg.is<bool>()) return arg.as<bool>() ? "True" : "False";
    if (arg.is<int64_t>()) {
      // An int where a float is expected prints as one: `[1, 2.5]` would not type.
      return bare->kind() == c10::TypeKind::FloatType
                 ? float_literal(static_cast<double>(arg.as<int64_t>()))
                 : int_literal(arg.as<int64_t>());
    }
    if (arg.is<double>()) return float_literal(arg.as<double>());
    if (arg.is<std::string>()) return torchscript_string(arg.as<std::string>());
    // Enums as the ints TorchScript types them as (`dtype=6`, `memory_format=2`).
    if (arg.is<c10::ScalarType>())
      return std::to_string(static_cast<int>(arg.as<c10::ScalarType>()));
    if (arg.is<c10::MemoryFormat>())
      return std::to_string(static_cast<int>(arg.as<c10::MemoryFormat>()));
    if (arg.is<c10::Layout>()) return std::to_string(static_cast<int>(arg.as<c10::Layout>()));
    if (arg.is<c10::Device>()) {
      return fmt::format("torch.device({})", torchscript_string(arg.as<c10::Device>().str()));
    }
    if (arg.is<Node*>()) return reference(node, arg.as<Node*>());
    if (arg.is<ArgumentList>()) return list(node, arg.as<ArgumentList>(), type);
    fail<Error>("to_torchscript: %{} has the argument {}, which TorchScript export cannot express",
                node.name(), fx_repr(arg));
  }

  std::string list(const Node& node, const ArgumentList& items, const c10::TypePtr& type) {
    const c10::TypePtr bare = without_optional(type);
    c10::TypePtr element = c10::AnyType::get();
    if (auto list_type = bare->cast<c10::ListType>()) element = list_type->getElementType();
    std::vector<std::string> parts;
    bool has_none = false;
    for (const auto& item : items.items) {
      has_none |= item.is<None>();
      parts.push_back(value(node, item, element));
    }
    const std::string literal = fmt::format("[{}]", fmt::join(parts, ", "));
    // An empty list types as List[Tensor] and [None, x] not at all: name it with its type.
    if ((parts.empty() || has_none) && bare->kind() == c10::TypeKind::ListType) {
      const std::string name = fresh_name("_" + node.name() + "_list");
      line(fmt::format("{}: {} = {}", name, bare->annotation_str(), literal));
      return name;
    }
    return literal;
  }

  std::string aten_call(const Node& node) {
    const Args args = schema_arguments(node);
    const c10::FunctionSchema* schema = &node.target().schema();
    // A number where the schema takes a Tensor: use the Scalar overload when there is one,
    // else a tensor of the dtype the graph runner wraps the number in.
    std::vector<bool> as_tensor(args.size(), false);
    for (size_t i = 0; i < args.size(); ++i) {
      if (!is_number(args[i]) || !is_tensor_type(node.target().schema().arguments()[i].type())) {
        continue;
      }
      if (const c10::FunctionSchema* sibling = scalar_sibling(*schema, i)) {
        schema = sibling;
      } else {
        as_tensor[i] = true;
      }
    }
    expected_.push_back(schema->operator_name());

    std::vector<std::string> parts;
    const auto& formals = schema->arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      std::string text;
      if (as_tensor[i]) {
        const int dtype = static_cast<int>(args[i].is<double>()    ? c10::ScalarType::Double
                                           : args[i].is<int64_t>() ? c10::ScalarType::Long
                                                                   : c10::ScalarType::Bool);
        text = fmt::format("torch.tensor({}, dtype={})", value(node, args[i], formals[i].type()),
                           dtype);
      } else {
        text = value(node, args[i], formals[i].type());
      }
      parts.push_back(formals[i].kwarg_only() ? formals[i].name() + "=" + text : text);
    }
    return fmt::format("torch.{}({})", node.target().op_name(), fmt::join(parts, ", "));
  }

  std::string getitem(const Node& node) {
    const Args& args = node.args();
    if (args.size() != 2 || !args[0].node() || !args[1].is<int64_t>()) {
      fail<Error>(
          "to_torchscript: %{} indexes {} by {}; only a list or tuple by an int is supported",
          node.name(), args.empty() ? "nothing" : fx_repr(args[0]),
          args.size() < 2 ? "nothing" : fx_repr(args[1]));
    }
    return fmt::format("{}[{}]", reference(node, args[0].node()),
                       int_literal(args[1].as<int64_t>()));
  }

  // A guard the tracer recorded (`_assert_async(cond)`) as a Python assert: TorchScript's
  // dead code elimination would drop the call, which it takes to have no effect.
  std::string assertion(const Node& node) {
    const Args& args = node.args();
    if (args.size() != 1 || !args[0].node()) {
      fail<Error>("to_torchscript: %{} asserts {}; only a tensor node is supported", node.name(),
                  args.empty() ? "nothing" : fx_repr(args[0]));
    }
    return fmt::format(
        "assert bool({}), {}", reference(node, args[0].node()),
        torchscript_string(fmt::format("%{}: a condition the program held when it was traced "
                                       "does not hold",
                                       node.name())));
  }

  // `size * 2`: TorchScript's int operators are Python's.
  std::string size_arith(const Node& node) {
    const Args& args = node.args();
    std::vector<std::string> operands;
    for (const Argument& arg : args) {
      if (arg.node()) {
        operands.push_back(reference(node, arg.node()));
      } else if (arg.is<int64_t>()) {
        operands.push_back(int_literal(arg.as<int64_t>()));
      } else {
        fail<Error>("to_torchscript: %{} takes {}; size arithmetic takes ints", node.name(),
                    fx_repr(arg));
      }
    }
    if (operands.size() != 2) {
      fail<Error>("to_torchscript: %{} takes {} arguments; size arithmetic takes two", node.name(),
                  operands.size());
    }
    static constexpr const char* kOperators[] = {"+", "-", "*", "//"};
    // TorchScript runs it as aten::mul.int (add, sub, floordiv), which the check of the
    // overloads it resolved expects in order among the others.
    expected_.push_back({"aten::" + node.target().op_name(), "int"});
    return fmt::format("{} {} {}", operands[0], kOperators[static_cast<int>(node.target().arith())],
                       operands[1]);
  }

  std::string output(const Node& node, std::string& result_type) {
    const Argument& result = node.args().at(0);
    std::vector<Argument> items =
        result.is<ArgumentList>() ? result.as<ArgumentList>().items : std::vector<Argument>{result};
    std::vector<std::string> names;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].node()) {
        fail<Error>("to_torchscript: output {} is the constant {}; outputs must be tensors", i,
                    fx_repr(items[i]));
      }
      names.push_back(reference(node, items[i].node()));
    }
    if (outputs_ == TorchScriptOutputs::kDict) {
      result_type = "Dict[str, Tensor]";
      return dict_return(names);
    }
    std::vector<std::string> types(names.size(), "Tensor");
    result_type = fmt::format("Tuple[{}]", fmt::join(types, ", "));
    if (names.size() == 1) return fmt::format("return ({},)", names[0]);
    return fmt::format("return ({})", fmt::join(names, ", "));
  }

  // `return {'loc': loc, 'a.b': scale}`: each output under its key joined with ".".
  std::string dict_return(const std::vector<std::string>& names) const {
    const auto& keys = signature_.output_keys;
    if (keys.size() != names.size()) {
      fail<Error>(
          "to_torchscript: the graph returns {} values but the signature has {} output "
          "keys; a dict of outputs needs one key per value",
          names.size(), keys.size());
    }
    std::map<std::string, const NestedKey*> seen;
    std::vector<std::string> entries;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string joined = keys[i].joined(".");
      if (joined.find('\r') != std::string::npos) {
        fail<Error>(
            "to_torchscript: output key {} holds a carriage return, which a dict key cannot: "
            "TorchScript saves it as '\\r' and its loader refuses that escape",
            keys[i].repr());
      }
      const auto [it, fresh] = seen.emplace(joined, &keys[i]);
      if (!fresh) {
        fail<Error>(
            "to_torchscript: outputs {} and {} both join to the dict key {}; a dict of outputs "
            "needs keys that stay distinct when joined with '.'",
            it->second->repr(), keys[i].repr(), python_repr(joined));
      }
      entries.push_back(fmt::format("{}: {}", torchscript_string(joined), names[i]));
    }
    return fmt::format("return {{{}}}", fmt::join(entries, ", "));
  }

  const Graph& graph_;
  const TorchScriptSignature& signature_;
  TorchScriptOutputs outputs_;
  std::set<std::string> attributes_;
  std::set<std::string> used_names_;
  std::vector<std::string> lines_;
  std::vector<c10::OperatorName> expected_;
};

}  // namespace

TorchScriptForward torchscript_forward(const Graph& graph, const TorchScriptSignature& signature,
                                       TorchScriptOutputs outputs) {
  return TorchScriptPrinter(graph, signature, outputs).print();
}

std::string torchscript_string(std::string_view text) {
  // Python's quote choice, so that text TorchScript reads as Python does prints as python_repr;
  // control characters as TorchScript's lexer reads them (`\n`, `\t`, else octal).
  return python_quoted(text, [](std::string& out, char c) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += fmt::format("\\{:03o}", static_cast<unsigned char>(c));
    }
  });
}

}  // namespace tdfx
