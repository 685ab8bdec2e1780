// torch.fx's text form of graphs, nodes and arguments (`str(graph)`, `node.format_node()`).
#include "tdfx/graph/graph_printer.h"

#include <ostream>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/enum_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/graph.h"
#include "tdfx/graph/graph_module.h"
#include "tdfx/graph/schema_arguments.h"

namespace tdfx {

std::string fx_args_str(const Args& args) { return fx_str(tuple(args)); }

std::string fx_kwargs_str(const Kwargs& kwargs) {
  std::string out = "{";
  for (size_t i = 0; i < kwargs.size(); ++i) {
    out += (i ? ", " : "") + kwargs[i].first + ": " + fx_str(kwargs[i].second);
  }
  return out + "}";
}

namespace {

std::string format_node(const Node& node) {
  const std::string head =
      fmt::format("%{} : [#users={}] = {}", node.name(), node.users().size(), to_string(node.op()));
  switch (node.op()) {
    case OpCode::kPlaceholder:
    case OpCode::kGetAttr:
      return fmt::format("{}[target={}]", head, node.target().str());
    case OpCode::kOutput:
      return "return " + fx_repr(node.args().at(0));
    case OpCode::kCallFunction: {
      const FxCall call = fx_call(node);
      return fmt::format("{}[target={}](args = {}, kwargs = {})", head, call.target,
                         fx_args_str(call.args), fx_kwargs_str(call.kwargs));
    }
    case OpCode::kCallMethod:
    case OpCode::kCallModule:
      return fmt::format("{}[target={}](args = {}, kwargs = {})", head, node.target().str(),
                         fx_args_str(node.args()), fx_kwargs_str(node.kwargs()));
  }
  throw InternalError("unknown op code");
}

}  // namespace

// Names and strings are printed as torch.fx prints them, but never across a
// line: a control character in a target or a string cannot forge a line.
std::string to_string(const Node& node) { return escape_controls(format_node(node)); }

std::string to_string(const Graph& graph) {
  std::string out = "graph():";
  for (const Node* node : graph.nodes()) out += "\n    " + to_string(*node);
  return out;
}

std::ostream& operator<<(std::ostream& os, const Graph& graph) { return os << to_string(graph); }
std::ostream& operator<<(std::ostream& os, const Node& node) { return os << to_string(node); }

namespace {

std::string describe_node(const Node& node) {
  switch (node.op()) {
    case OpCode::kPlaceholder:
      return fmt::format("%{} = placeholder {}", node.name(), node.target().str());
    case OpCode::kGetAttr:
      return fmt::format("%{} = self.{}", node.name(), node.target().str());
    case OpCode::kOutput:
      return "return " + fx_str(node.args().at(0));
    case OpCode::kCallFunction: {
      std::string target = node.target().str();
      Args args = node.args();
      Kwargs kwargs = node.kwargs();
      try {
        FxCall call = fx_call(node);
        target = call.target;
        args = call.args;
        kwargs = call.kwargs;
      } catch (const Error&) {
        // A node whose arguments do not fit its schema still gets described.
      }
      std::string inner = fx_args_str(args);
      inner = inner.substr(1, inner.size() - 2);
      if (!args.empty() && inner.back() == ',') inner.pop_back();
      for (const auto& [key, arg] : kwargs)
        inner += (inner.empty() ? "" : ", ") + key + "=" + fx_str(arg);
      return fmt::format("%{} = {}({})", node.name(), target, inner);
    }
    case OpCode::kCallMethod:
    case OpCode::kCallModule:
      return fmt::format("%{} = {}[{}]{}", node.name(), to_string(node.op()), node.target().str(),
                         fx_args_str(node.args()));
  }
  return "%" + node.name();
}

}  // namespace

std::string describe(const Node& node) { return escape_controls(describe_node(node)); }

namespace {

std::string join(const std::vector<Argument>& items, std::string (*fn)(const Argument&)) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + fn(items[i]);
  return out;
}

std::string device_str(const c10::Device& device) { return device.str(); }

}  // namespace

std::string fx_str(const Argument& arg) {
  struct Visitor {
    std::string operator()(None) const { return "None"; }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return python_float_repr(v); }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const NestedKey& v) const { return v.str(); }
    std::string operator()(c10::ScalarType v) const { return dtype_repr(v); }
    std::string operator()(c10::MemoryFormat v) const { return memory_format_repr(v); }
    std::string operator()(c10::Layout v) const { return layout_repr(v); }
    std::string operator()(const c10::Device& v) const { return device_str(v); }
    std::string operator()(Node* v) const { return "%" + v->name(); }
    std::string operator()(const ArgumentList& v) const {
      const std::string items = join(v.items, fx_str);
      if (!v.is_tuple) return "[" + items + "]";
      return "(" + items + (v.items.size() == 1 ? ",)" : ")");
    }
  };
  return std::visit(Visitor{}, arg.value);
}

std::string fx_repr(const Argument& arg) {
  struct Visitor {
    std::string operator()(None) const { return "None"; }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return python_float_repr(v); }
    std::string operator()(const std::string& v) const { return python_repr(v); }
    std::string operator()(const NestedKey& v) const { return v.repr(); }
    std::string operator()(c10::ScalarType v) const { return dtype_repr(v); }
    std::string operator()(c10::MemoryFormat v) const { return memory_format_repr(v); }
    std::string operator()(c10::Layout v) const { return layout_repr(v); }
    std::string operator()(const c10::Device& v) const {
      const std::string type = python_repr(c10::DeviceTypeName(v.type(), true));
      if (!v.has_index()) return fmt::format("device(type={})", type);
      return fmt::format("device(type={}, index={})", type, v.index());
    }
    std::string operator()(Node* v) const { return v->name(); }
    std::string operator()(const ArgumentList& v) const {
      const std::string items = join(v.items, fx_repr);
      if (!v.is_tuple) return "[" + items + "]";
      return "(" + items + (v.items.size() == 1 ? ",)" : ")");
    }
  };
  return std::visit(Visitor{}, arg.value);
}

}  // namespace tdfx
