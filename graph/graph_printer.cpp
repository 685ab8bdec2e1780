// torch.fx's text form of graphs and nodes (`str(graph)`, `node.format_node()`).
#include <ostream>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/graph/fx_face.h"
#include "tdfx/graph/graph.h"
#include "tdfx/graph/graph_module.h"

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

}  // namespace tdfx
