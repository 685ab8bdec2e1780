#include "tdfx/graph/graph_module.h"

#include <ATen/ScalarOps.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/core/memory_budget.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/core/time_budget.h"
#include "tdfx/graph/graph_printer.h"
#include "tdfx/graph/module_call.h"
#include "tdfx/graph/plan.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/graph/size_expr.h"
#include "tdfx/graph/value_type.h"

namespace tdfx {
namespace {

using detail::Plan;
using detail::Source;
using detail::Step;

std::string key_string(const NestedKey& key) { return key.repr(); }

c10::IValue constant_value(const Node& node, const Argument& arg, const c10::TypePtr& type) {
  struct Visitor {
    const Node& node;
    const c10::TypePtr& type;
    c10::IValue operator()(None) const { return {}; }
    c10::IValue operator()(bool v) const { return v; }
    c10::IValue operator()(int64_t v) const {
      const auto kind = type ? type->kind() : c10::TypeKind::IntType;
      if (kind == c10::TypeKind::FloatType) return static_cast<double>(v);
      if (auto opt = type ? type->cast<c10::OptionalType>() : nullptr) {
        if (opt->getElementType()->kind() == c10::TypeKind::FloatType)
          return static_cast<double>(v);
      }
      return v;
    }
    c10::IValue operator()(double v) const { return v; }
    c10::IValue operator()(const std::string& v) const { return v; }
    c10::IValue operator()(const NestedKey& v) const { return key_string(v); }
    c10::IValue operator()(c10::ScalarType v) const { return v; }
    c10::IValue operator()(c10::MemoryFormat v) const { return v; }
    c10::IValue operator()(c10::Layout v) const { return v; }
    c10::IValue operator()(const c10::Device& v) const { return v; }
    c10::IValue operator()(Node*) const { throw InternalError("node in constant"); }
    c10::IValue operator()(const ArgumentList& v) const {
      bool all_int = true, all_double = true, all_bool = true;
      for (const auto& item : v.items) {
        all_int &= item.is<int64_t>();
        all_double &= item.is<double>() || item.is<int64_t>();
        all_bool &= item.is<bool>();
      }
      if (v.items.empty() || all_int) {
        c10::List<int64_t> list;
        for (const auto& item : v.items) list.push_back(item.as<int64_t>());
        return list;
      }
      if (all_bool) {
        c10::List<bool> list;
        for (const auto& item : v.items) list.push_back(item.as<bool>());
        return list;
      }
      if (all_double) {
        c10::List<double> list;
        for (const auto& item : v.items) {
          list.push_back(item.is<double>() ? item.as<double>()
                                           : static_cast<double>(item.as<int64_t>()));
        }
        return list;
      }
      fail<GraphError>("%{}: cannot pass the list {} to an operator", node.name(), fx_str(v));
    }
  };
  return std::visit(Visitor{node, type}, arg.value);
}

// The schema type an enum argument needs (ScalarType, MemoryFormat, Layout); nullopt for
// any other argument.
std::optional<c10::TypeKind> enum_kind(const Argument& arg) {
  if (arg.is<c10::ScalarType>()) return c10::TypeKind::ScalarTypeType;
  if (arg.is<c10::MemoryFormat>()) return c10::TypeKind::MemoryFormatType;
  if (arg.is<c10::Layout>()) return c10::TypeKind::LayoutType;
  return std::nullopt;
}

// An enum reaches the operator as an int: one of another kind (a layout where a memory
// format is due) would run as a wrong value, silently.
void check_enum(const Node& node, const c10::Argument& formal, const Argument& arg) {
  const auto kind = enum_kind(arg);
  if (!kind) return;
  c10::TypePtr bare = formal.real_type();
  if (auto optional = bare->cast<c10::OptionalType>()) bare = optional->getElementType();
  if (bare->kind() != *kind) {
    fail<GraphError>("%{}: argument '{}' of {} is {}, where the schema takes {}", node.name(),
                     formal.name(), node.target().str(), fx_str(arg), bare->str());
  }
}

// A constant of another kind than the schema's number or string (a float where an int is
// due, a string where a Scalar is) would reach the operator as an IValue it cannot read, and
// LibTorch fails on an internal assert: refused here, naming the node. Ints pass where a float
// is due (constant_value converts them), as in Python.
void check_constant(const Node& node, const c10::Argument& formal, const Argument& arg) {
  if (arg.node() || arg.is<None>() || arg.is<ArgumentList>()) return;
  c10::TypePtr bare = formal.real_type();
  if (auto optional = bare->cast<c10::OptionalType>()) bare = optional->getElementType();
  bool fits = true;
  switch (bare->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      fits = arg.is<int64_t>() || enum_kind(arg).has_value();
      break;
    case c10::TypeKind::FloatType:
      fits = arg.is<double>() || arg.is<int64_t>();
      break;
    case c10::TypeKind::BoolType:
      fits = arg.is<bool>();
      break;
    case c10::TypeKind::NumberType:
      fits = arg.is<int64_t>() || arg.is<double>() || arg.is<bool>();
      break;
    case c10::TypeKind::StringType:
      fits = arg.is<std::string>();
      break;
    default:
      break;
  }
  if (!fits) {
    fail<GraphError>("%{}: argument '{}' of {} is {}, where the schema takes {}", node.name(),
                     formal.name(), node.target().str(),
                     arg.is<std::string>() ? python_repr(arg.as<std::string>()) : fx_str(arg),
                     bare->str());
  }
}

bool is_number(const Argument& arg) {
  return arg.is<int64_t>() || arg.is<double>() || arg.is<bool>();
}

at::Tensor wrapped_number(const Argument& arg) {
  at::Tensor t = arg.is<double>()    ? at::scalar_to_tensor(at::Scalar(arg.as<double>()))
                 : arg.is<int64_t>() ? at::scalar_to_tensor(at::Scalar(arg.as<int64_t>()))
                                     : at::scalar_to_tensor(at::Scalar(arg.as<bool>()));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

bool has_nodes(const Argument& arg) {
  bool found = false;
  for_each_node(arg, [&](Node*) { found = true; });
  return found;
}

// Parameters and buffers of the root by path, gathered once per compile.
using AttributeMap = GraphModule::Attributes;

AttributeMap attributes_of(torch::nn::Module& root) {
  AttributeMap attributes;
  for (const auto& item : root.named_parameters(true)) attributes[item.key()] = item.value();
  for (const auto& item : root.named_buffers(true)) attributes[item.key()] = item.value();
  return attributes;
}

class Compiler {
 public:
  Compiler(const std::shared_ptr<torch::nn::Module>& root, const AttributeMap& attributes,
           std::string prefix)
      : root_(root), attributes_(attributes), prefix_(std::move(prefix)) {}

  std::shared_ptr<Plan> compile(const Graph& graph) {
    graph_ = &graph;
    // An item of a tensor or arithmetic on one is refused here, naming the node, rather than
    // when it runs; only a graph with such nodes has its value types worked out here.
    for (const Node* node : graph.nodes()) {
      if (node->target().is_getitem() || node->target().is_size_arith()) {
        check_value_types(graph, types());
        break;
      }
    }
    auto plan = std::make_shared<Plan>();
    const auto nodes = graph.node_list();
    for (size_t i = 0; i < nodes.size(); ++i) slots_.set(nodes[i], static_cast<int>(i));
    plan->slot_count = nodes.size();
    plan->steps.reserve(nodes.size());
    for (const Node* node : nodes) plan->steps.push_back(compile_node(*node, *plan));
    add_releases(*plan);
    return plan;
  }

 private:
  Source source(const Node& node, const Argument& arg, const c10::TypePtr& type) {
    if (Node* input = arg.node()) {
      Source s;
      s.kind = Source::Kind::kSlot;
      s.slot = slot_of(*input);
      return s;
    }
    if (arg.is<ArgumentList>() && has_nodes(arg)) {
      Source s;
      c10::TypePtr element;
      if (auto list_type = type ? type->cast<c10::ListType>() : nullptr) {
        element = list_type->getElementType();
      }
      if (element && element->kind() == c10::TypeKind::TensorType) {
        s.kind = Source::Kind::kTensorList;
      } else if (element && element->kind() == c10::TypeKind::OptionalType) {
        s.kind = Source::Kind::kOptionalTensorList;
      } else if (element && element->kind() == c10::TypeKind::IntType) {
        s.kind = Source::Kind::kIntList;
      } else {
        s.kind = Source::Kind::kTuple;
      }
      for (const auto& item : arg.as<ArgumentList>().items) {
        if (const Node* input = item.node(); input && type) {
          check_list_item(node, *input, s.kind, *type);
        }
        s.items.push_back(source(node, item, element));
      }
      return s;
    }
    Source s;
    s.constant = constant_value(node, arg, type);
    return s;
  }

  c10::IValue resolve_attribute(const Node& node) {
    const std::string path = prefix_ + node.target().str();
    auto it = attributes_.find(path);
    if (it != attributes_.end()) return it->second;
    fail<GraphError>("get_attr %{}: the module has no parameter, buffer or constant '{}'",
                     node.name(), path);
  }

  // The slot of a node of the graph compiled (lint() makes every argument one).
  int slot_of(const Node& node) const {
    const int slot = slots_.get(&node);
    if (slot < 0) throw InternalError("compile: %" + node.name() + " is not in the graph");
    return slot;
  }

  Step compile_node(const Node& node, Plan& plan) {
    Step step;
    step.node = &node;
    step.out = slot_of(node);
    switch (node.op()) {
      case OpCode::kPlaceholder:
        step.kind = Step::Kind::kPlaceholder;
        plan.placeholders.push_back(step.out);
        break;
      case OpCode::kGetAttr:
        step.kind = Step::Kind::kConstant;
        step.constant = resolve_attribute(node);
        break;
      case OpCode::kOutput:
        step.kind = Step::Kind::kOutput;
        plan.output = source(node, node.args().at(0), nullptr);
        plan.has_output = true;
        step.sources.push_back(plan.output);
        break;
      case OpCode::kCallFunction:
        if (node.target().is_getitem()) {
          compile_getitem(node, step);
        } else if (node.target().is_size_arith()) {
          compile_size_arith(node, step);
        } else {
          compile_aten(node, node.target(), step);
        }
        break;
      case OpCode::kCallModule:
        compile_call_module(node, step);
        break;
      case OpCode::kCallMethod:
        if (!node.target().has_operator()) {
          fail<GraphError>(
              "call_method %{} ('{}') cannot run: tdfx runs aten operators, and its target names "
              "none (give it one with Target::method(Target::aten(...)))",
              node.name(), node.target().str());
        }
        compile_aten(node, node.target(), step);
        break;
    }
    return step;
  }

  // A call_module runs its body graph when the tracer recorded one, else the root's
  // submodule at the target path, when it is a built-in layer tdfx knows how to call.
  void compile_call_module(const Node& node, Step& step) {
    for (const auto& arg : node.args()) step.sources.push_back(source(node, arg, nullptr));
    if (node.body()) {
      step.kind = Step::Kind::kCallModule;
      step.body =
          Compiler(root_, attributes_, prefix_ + node.target().str() + ".").compile(*node.body());
      if (step.body->placeholders.size() != node.args().size()) {
        fail<GraphError>("call_module %{} passes {} arguments; its body takes {}", node.name(),
                         node.args().size(), step.body->placeholders.size());
      }
      return;
    }
    if (!node.kwargs().empty()) {
      fail<GraphError>(
          "call_module %{} ({}) has keyword arguments, which tdfx cannot pass to "
          "a module without a body graph",
          node.name(), node.target().str());
    }
    step.kind = Step::Kind::kCallLeaf;
    step.leaf = detail::module_call(root_, prefix_ + node.target().str(), node);
  }

  void compile_getitem(const Node& node, Step& step) {
    step.kind = Step::Kind::kGetItem;
    if (node.args().size() != 2 || !node.args()[0].node()) {
      fail<GraphError>("getitem %{} needs (node, index or key) arguments", node.name());
    }
    step.sources.push_back(source(node, node.args()[0], nullptr));
    const Argument& index = node.args()[1];
    if (index.is<int64_t>()) {
      step.key = index.as<int64_t>();
    } else if (index.is<NestedKey>()) {
      step.key = key_string(index.as<NestedKey>());
    } else if (index.is<std::string>()) {
      step.key = key_string(NestedKey(index.as<std::string>()));
    } else {
      fail<GraphError>("getitem %{}: index {} is neither an int nor a key", node.name(),
                       fx_str(index));
    }
  }

  // `a * b` on two ints, each a constant or a node's value.
  void compile_size_arith(const Node& node, Step& step) {
    step.kind = Step::Kind::kSizeArith;
    step.arith = node.target().arith();
    if (node.args().size() != 2 || !node.kwargs().empty()) {
      fail<GraphError>("{} %{} needs two int arguments", node.target().str(), node.name());
    }
    for (const Argument& arg : node.args()) {
      if (!arg.node() && !arg.is<int64_t>()) {
        fail<GraphError>("{} %{}: argument {} is neither an int nor a node", node.target().str(),
                         node.name(), fx_str(arg));
      }
      step.sources.push_back(source(node, arg, nullptr));
    }
  }

  // A call of the aten operator `target` with the node's arguments (self first for a method).
  void compile_aten(const Node& node, const Target& target, Step& step) {
    step.kind = Step::Kind::kAten;
    step.op = target.handle();
    const auto& schema = target.schema();
    const Args full = schema_arguments(target, node.args(), node.kwargs(), node.name());
    const auto& formals = schema.arguments();
    step.sources.reserve(formals.size());
    for (size_t i = 0; i < formals.size(); ++i) {
      check_enum(node, formals[i], full[i]);
      check_constant(node, formals[i], full[i]);
      check_number_node(node, formals[i], full[i]);
      if (full[i].is<None>() && formals[i].default_value()) {
        Source s;
        s.constant = *formals[i].default_value();
        step.sources.push_back(std::move(s));
      } else if (formals[i].type()->kind() == c10::TypeKind::TensorType && is_number(full[i])) {
        // A number where the schema wants a tensor: pass it as torch does for
        // Python scalars, a 0-dim "wrapped number" that keeps scalar type
        // promotion (so add.Tensor(x, 0.5) computes exactly add.Scalar(x, 0.5)).
        Source s;
        s.constant = wrapped_number(full[i]);
        step.sources.push_back(std::move(s));
      } else {
        step.sources.push_back(source(node, full[i], formals[i].type()));
      }
    }
    step.returns = schema.returns().size();
  }

  // Each slot is released after its last reader, as FX's generated code does.
  static void add_releases(Plan& plan) {
    std::vector<int> last_reader(plan.slot_count, -1);
    std::function<void(const Source&, int)> mark = [&](const Source& s, int step) {
      if (s.kind == Source::Kind::kSlot) last_reader[static_cast<size_t>(s.slot)] = step;
      for (const auto& item : s.items) mark(item, step);
    };
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      for (const auto& s : plan.steps[i].sources) mark(s, static_cast<int>(i));
    }
    for (size_t slot = 0; slot < plan.slot_count; ++slot) {
      const int reader = last_reader[slot];
      if (reader >= 0 && plan.steps[static_cast<size_t>(reader)].kind != Step::Kind::kOutput) {
        plan.steps[static_cast<size_t>(reader)].release.push_back(static_cast<int>(slot));
      }
    }
  }

  // GraphError naming `node` when `arg` is a node whose value is a tensor where the schema
  // takes a number (aten::sub.Scalar given a tensor): LibTorch would fail reading it as one.
  void check_number_node(const Node& node, const c10::Argument& formal, const Argument& arg) {
    const Node* input = arg.node();
    if (!input) return;
    c10::TypePtr bare = formal.real_type();
    if (auto optional = bare->cast<c10::OptionalType>()) bare = optional->getElementType();
    const auto kind = bare->kind();
    const bool number = kind == c10::TypeKind::IntType || kind == c10::TypeKind::SymIntType ||
                        kind == c10::TypeKind::FloatType || kind == c10::TypeKind::BoolType ||
                        kind == c10::TypeKind::NumberType;
    if (number && types().of(input).kind == ValueType::Kind::kTensor) {
      fail<GraphError>("%{}: argument '{}' of {} is %{}, a tensor, where the schema takes {}",
                       node.name(), formal.name(), node.target().str(), input->name(), bare->str());
    }
  }

  // The graph's value types, worked out on first use: most graphs pass no node in a list.
  const ValueTypes& types() {
    if (!types_) types_.emplace(*graph_);
    return *types_;
  }

  // GraphError naming `node` when `item`, in a list argument of `list_type` that the plan
  // builds as `kind`, is of a type the list cannot hold (a tensor in `int[]`, a size in
  // `Tensor[]`): the list is built from the items' values as the schema types it. An item
  // whose type nothing says is checked when it runs.
  void check_list_item(const Node& node, const Node& item, Source::Kind kind,
                       const c10::Type& list_type) {
    using VK = ValueType::Kind;
    const ValueType& type = types().of(&item);
    bool fits = true;
    switch (kind) {
      case Source::Kind::kTensorList:
        fits = type.kind == VK::kTensor || type.kind == VK::kUnknown;
        break;
      case Source::Kind::kOptionalTensorList:
        fits = type.kind == VK::kTensor || type.kind == VK::kNone || type.kind == VK::kUnknown;
        break;
      case Source::Kind::kIntList:
        fits = type.kind == VK::kInt || type.kind == VK::kUnknown;
        break;
      default:
        break;
    }
    if (!fits) {
      fail<GraphError>(
          "%{}: a list argument of {} holds %{}, of type {}, where the schema takes {}",
          node.name(), node.target().str(), item.name(), type.str(), list_type.str());
    }
  }

  const std::shared_ptr<torch::nn::Module>& root_;
  const AttributeMap& attributes_;
  std::string prefix_;
  NodeTable<int> slots_{-1};
  const Graph* graph_ = nullptr;
  std::optional<ValueTypes> types_;
};

// A bad index is a std::out_of_range (a std::invalid_argument for a key of the wrong kind),
// which the run dresses as a RunError naming the node, as it does LibTorch's errors.
c10::IValue run_getitem(const c10::IValue& container, const c10::IValue& key, const Node& node) {
  if (key.isInt()) {
    const int64_t index = key.toInt();
    if (container.isList()) {
      const auto list = container.toListRef();
      const auto size = static_cast<int64_t>(list.size());
      if (index < -size || index >= size) {
        throw std::out_of_range(
            fmt::format("index {} out of range for a list of {} values", index, size));
      }
      return list[static_cast<size_t>(index < 0 ? index + size : index)];
    }
    if (container.isTuple()) {
      const auto& elements = container.toTupleRef().elements();
      const auto size = static_cast<int64_t>(elements.size());
      if (index < -size || index >= size) {
        throw std::out_of_range(
            fmt::format("index {} out of range for a tuple of {} values", index, size));
      }
      return elements[static_cast<size_t>(index < 0 ? index + size : index)];
    }
  } else if (container.isGenericDict()) {
    const auto dict = container.toGenericDict();
    auto it = dict.find(key);
    if (it == dict.end()) fail<KeyError>("key {} not found in the input", key.toStringRef());
    return it->value();
  }
  (void)node;
  throw std::invalid_argument(
      fmt::format("cannot index a {} with {}", container.tagKind(), key.tagKind()));
}

// Python's int arithmetic on two sizes, refusing what overflows int64 or divides by zero.
c10::IValue run_size_arith(Target::SizeArith op, const c10::IValue& a, const c10::IValue& b,
                           const Node& node) {
  if (!a.isInt() || !b.isInt()) {
    fail<RunError>("{} takes two ints, not {} and {}", node.target().str(), a.tagKind(),
                   b.tagKind());
  }
  const int64_t x = a.toInt(), y = b.toInt();
  int64_t out = 0;
  bool overflow = false;
  switch (op) {
    case Target::SizeArith::kAdd:
      overflow = __builtin_add_overflow(x, y, &out);
      break;
    case Target::SizeArith::kSub:
      overflow = __builtin_sub_overflow(x, y, &out);
      break;
    case Target::SizeArith::kMul:
      overflow = __builtin_mul_overflow(x, y, &out);
      break;
    case Target::SizeArith::kFloorDiv:
      if (y == 0) fail<RunError>("{} // 0: integer division by zero", x);
      if (const std::optional<int64_t> quotient = floor_div(x, y)) {
        out = *quotient;
      } else {
        overflow = true;  // INT64_MIN // -1
      }
      break;
  }
  if (overflow) fail<RunError>("{} of {} and {} overflows int64", node.target().str(), x, y);
  return out;
}

}  // namespace

namespace detail {

c10::IValue Source::materialize(const std::vector<c10::IValue>& slots) const {
  switch (kind) {
    case Kind::kConstant:
      return constant;
    case Kind::kSlot:
      return slots[static_cast<size_t>(slot)];
    case Kind::kTensorList: {
      c10::List<at::Tensor> list;
      list.reserve(items.size());
      for (const auto& item : items) list.push_back(item.materialize(slots).toTensor());
      return list;
    }
    case Kind::kOptionalTensorList: {
      c10::List<c10::optional<at::Tensor>> list;
      for (const auto& item : items) {
        auto value = item.materialize(slots);
        list.push_back(value.isNone() ? c10::nullopt : c10::optional<at::Tensor>(value.toTensor()));
      }
      return list;
    }
    case Kind::kIntList: {  // sizes some of which are size nodes: [size, -1]
      c10::List<int64_t> list;
      list.reserve(items.size());
      for (const auto& item : items) list.push_back(item.materialize(slots).toInt());
      return list;
    }
    case Kind::kTuple: {
      std::vector<c10::IValue> values;
      values.reserve(items.size());
      for (const auto& item : items) values.push_back(item.materialize(slots));
      return c10::ivalue::Tuple::create(std::move(values));
    }
  }
  return {};
}

std::string shown_node(const Node& node) {
  return node.meta().shown_as.empty() ? describe(node) : node.meta().shown_as;
}

std::string Plan::shown(const Node& node) const {
  std::string shown = shown_as ? shown_as(node) : std::string();
  if (shown.empty()) shown = shown_node(node);
  // A node with a list of a million sizes names itself in a message by its start.
  constexpr size_t kMost = 300;
  if (shown.size() > kMost) {
    size_t cut = kMost - 40;
    while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;
    shown = fmt::format("{}… ({} characters)", shown.substr(0, cut), shown.size());
  }
  return shown;
}

void fetch_args(const Step& step, const std::vector<c10::IValue>& slots,
                std::vector<c10::IValue>& args) {
  for (const auto& s : step.sources) args.push_back(s.materialize(slots));
}

c10::IValue call_step(const Step& step, std::vector<c10::IValue>& args) {
  switch (step.kind) {
    case Step::Kind::kAten:
      if (memory_budget_active()) check_unseen_memory(step.op->schema(), args);
      if (time_budget_active()) check_op_time(step.op->schema(), args);
      step.op->callBoxed(&args);
      if (step.returns == 1) return std::move(args[0]);
      return c10::ivalue::Tuple::create(std::move(args));
    case Step::Kind::kGetItem:
      return run_getitem(args.at(0), step.key, *step.node);
    case Step::Kind::kSizeArith:
      return run_size_arith(step.arith, args.at(0), args.at(1), *step.node);
    case Step::Kind::kCallModule:
      return step.body->run(std::move(args));
    case Step::Kind::kCallLeaf:
      return step.leaf(args);
    case Step::Kind::kPlaceholder:
    case Step::Kind::kConstant:
    case Step::Kind::kOutput:
      break;
  }
  throw InternalError(fmt::format("%{} is not a call", step.node->name()));
}

c10::IValue Plan::run(std::vector<c10::IValue> inputs) const {
  if (inputs.size() != placeholders.size()) {
    fail<RunError>("the graph takes {} inputs ({} given)", placeholders.size(), inputs.size());
  }
  std::vector<c10::IValue> slots(slot_count);
  for (size_t i = 0; i < placeholders.size(); ++i) {
    slots[static_cast<size_t>(placeholders[i])] = std::move(inputs[i]);
  }
  std::vector<c10::IValue> stack;
  stack.reserve(16);
  for (const Step& step : steps) {
    try {
      switch (step.kind) {
        case Step::Kind::kPlaceholder:
          break;
        case Step::Kind::kConstant:
          slots[static_cast<size_t>(step.out)] = step.constant;
          break;
        case Step::Kind::kOutput:
          return output.materialize(slots);
        default:
          stack.clear();
          fetch_args(step, slots, stack);
          slots[static_cast<size_t>(step.out)] = call_step(step, stack);
          break;
      }
    } catch (const InternalError&) {
      throw;  // a bug in tdfx: never dressed as the user's error
    } catch (const Error&) {
      throw;  // already names what failed (a ShapeError, or a RunError from a body)
    } catch (const std::exception& e) {
      const Target& target = step.node->target();
      if (target.is_aten() && target.op_name() == "_assert_async") {
        // A guard of the trace (tracer/recorder.cpp): a comparison inside a layer came out
        // otherwise than when it was traced, so eager would take another path here.
        throw RunError(fmt::format(
            "while executing {}: the guard %{} failed: a comparison of tensors inside this layer "
            "(attention's query, key and value) comes out otherwise for these inputs than when "
            "the graph was traced, so they take another path through it; trace with inputs "
            "like these",
            shown(*step.node), step.node->name()));
      }
      throw RunError(fmt::format("while executing {}: {}", shown(*step.node), library_message(e)));
    }
    for (int slot : step.release) slots[static_cast<size_t>(slot)] = c10::IValue();
  }
  return {};
}

}  // namespace detail

GraphModule::GraphModule(std::shared_ptr<torch::nn::Module> root, Graph graph,
                         std::function<std::string(const Node&)> shown_as)
    : root_(std::move(root)), graph_(std::move(graph)), shown_as_(std::move(shown_as)) {
  recompile();
}

namespace detail {

// What a GraphModule compiles on its first run, once however many threads start it. The
// mutex also keeps rename_nodes (a trace naming its program on first look, maybe on another
// thread) from renaming nodes while the compile reads them.
struct DeferredCompile {
  std::mutex mutex;
  std::atomic<bool> done{false};
  GraphModule::Attributes attributes;
};

}  // namespace detail

GraphModule::GraphModule(std::shared_ptr<torch::nn::Module> root, Graph graph,
                         std::function<std::string(const Node&)> shown_as, Attributes attributes,
                         Attributes constants)
    : root_(std::move(root)),
      graph_(std::move(graph)),
      shown_as_(std::move(shown_as)),
      constants_(std::move(constants)),
      deferred_(std::make_unique<detail::DeferredCompile>()) {
  deferred_->attributes = std::move(attributes);
  for (const auto& [path, tensor] : constants_) deferred_->attributes.emplace(path, tensor);
  plan_generation_ = graph_.generation();  // an edit before the first run makes it refuse
}

GraphModule GraphModule::with_constants(std::shared_ptr<torch::nn::Module> root, Graph graph,
                                        Attributes constants,
                                        std::function<std::string(const Node&)> shown_as) {
  // Made to compile on its first run, then compiled now with the constants, as the first
  // constructor compiles.
  GraphModule module(std::move(root), std::move(graph), std::move(shown_as), Attributes{},
                     std::move(constants));
  module.recompile();
  return module;
}

GraphModule::~GraphModule() = default;
GraphModule::GraphModule(GraphModule&&) noexcept = default;
GraphModule& GraphModule::operator=(GraphModule&&) noexcept = default;

void GraphModule::recompile() {
  deferred_.reset();
  AttributeMap attributes = root_ ? attributes_of(*root_) : AttributeMap{};
  for (const auto& [path, tensor] : constants_) attributes.emplace(path, tensor);
  compile(attributes);
}

std::shared_ptr<const detail::Plan> GraphModule::build_plan(const Attributes& attributes) const {
  graph_.lint();
  auto plan = Compiler(root_, attributes, "").compile(graph_);
  plan->shown_as = shown_as_;
  return plan;
}

void GraphModule::compile(const Attributes& attributes) {
  plan_ = build_plan(attributes);
  plan_generation_ = graph_.generation();
}

void GraphModule::rename_nodes(const std::function<std::string(const Node&)>& hint_of) {
  // The generation stays: a run on another thread checks it, and the plan is still the graph's.
  std::unique_lock<std::mutex> compiling;
  if (deferred_) compiling = std::unique_lock<std::mutex>(deferred_->mutex);
  graph_.rename_keeping_generation(hint_of);
}

const detail::Plan& GraphModule::plan() const {
  // The plan points at the graph's nodes: after an edit some may be gone.
  if (graph_.generation() != plan_generation_) {
    fail<GraphError>("the graph was edited after compile; call recompile()");
  }
  if (deferred_ && !deferred_->done.load(std::memory_order_acquire)) {
    // A compile that throws leaves `done` unset: the next run tries again, with the same error.
    std::lock_guard<std::mutex> lock(deferred_->mutex);
    if (!deferred_->done.load(std::memory_order_relaxed)) {
      plan_ = build_plan(deferred_->attributes);
      deferred_->attributes.clear();
      deferred_->done.store(true, std::memory_order_release);
    }
  }
  return *plan_;
}

std::shared_ptr<const detail::Plan> GraphModule::shared_plan() const {
  plan();  // refuses a stale plan
  return plan_;
}

c10::IValue GraphModule::forward(std::vector<c10::IValue> inputs) const {
  return plan().run(std::move(inputs));
}

std::vector<c10::IValue> GraphModule::run(std::vector<c10::IValue> inputs) const {
  c10::IValue out = forward(std::move(inputs));
  if (out.isTuple()) return out.toTupleRef().elements().vec();
  if (out.isList()) return out.toListRef().vec();
  return {out};
}

}  // namespace tdfx
