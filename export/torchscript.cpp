#include "tdfx/export/torchscript.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <torch/csrc/jit/ir/ir.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/core/file_io.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/graph/graph_printer.h"

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

// Writes a program's forward as TorchScript source and records, for each aten
// call, the overload TorchScript must resolve it to.
class TorchScriptPrinter {
 public:
  explicit TorchScriptPrinter(const ExportedProgram& program) : program_(program) {
    for (const auto& input : program.graph_signature().inputs) {
      if (input.kind != InputKind::kUserInput) state_names_.insert(input.name);
    }
    for (const Node* node : program.graph().nodes()) used_names_.insert(node->name());
  }

  std::string forward() {
    std::vector<std::string> parameters{"self"};
    for (const auto& input : program_.graph_signature().inputs) {
      if (input.kind != InputKind::kUserInput) continue;
      check_local_name(input.name);
      parameters.push_back(input.name + ": Tensor");
    }
    std::string result_type;
    for (const Node* node : program_.graph().nodes()) {
      switch (node->op()) {
        case OpCode::kPlaceholder:
          break;
        case OpCode::kCallFunction:
          check_local_name(node->name());
          line(node->name() + " = " +
               (node->target().is_getitem() ? getitem(*node) : aten_call(*node)));
          break;
        case OpCode::kOutput:
          line(output(*node, result_type));
          break;
        default:
          fail<Error>(
              "to_torchscript: %{} is a {} ({}); TorchScript export supports aten calls and "
              "getitem only",
              node->name(), to_string(node->op()), node->target().str());
      }
    }
    std::string out =
        fmt::format("def forward({}) -> Tuple[{}]:\n", fmt::join(parameters, ", "), result_type);
    for (const auto& text : lines_) out += "    " + text + "\n";
    return out;
  }

  /// The operator each aten call must resolve to, in program order.
  const std::vector<c10::OperatorName>& expected_overloads() const { return expected_; }

 private:
  void line(std::string text) { lines_.push_back(std::move(text)); }

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
    if (node->op() == OpCode::kPlaceholder && state_names_.count(node->name())) {
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
    if (arg.is<std::string>()) return python_repr(arg.as<std::string>());
    // Enums as the ints TorchScript types them as (`dtype=6`, `memory_format=2`).
    if (arg.is<c10::ScalarType>())
      return std::to_string(static_cast<int>(arg.as<c10::ScalarType>()));
    if (arg.is<c10::MemoryFormat>())
      return std::to_string(static_cast<int>(arg.as<c10::MemoryFormat>()));
    if (arg.is<c10::Layout>()) return std::to_string(static_cast<int>(arg.as<c10::Layout>()));
    if (arg.is<c10::Device>()) {
      return fmt::format("torch.device({})", python_repr(arg.as<c10::Device>().str()));
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
    std::vector<std::string> types(names.size(), "Tensor");
    result_type = fmt::format("{}", fmt::join(types, ", "));
    if (names.size() == 1) return fmt::format("return ({},)", names[0]);
    return fmt::format("return ({})", fmt::join(names, ", "));
  }

  const ExportedProgram& program_;
  std::set<std::string> state_names_;
  std::set<std::string> used_names_;
  std::vector<std::string> lines_;
  std::vector<c10::OperatorName> expected_;
};

std::string overload_str(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// TorchScript picks overloads by argument types; make sure it picked the graph's.
void check_overloads(const torch::jit::Graph& graph, const std::vector<c10::OperatorName>& expected,
                     const std::string& source) {
  std::set<std::string> ops;
  for (const auto& name : expected) ops.insert(name.name);
  std::vector<std::string> resolved;
  for (const torch::jit::Node* node : graph.nodes()) {
    if (!ops.count(node->kind().toQualString())) continue;
    const c10::FunctionSchema* schema = node->maybeSchema();
    resolved.push_back(schema ? overload_str(schema->operator_name())
                              : std::string(node->kind().toQualString()) + " (no schema)");
  }
  std::vector<std::string> wanted;
  for (const auto& name : expected) wanted.push_back(overload_str(name));
  if (resolved != wanted) {
    fail<Error>("to_torchscript: TorchScript resolved the calls to {}, not {}; source:\n{}",
                fmt::join(resolved, ", "), fmt::join(wanted, ", "), source);
  }
}

}  // namespace

std::string torchscript_code(const ExportedProgram& program) {
  return TorchScriptPrinter(program).forward();
}

torch::jit::Module to_torchscript(const ExportedProgram& program, const std::string& name) {
  if (!is_python_identifier(name)) {
    fail<Error>("to_torchscript: the module name '{}' is not an identifier", name);
  }
  torch::jit::Module module{c10::QualifiedName("__torch__.tdfx." + name)};
  for (const auto& input : program.graph_signature().inputs) {
    if (input.kind == InputKind::kUserInput) continue;
    at::Tensor tensor = program.state().at(input.name).detach();
    if (input.kind == InputKind::kParameter) {
      module.register_parameter(input.name, tensor, /*is_buffer=*/false);
    } else {
      module.register_buffer(input.name, tensor);
    }
  }
  TorchScriptPrinter printer(program);
  const std::string source = printer.forward();
  try {
    module.define(source);
  } catch (const c10::Error& e) {
    fail<Error>("to_torchscript: TorchScript rejected the generated forward: {}\nsource:\n{}",
                e.what_without_backtrace(), source);
  }
  check_overloads(*module.get_method("forward").graph(), printer.expected_overloads(), source);
  return module;
}

void save_torchscript(const ExportedProgram& program, const std::string& path) {
  const torch::jit::Module module = to_torchscript(program);
  // Serialised in memory first: TorchScript's own file writer aborts the
  // process when a write fails half-way.
  std::ostringstream bytes;
  try {
    module.save(bytes);
  } catch (const c10::Error& e) {
    fail<ArchiveError>("{}: cannot save the TorchScript module: {}", path,
                       e.what_without_backtrace());
  }
  write_file_atomically<ArchiveError>(path, bytes.str());
}

}  // namespace tdfx
