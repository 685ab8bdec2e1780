#include "tdfx/codegen/python_code.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/graph_printer.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/graph/value_type.h"

namespace tdfx {
namespace {

// True when `text` cannot sit between double quotes as it is.
bool needs_escapes(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return c == '"' || c == '\\' || byte < 0x20 || byte == 0x7f;
  });
}

// torch.fx's _format_target: `self.a.b`, or getattr(...) for non-identifiers.
std::string format_target(const std::string& base, const std::string& path) {
  std::string out = base;
  size_t start = 0;
  while (start <= path.size()) {
    const auto dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (is_python_identifier(part) && !is_python_keyword(part)) {
      out += "." + part;
    } else if (!needs_escapes(part)) {
      out = fmt::format("getattr({}, \"{}\")", out, part);  // FX's spelling: `getattr(self, "0")`
    } else {
      out = fmt::format("getattr({}, {})", out, python_repr(part));  // any other text, escaped
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

std::string format_call_args(const Args& args, const Kwargs& kwargs) {
  std::string out;
  for (const auto& arg : args) out += (out.empty() ? "" : ", ") + fx_repr(arg);
  for (const auto& [key, arg] : kwargs)
    out += (out.empty() ? "" : ", ") + key + " = " + fx_repr(arg);
  return out;
}

// Python operator syntax (`{} * {}`) with each `{}` replaced by an operand.
std::string fill_operator(const std::string& pattern, const Args& operands) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 2, "{}") == 0 && next < operands.size()) {
      out += fx_repr(operands[next++]);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// Export style: positional arguments up to the last one that differs from its
// default, then the keyword-only ones that differ, by name (Python cannot
// pass those positionally: `aten.div.Tensor_mode(x, y, rounding_mode = 'floor')`).
struct ExportCall {
  Args args;
  Kwargs kwargs;
};

ExportCall export_call(const Node& node) {
  const Args full = schema_arguments(node);
  const auto& formals = node.target().schema().arguments();
  auto is_default = [&](size_t i) {
    return formals[i].default_value() && equals_default(full[i], *formals[i].default_value());
  };
  ExportCall call;
  size_t positional = 0;
  while (positional < full.size() && !formals[positional].kwarg_only()) ++positional;
  size_t kept = positional;
  while (kept > 0 && is_default(kept - 1)) --kept;
  call.args.assign(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(kept));
  for (size_t i = positional; i < full.size(); ++i) {
    if (!is_default(i)) call.kwargs.emplace_back(formals[i].name(), full[i]);
  }
  return call;
}

// The right-hand side of a node's assignment, and the arguments whose last
// reads decide the releases after it.
struct Statement {
  std::string expression;
  Args reads;
};

Statement statement(const Node& node, const CodeOptions& options) {
  switch (node.op()) {
    case OpCode::kCallFunction: {
      if (node.target().is_getitem() || node.target().is_size_arith() ||
          options.style == CodeStyle::kFx) {
        const FxCall call = fx_call(node);
        Args reads = call.args;
        for (const auto& [key, arg] : call.kwargs) reads.push_back(arg);
        if (!call.python_operator.empty()) {
          return {fill_operator(call.python_operator, call.args), reads};
        }
        return {fmt::format("{}({})", call.target, format_call_args(call.args, call.kwargs)),
                reads};
      }
      const ExportCall call = export_call(node);
      Args reads = call.args;
      for (const auto& [key, arg] : call.kwargs) reads.push_back(arg);
      const std::string overload =
          node.target().overload().empty() ? "default" : node.target().overload();
      return {fmt::format("torch.ops.aten.{}.{}({})", node.target().op_name(), overload,
                          format_call_args(call.args, call.kwargs)),
              reads};
    }
    case OpCode::kCallMethod: {
      if (node.args().empty())
        fail<GraphError>("call_method %{} has no self argument", node.name());
      const Args rest(node.args().begin() + 1, node.args().end());
      Args reads = node.args();
      for (const auto& [key, arg] : node.kwargs()) reads.push_back(arg);
      return {fmt::format("{}.{}({})", fx_repr(node.args()[0]), node.target().str(),
                          format_call_args(rest, node.kwargs())),
              reads};
    }
    case OpCode::kCallModule: {
      Args reads = node.args();
      for (const auto& [key, arg] : node.kwargs()) reads.push_back(arg);
      return {fmt::format("{}({})", format_target("self", node.target().str()),
                          format_call_args(node.args(), node.kwargs())),
              reads};
    }
    case OpCode::kGetAttr:
      return {format_target("self", node.target().str()), {}};
    case OpCode::kOutput:
      return {"return " + fx_repr(node.args().at(0)), node.args()};
    case OpCode::kPlaceholder:
      return {node.target().str(), {}};
  }
  throw InternalError("unknown op code");
}

// The lines of the forward body (without indentation) and its signature.
struct Body {
  std::vector<std::string> parameters;
  std::vector<std::string> lines;
  /// Per node in graph order: its line of `lines`, or kParameter for a placeholder that is
  /// only a parameter of the signature, at `parameter` of `parameters`.
  struct Place {
    size_t line;
    size_t parameter;
  };
  static constexpr size_t kParameter = static_cast<size_t>(-1);
  std::vector<Place> places;
};

Body generate_body(const Graph& graph, const CodeOptions& options) {
  const auto nodes = graph.node_list();
  std::vector<Statement> statements;
  statements.reserve(nodes.size());
  for (const Node* node : nodes) statements.push_back(statement(*node, options));

  // torch.fx's register_last_uses: walking backwards, the first reader seen
  // is the last use; releases are listed in the order that reader reads them.
  std::unordered_map<const Node*, std::vector<const Node*>> releases;
  std::unordered_map<const Node*, const Node*> last_use;
  for (size_t i = nodes.size(); i-- > 0;) {
    for (const auto& arg : statements[i].reads) {
      for_each_node(arg, [&](Node* input) {
        if (last_use.emplace(input, nodes[i]).second) releases[nodes[i]].push_back(input);
      });
    }
  }

  Body body;
  std::string current_module;
  bool first_statement = true;
  std::optional<ValueTypes> types;
  if (options.annotations) types.emplace(graph);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = *nodes[i];
    std::string annotation = options.annotations ? type_annotation(node) : "";
    if (options.annotations && annotation.empty() && types->of(&node).size) {
      annotation = types->of(&node).str();  // Sym(s0)
    }
    const std::string typed = annotation.empty() ? "" : fmt::format(": \"{}\"", annotation);
    if (node.op() == OpCode::kPlaceholder) {
      body.places.push_back({Body::kParameter, body.parameters.size()});
      body.parameters.push_back(node.target().str() + typed);
      if (node.target().str() != node.name()) {
        body.places.back().line = body.lines.size();
        body.lines.push_back(node.name() + " = " + node.target().str());
      }
      continue;
    }
    if (options.module_comments && node.op() != OpCode::kOutput &&
        node.meta().module_path != current_module) {
      current_module = node.meta().module_path;
      if (!current_module.empty()) {
        if (!first_statement) body.lines.emplace_back();
        std::string comment = "# Module: " + current_module;
        if (!node.meta().module_type.empty()) comment += " (" + node.meta().module_type + ")";
        // A comment ends at a line break: one in a module description must not end it.
        body.lines.push_back(escape_controls(comment));
      }
    }
    first_statement = false;
    std::string line = node.op() == OpCode::kOutput
                           ? statements[i].expression
                           : node.name() + typed + " = " + statements[i].expression;
    auto released = releases.find(&node);
    if (node.op() != OpCode::kOutput && released != releases.end()) {
      line += ";  ";
      for (const Node* value : released->second) line += value->name() + " = ";
      line += "None";
    }
    body.places.push_back({body.lines.size(), 0});
    body.lines.push_back(line);
  }
  if (body.lines.empty()) body.lines.emplace_back("pass");
  return body;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

std::string signature(const Body& body) {
  std::vector<std::string> params{"self"};
  params.insert(params.end(), body.parameters.begin(), body.parameters.end());
  return fmt::format("def forward({}):", join(params, ", "));
}

}  // namespace

CodeOptions readable_defaults() {
  CodeOptions options;
  options.annotations = true;
  options.module_comments = true;
  return options;
}

std::string type_annotation(const Node& node) {
  const TensorMeta& meta = node.meta().tensor;
  if (!meta.dtype || !meta.shape) return "";
  std::string dims;
  for (size_t i = 0; i < meta.shape->size(); ++i) {
    dims += (i ? ", " : "") + meta.dim_str(i);
  }
  return fmt::format("{}[{}]", dtype_short(*meta.dtype), dims);
}

std::string python_code(const Graph& graph, const CodeOptions& options) {
  const Body body = generate_body(graph, options);
  std::string out = "\n\n\n" + signature(body) + "\n";
  for (const auto& line : body.lines) out += (line.empty() ? "" : "    " + line) + "\n";
  return out + "    ";
}

std::vector<std::string> node_lines(const Graph& graph, const CodeOptions& options) {
  const Body body = generate_body(graph, options);
  std::vector<std::string> lines;
  lines.reserve(body.places.size());
  for (const Body::Place& place : body.places) {
    lines.push_back(place.line == Body::kParameter ? body.parameters[place.parameter]
                                                   : body.lines[place.line]);
  }
  return lines;
}

std::string print_readable(const Graph& graph, CodeOptions options) {
  const Body body = generate_body(graph, options);
  std::string out =
      fmt::format("class {}(torch.nn.Module):\n    {}\n", options.class_name, signature(body));
  for (const auto& line : body.lines) out += (line.empty() ? "" : "        " + line) + "\n";
  return out + "        ";
}

}  // namespace tdfx
