// Reading a program's graph (GraphReader), signature and batch specialisation from
// program.json, each checked as untrusted.

#include "tdfx/export/graph_reader.h"

#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tdfx/core/enum_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/export/archive_format.h"
#include "tdfx/export/json_checks.h"
#include "tdfx/graph/namespace.h"

namespace tdfx::detail {

using nlohmann::json;

namespace {

class GraphReader {
 public:
  explicit GraphReader(std::string where) : where_(std::move(where)) {}

  Graph read(const json& nodes, int depth = 0) {
    if (depth > kMaxBodyDepth) fail<ArchiveError>("{}: bodies nested too deeply", where_);
    if (!nodes.is_array()) fail<ArchiveError>("{}: 'nodes' is not a list", where_);
    Graph graph;
    std::unordered_map<std::string, Node*> by_name;
    std::unordered_set<std::string> input_names;  // the placeholders' targets: forward's
    for (size_t i = 0; i < nodes.size(); ++i) {
      const json& entry = nodes[i];
      const std::string name = text(entry, "name", fmt::format("{}: node {}", where_, i));
      if (!is_python_identifier(name) || Namespace::is_reserved(name)) {
        fail<ArchiveError>("{}: node {}: name {} is not a legal, unreserved identifier", where_, i,
                           python_repr(name));
      }
      const std::string where = fmt::format("{}: node %{}", where_, name);
      const std::string op = text(entry, "op", where);
      const std::string target_text = printable(text(entry, "target", where), "target", where);
      if (op == "placeholder" &&
          (target_text == "self" || !input_names.insert(target_text).second)) {
        // Either would print `def forward(self, x, self)` or `(self, x, x)`: not Python.
        fail<ArchiveError>(
            "{}: placeholder target {} {}", where, python_repr(target_text),
            target_text == "self" ? "is the module's own name" : "repeats another input's");
      }
      auto arg = [&](const json& value) { return argument(value, by_name, where, 0); };
      Args args;
      for (const json& value : array(entry, "args", where)) args.push_back(arg(value));
      Kwargs kwargs;
      std::unordered_set<std::string> kwarg_names;
      for (const json& pair : array(entry, "kwargs", where)) {
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
          fail<ArchiveError>("{}: a keyword argument must be [name, value]", where);
        }
        const std::string kwarg = pair[0].get<std::string>();
        if (!is_python_identifier(kwarg) || !kwarg_names.insert(kwarg).second) {
          fail<ArchiveError>("{}: keyword argument {} is not an identifier or repeats", where,
                             python_repr(kwarg));
        }
        kwargs.emplace_back(kwarg, arg(pair[1]));
      }
      Node* node = nullptr;
      try {
        node = create(graph, op, target_text, std::move(args), std::move(kwargs), name, where);
      } catch (const ArchiveError&) {
        throw;
      } catch (const Error& e) {
        fail<ArchiveError>("{}: {}", where, e.what());
      }
      if (node->name() != name) {
        fail<ArchiveError>("{}: node name '{}' is used twice", where, name);
      }
      read_meta(field(entry, "meta", where), node->meta(), where);
      if (entry.contains("body")) {
        node->set_body(
            std::make_shared<Graph>(GraphReader(where + " body").read(entry["body"], depth + 1)));
      }
      by_name[name] = node;
    }
    try {
      graph.lint();
    } catch (const GraphError& e) {
      fail<ArchiveError>("{}: the graph is malformed: {}", where_, e.what());
    }
    return graph;
  }

 private:
  static Node* create(Graph& graph, const std::string& op, const std::string& target, Args args,
                      Kwargs kwargs, const std::string& name, const std::string& where) {
    if (op == "placeholder") {
      if (!is_python_identifier(target) || is_python_keyword(target)) {
        fail<ArchiveError>("{}: placeholder target {} is not an identifier (or is a keyword)",
                           where, python_repr(target));
      }
      return graph.create_node(OpCode::kPlaceholder, Target(target), {}, {}, name);
    }
    if (op == "call_module") {
      if (!is_module_path(target)) {
        fail<ArchiveError>("{}: call_module target {} is not a module path", where,
                           python_repr(target));
      }
      return graph.create_node(OpCode::kCallModule, Target(target), std::move(args),
                               std::move(kwargs), name);
    }
    if (op == "output") {
      if (args.size() != 1 || !kwargs.empty()) {
        fail<ArchiveError>("{}: output takes one argument", where);
      }
      return graph.create_node(OpCode::kOutput, Target("output"), std::move(args), {}, name);
    }
    if (op == "call_function") {
      std::optional<Target> builtin = Target::builtin(target);
      Target t = builtin ? *builtin : Target::aten(target);
      return graph.create_node(OpCode::kCallFunction, std::move(t), std::move(args),
                               std::move(kwargs), name);
    }
    // get_attr and call_method cannot run without a module: refused here.
    fail<ArchiveError>("{}: op {} cannot appear in a loaded program", where, python_repr(op));
  }

  Argument argument(const json& value, const std::unordered_map<std::string, Node*>& nodes,
                    const std::string& where, int depth) {
    if (depth > kMaxArgumentDepth) fail<ArchiveError>("{}: arguments nested too deeply", where);
    if (!value.is_object() || value.size() != 1 + (value.contains("is_tuple") ? 1 : 0)) {
      fail<ArchiveError>("{}: malformed argument ({})", where, describe(value));
    }
    if (value.contains("none") && value["none"].is_null()) return None{};
    if (value.contains("bool") && value["bool"].is_boolean()) return value["bool"].get<bool>();
    if (value.contains("int") && value["int"].is_number_integer())
      return value["int"].get<int64_t>();
    if (value.contains("float")) {
      const json& f = value["float"];
      if (f.is_number()) return f.get<double>();
      if (f == "inf") return std::numeric_limits<double>::infinity();
      if (f == "-inf") return -std::numeric_limits<double>::infinity();
      if (f == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    if (value.contains("str") && value["str"].is_string()) return value["str"].get<std::string>();
    if (value.contains("key")) {
      const bool is_tuple = value.contains("is_tuple") && value["is_tuple"].is_boolean() &&
                            value["is_tuple"].get<bool>();
      return key_from_json(value["key"], is_tuple, where);
    }
    if (value.contains("dtype")) return dtype_from_json(value["dtype"], where);
    if (value.contains("memory_format")) {
      return enum_from_json(value["memory_format"], "memory format", memory_format_from_name,
                            memory_format_name, where);
    }
    if (value.contains("layout"))
      return enum_from_json(value["layout"], "layout", layout_from_name, layout_name, where);
    if (value.contains("device")) return device_from_json(value["device"], where);
    if (value.contains("node") && value["node"].is_string()) {
      auto it = nodes.find(value["node"].get<std::string>());
      if (it == nodes.end()) {
        fail<ArchiveError>("{}: reads node {}, which is not defined before it", where,
                           describe(value["node"]));
      }
      return it->second;
    }
    for (const char* kind : {"list", "tuple"}) {
      if (value.contains(kind) && value[kind].is_array()) {
        ArgumentList items{{}, std::string(kind) == "tuple"};
        for (const json& item : value[kind]) {
          items.items.push_back(argument(item, nodes, where, depth + 1));
        }
        return items;
      }
    }
    fail<ArchiveError>("{}: malformed argument", where);
  }

  static void read_meta(const json& meta, NodeMeta& out, const std::string& where) {
    out.module_path = printable(text(meta, "module_path", where), "module path", where);
    out.module_type = printable(text(meta, "module_type", where), "module type", where);
    out.td_module = printable(text(meta, "td_module", where), "module path", where);
    if (meta.contains("dtype")) out.tensor.dtype = dtype_from_json(meta["dtype"], where);
    if (meta.contains("device")) out.tensor.device = device_from_json(meta["device"], where);
    if (meta.contains("shape")) out.tensor.shape = shape_from_json(meta["shape"], where);
    if (meta.contains("batch_dims")) {
      out.tensor.batch_dims = batch_dims_from_json(meta["batch_dims"], out.tensor.shape, where);
    }
    if (meta.contains("derived_dims")) {
      out.tensor.derived_dims = derived_dims_from_json(meta["derived_dims"], out.tensor, where);
    }
  }

  std::string where_;
};

}  // namespace

Graph graph_from_json(const json& nodes, const std::string& where) {
  return GraphReader(where).read(nodes);
}

GraphSignature signature_from_json(const json& value, const std::string& where) {
  GraphSignature signature;
  for (const json& in : array(value, "inputs", where)) {
    const std::string kind = text(in, "kind", where);
    InputKind k;
    if (kind == "parameter") {
      k = InputKind::kParameter;
    } else if (kind == "buffer") {
      k = InputKind::kBuffer;
    } else if (kind == "constant") {
      k = InputKind::kConstant;
    } else if (kind == "user_input") {
      k = InputKind::kUserInput;
    } else {
      fail<ArchiveError>("{}: unknown input kind {}", where, python_repr(kind));
    }
    signature.inputs.push_back({k,
                                text(in, "name", where),
                                printable(text(in, "target", where), "input target", where),
                                {}});
  }
  for (const json& out : array(value, "outputs", where)) {
    const bool is_tuple =
        out.contains("is_tuple") && out["is_tuple"].is_boolean() && out["is_tuple"].get<bool>();
    signature.outputs.push_back(
        {text(out, "name", where), key_from_json(field(out, "key", where), is_tuple, where)});
  }
  return signature;
}

void check_signature(const Graph& graph, const GraphSignature& signature,
                     const std::string& where) {
  std::vector<std::string> placeholders;
  for (const Node* node : graph.nodes()) {
    if (node->op() == OpCode::kPlaceholder) placeholders.push_back(node->name());
  }
  if (placeholders.size() != signature.inputs.size()) {
    fail<ArchiveError>("{}: the signature lists {} inputs but the graph has {} placeholders", where,
                       signature.inputs.size(), placeholders.size());
  }
  std::unordered_set<std::string> user_targets;
  for (size_t i = 0; i < placeholders.size(); ++i) {
    const InputSpec& in = signature.inputs[i];
    if (placeholders[i] != in.name) {
      fail<ArchiveError>("{}: signature input {} is {} but the placeholder is '{}'", where, i,
                         python_repr(in.name), placeholders[i]);
    }
    if (in.kind == InputKind::kUserInput && !user_targets.insert(in.target).second) {
      fail<ArchiveError>("{}: two user inputs are called {}", where, python_repr(in.target));
    }
  }
  const Node* output = graph.output_node();
  if (!output) fail<ArchiveError>("{}: the graph has no output node", where);
  const Argument& result = output->args().at(0);
  if (!result.is<ArgumentList>() || result.as<ArgumentList>().items.empty()) {
    fail<ArchiveError>("{}: the output node must return a non-empty tuple of nodes", where);
  }
  const auto& items = result.as<ArgumentList>().items;
  if (items.size() != signature.outputs.size()) {
    fail<ArchiveError>("{}: the signature lists {} outputs but the graph returns {}", where,
                       signature.outputs.size(), items.size());
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const Node* node = items[i].node();
    if (!node || node->name() != signature.outputs[i].name) {
      fail<ArchiveError>("{}: output {} of the signature is {} but the graph returns {}", where, i,
                         python_repr(signature.outputs[i].name),
                         node ? "%" + node->name() : std::string("a constant"));
    }
  }
}

std::optional<BatchSpecialisation> specialisation_from_json(const json& document,
                                                            const Graph& graph,
                                                            const std::string& where) {
  if (!document.contains("batch_specialisation")) return std::nullopt;
  const std::string here = where + ": batch_specialisation";
  const json& value = document["batch_specialisation"];
  const json& batch = field(value, "traced_batch", here);
  if (!batch.is_number_integer() || batch.get<int64_t>() < 0) {
    fail<ArchiveError>("{}: traced_batch is not a non-negative int", here);
  }
  BatchSpecialisation out{batch.get<int64_t>(), text(value, "node", here),
                          printable(text(value, "module", here), "module path", here)};
  bool found = out.node.empty();
  for (const Node* node : graph.nodes()) found = found || node->name() == out.node;
  if (!found) fail<ArchiveError>("{}: names no node of the graph", here);
  return out;
}

}  // namespace tdfx::detail
