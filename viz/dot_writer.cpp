// to_dot: the op view's DOT text. Deterministic: it walks the graph in program order and the
// options in their given order, never by address. (The module view is module_view.cpp.)
//
// Layout choices, measured by bench/bench_viz.cpp on a chain of relu(Linear(64, 64))
// TensorDictModules (2-core machine):
// - No fan-in into the output above kMaxOutputEdges outputs. FxGraphDrawer's shape (every
//   output an edge into one node, no boxes) costs 7 ms at 10 modules, 1.1 s at 40 and
//   ~40 min at 100.
// - One cluster per TensorDictModule also tames that fan-in and costs little without it.
// - A written key is a row of the node that produces it, not a note beside it: a note on
//   its producer's rank could still be placed beyond a neighbour, and was 1,000 more nodes
//   and flat edges at 1,000 modules.
// - No dtype/shape on edges: the producer's `value:` row says it, and a label placed after
//   layout (`xlabel`) could land on a box title, while a `label` doubles the ranks.
// - The clusters make `dot`'s placement of nodes (its second network simplex) most of the
//   time: 1.4 s of 2.4 s at 1000 modules, 0.6 s without clusters. Above kLargeGraph nodes
//   its iterations are bounded (`nslimit=0.2`): 1.05 s, the chain's nodes then not all on
//   one vertical line.
// - Boxes side by side are grouped by 16 in plain subgraphs (viz/subgraph_groups.h): freeing
//   the layout searched all 1000 sibling boxes for each node and edge. Op view of 1000
//   modules, end to end: 1.67 s without the groups, 0.79 s with them (bench_viz).

#include <fmt/format.h>

#include <cctype>
#include <unordered_map>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/graph_printer.h"
#include "tdfx/viz/html.h"
#include "tdfx/viz/render.h"
#include "tdfx/viz/subgraph_groups.h"

namespace tdfx {
namespace {

/// Longest text shown in one row of a node (arguments of a 1000-output tuple…).
constexpr size_t kMaxRowText = 120;
/// Above this many nodes, `dot` places nodes with at most 0.2 × nodes iterations of its
/// network simplex (`nslimit`) instead of until optimal.
constexpr size_t kLargeGraph = 500;
/// Keys per row in the output node's list of written keys.
constexpr size_t kKeysPerRow = 6;

/// How a node is drawn; getitem is told apart from other calls.
enum class Kind {
  kPlaceholder,
  kGetAttr,
  kCallFunction,
  kGetItem,
  kCallMethod,
  kCallModule,
  kOutput
};

struct Style {
  const char* shape;
  const char* style;
  const char* fill;
  const char* header;
};

Style style_of(Kind kind) {
  switch (kind) {
    case Kind::kPlaceholder:
      return {"tab", "filled", "#d9f2d9", "#a6dba6"};
    case Kind::kGetAttr:
      return {"cylinder", "filled", "#fff3c4", "#f2d675"};
    case Kind::kCallFunction:
      return {"box", "rounded,filled", "#dcebf7", "#a9cbeb"};
    case Kind::kGetItem:
      return {"component", "filled", "#eadcf5", "#c9a9e6"};
    case Kind::kCallMethod:
      return {"box", "dashed,filled", "#eeeeee", "#cccccc"};
    case Kind::kCallModule:
      return {"box3d", "filled", "#ffe3c7", "#f5b77a"};
    case Kind::kOutput:
      return {"box, peripheries=2", "filled", "#f8d7da", "#eba3a9"};
  }
  return {"box", "filled", "#ffffff", "#dddddd"};
}

Kind kind_of(const Node& node) {
  switch (node.op()) {
    case OpCode::kPlaceholder:
      return Kind::kPlaceholder;
    case OpCode::kGetAttr:
      return Kind::kGetAttr;
    case OpCode::kCallFunction:
      return node.target().is_getitem() ? Kind::kGetItem : Kind::kCallFunction;
    case OpCode::kCallMethod:
      return Kind::kCallMethod;
    case OpCode::kCallModule:
      return Kind::kCallModule;
    case OpCode::kOutput:
      return Kind::kOutput;
  }
  return Kind::kCallFunction;
}

/// `f32[16, 64]`, `f32`, `[16, 64]` or "" — what is known of a tensor.
std::string meta_str(const TensorMeta& meta) {
  std::string out = meta.dtype ? dtype_short(*meta.dtype) : "";
  if (meta.shape) out += fmt::format("[{}]", fmt::join(*meta.shape, ", "));
  if (!out.empty() && meta.device && !meta.device->is_cpu()) out += " " + meta.device->str();
  return out;
}

/// One row of a node's table: escaped text, optionally bold or shaded.
struct Row {
  std::string text;  // already escaped HTML
  bool bold = false;
  const char* bgcolor = nullptr;
};

Row plain(const std::string& text) { return {escape_html(truncate_text(text, kMaxRowText))}; }

// Graphviz IDs live in disjoint namespaces, so that no node name can merge with anything
// else: a graph node is `node:NAME`, a module of the module view `module:PATH`. Boxes are
// subgraphs, `cluster_N`, which Graphviz keeps apart from nodes anyway. (Not `%NAME`:
// cgraph takes IDs starting with `%` for anonymous ones.)

/// The DOT ID of a graph node.
std::string node_id(const Node& node) { return dot_quote("node:" + node.name()); }

/// Width of a wrapped row of text in a node or a box title, in bytes.
constexpr size_t kNodeLabelWrap = 48;

/// Writes the op view's DOT text; holds the naming state of one drawing.
class DotWriter {
 public:
  DotWriter(const Graph& graph, const RenderOptions& options) : graph_(graph), options_(options) {}

  std::string run() {
    assign_boxes();
    collect_outputs();
    for (Node* node : graph_.nodes()) members_[box_of_[node] + 1].push_back(node_stmt(*node));
    out_ += "digraph G {\n";
    out_ += fmt::format(
        "  graph [rankdir={}, nodesep=0.3, ranksep=0.35, fontname=\"Helvetica\", fontsize=12",
        options_.rankdir == Rankdir::kLeftRight ? "LR" : "TB");
    // A large graph's node positions come from a bounded search (see the top of the file).
    if (graph_.size() > kLargeGraph) out_ += ", nslimit=0.2";
    if (!options_.title.empty()) {
      out_ += ", labelloc=t, label=<<b>" + escape_html(options_.title) + "</b>>";
    }
    out_ += "];\n";
    out_ += "  node [fontname=\"Helvetica\", fontsize=10, margin=\"0.05,0.03\"];\n";
    out_ +=
        "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\", fontcolor=\"#333333\"];\n";
    write_boxes(children_[0], "  ");
    for (const std::string& stmt : members_[0]) out_ += "  " + stmt;
    write_edges();
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  /// Which box each node and each box belongs to (-1: none); a box nests in the
  /// box with the longest path that prefixes its own.
  void assign_boxes() {
    const auto& boxes = options_.modules;
    std::vector<int> parent(boxes.size(), -1);
    std::unordered_map<std::string, int> by_path;
    // A root module (path "") is the whole graph: no box.
    for (size_t b = 0; b < boxes.size(); ++b) {
      if (!boxes[b].path.empty()) by_path.emplace(boxes[b].path, static_cast<int>(b));
    }
    for (size_t b = 0; b < boxes.size(); ++b) {
      std::string path = boxes[b].path;
      for (auto dot = path.rfind('.'); dot != std::string::npos; dot = path.rfind('.')) {
        path.resize(dot);
        auto it = by_path.find(path);
        if (it != by_path.end() && it->second != static_cast<int>(b)) {
          parent[b] = it->second;
          break;
        }
      }
    }
    // Children by box, index 0 the top level: each box is written once, with its children.
    children_.assign(boxes.size() + 1, {});
    members_.assign(boxes.size() + 1, {});
    for (size_t b = 0; b < boxes.size(); ++b) {
      if (boxes[b].path.empty()) continue;
      children_[static_cast<size_t>(parent[b] + 1)].push_back(static_cast<int>(b));
    }
    for (Node* node : graph_.nodes()) {
      auto it = by_path.find(node->meta().td_module);
      box_of_[node] = it == by_path.end() ? -1 : it->second;
    }
  }

  /// The output elements, and the keys each node writes.
  void collect_outputs() {
    outputs_ = output_values(graph_);
    for (size_t i = 0; i < outputs_.size() && i < options_.output_keys.size(); ++i) {
      if (outputs_[i]) written_[outputs_[i]].push_back(&options_.output_keys[i]);
    }
  }

  /// Sibling boxes, grouped when there are many (viz/subgraph_groups.h).
  void write_boxes(const std::vector<int>& boxes, const std::string& indent) {
    detail::SubgraphGroups groups(out_, boxes.size(), indent);
    for (int b : boxes) write_box(static_cast<size_t>(b), groups.next());
    groups.close();
  }

  void write_box(size_t b, const std::string& indent) {
    const ModuleBox& box = options_.modules[b];
    out_ += fmt::format("{}subgraph cluster_{} {{\n", indent, b);
    std::string label = "<b>" + escape_html(box.path) + "</b>";
    if (!box.type.empty()) label += "  " + escape_html(box.type);
    // The keys once, wrapped; the wrapped module's configuration is its call_module's.
    const std::string keys = repr(box.in_keys) + " -> " + repr(box.out_keys);
    label += "<br/>" + wrapped_html(truncate_text(keys, 4 * kNodeLabelWrap), kNodeLabelWrap);
    out_ += fmt::format(
        "{}  graph [label=<{}>, style=\"rounded,filled\", fillcolor=\"{}\", "
        "color=\"#7a7aa8\", labeljust=l, fontsize=10];\n",
        indent, label, box.sequential ? "#eef0f8" : "#f7f7fb");
    write_boxes(children_[b + 1], indent + "  ");
    for (const std::string& stmt : members_[b + 1]) out_ += indent + "  " + stmt;
    out_ += indent + "}\n";
  }

  std::string node_stmt(const Node& node) {
    const Kind kind = kind_of(node);
    const Style style = style_of(kind);
    std::vector<Row> rows = label_rows(node, kind);
    std::string label =
        "<<table border=\"0\" cellborder=\"0\" cellspacing=\"0\" cellpadding=\"1\">";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& row = rows[i];
      const char* bg = i == 0 ? style.header : row.bgcolor;
      label += "<tr><td";
      if (i > 0) label += " align=\"left\" balign=\"left\"";
      if (bg) label += fmt::format(" bgcolor=\"{}\"", bg);
      label += ">";
      label += row.bold ? "<b>" + row.text + "</b>" : row.text;
      label += "</td></tr>";
    }
    label += "</table>>";
    const auto overlay = options_.overlay.find(node.name());
    if (overlay == options_.overlay.end()) {
      return fmt::format("{} [shape={}, style=\"{}\", fillcolor=\"{}\", label={}];\n",
                         node_id(node), style.shape, style.style, style.fill, label);
    }
    const NodeOverlay& o = overlay->second;
    return fmt::format("{} [shape={}, style=\"{}\", fillcolor=\"{}\"{}, label={}];\n",
                       node_id(node), style.shape, style.style,
                       o.fill.empty() ? style.fill : dot_escape_colour(o.fill),
                       o.marked ? ", color=\"#d62728\", penwidth=3" : "", label);
  }

  std::vector<Row> label_rows(const Node& node, Kind kind) {
    std::vector<Row> rows;
    rows.push_back({"%" + escape_html(node.name()), true});
    rows.push_back(plain("op: " + std::string(to_string(node.op()))));
    Args args = node.args();
    Kwargs kwargs = node.kwargs();
    if (node.op() == OpCode::kCallFunction) {
      try {
        FxCall call = fx_call(node);
        rows.push_back(plain("target: " + call.target));
        args = std::move(call.args);
        kwargs = std::move(call.kwargs);
      } catch (const Error&) {
        rows.push_back(plain("target: " + node.target().str()));
      }
    } else if (node.op() != OpCode::kOutput) {
      rows.push_back(plain("target: " + node.target().str()));
    }
    if (kind == Kind::kGetItem && args.size() == 2) {
      const Argument& index = args[1];
      std::string what = index.is<NestedKey>() ? "reads key: " + index.as<NestedKey>().repr()
                                               : "index: " + fx_str(index);
      rows.push_back({escape_html(truncate_text(what, kMaxRowText)), true, "#f3ecfa"});
    }
    if (kind == Kind::kCallModule) module_rows(node, rows);
    if (kind == Kind::kOutput) {
      output_rows(rows);
    } else {
      if (!args.empty()) rows.push_back(plain("args: " + fx_args_str(args)));
      if (!kwargs.empty()) rows.push_back(plain("kwargs: " + fx_kwargs_str(kwargs)));
    }
    rows.push_back(plain(fmt::format("#users: {}", node.users().size())));
    const std::string meta = meta_str(node.meta().tensor);
    if (!meta.empty()) rows.push_back(plain("value: " + meta));
    const auto written = written_.find(&node);
    if (written != written_.end()) {
      for (const NestedKey* key : written->second) {
        rows.push_back(
            {"writes <b>" + escape_html(truncate_text(key->repr(), kMaxRowText)) + "</b>", false,
             "#fff3b0"});
      }
    }
    const auto overlay = options_.overlay.find(node.name());
    if (overlay != options_.overlay.end()) {
      for (const auto& line : overlay->second.lines) {
        Row row = plain(line);
        row.bgcolor = overlay->second.marked ? "#f8d0d0" : "#fffbe6";
        rows.push_back(row);
      }
    }
    return rows;
  }

  void module_rows(const Node& node, std::vector<Row>& rows) {
    const std::string& target = node.target().str();
    auto desc = options_.module_descriptions.find(target);
    const std::string& text =
        desc != options_.module_descriptions.end() ? desc->second : node.meta().module_type;
    if (!text.empty()) {
      rows.push_back({wrapped_html(truncate_text(text, 4 * kNodeLabelWrap), kNodeLabelWrap), true});
    }
    tensor_rows(options_.show_parameters, options_.module_parameters, target, "#fff0e0", rows);
    tensor_rows(options_.show_buffers, options_.module_buffers, target, "#eef5e4", rows);
  }

  static void tensor_rows(
      bool shown,
      const std::map<std::string, std::vector<std::pair<std::string, TensorMeta>>>& tensors,
      const std::string& target, const char* bgcolor, std::vector<Row>& rows) {
    if (!shown) return;
    auto found = tensors.find(target);
    if (found == tensors.end()) return;
    for (const auto& [name, meta] : found->second) {
      Row row = plain(name + ": " + meta_str(meta));
      row.bgcolor = bgcolor;
      rows.push_back(row);
    }
  }

  void output_rows(std::vector<Row>& rows) {
    const auto& keys = options_.output_keys;
    if (keys.empty()) {
      Node* out = graph_.output_node();
      rows.push_back(plain("args: " + fx_args_str(out->args())));
      return;
    }
    rows.push_back({escape_html(fmt::format("writes {} keys:", keys.size())), true});
    for (size_t i = 0; i < keys.size(); i += kKeysPerRow) {
      std::string line;
      for (size_t j = i; j < keys.size() && j < i + kKeysPerRow; ++j) {
        line += (j > i ? ", " : "") + keys[j].repr();
      }
      rows.push_back(plain(line));  // cut, as every row is: one long key would widen the node
    }
  }

  /// One edge per distinct input; into the output one per distinct output element, up to
  /// kMaxOutputEdges of them.
  void write_edges() {
    Node* out = graph_.output_node();
    for (Node* node : graph_.nodes()) {
      if (node == out && outputs_.size() > kMaxOutputEdges) continue;
      for (Node* input : node->input_nodes()) {
        out_ += "  " + node_id(*input) + " -> " + node_id(*node) + ";\n";
      }
    }
    // Without the fan-in the output would float to the top: pin it under the last output.
    if (out && outputs_.size() > kMaxOutputEdges) {
      for (auto it = outputs_.rbegin(); it != outputs_.rend(); ++it) {
        if (!*it) continue;
        out_ += fmt::format("  {} -> {} [style=invis];\n", node_id(**it), node_id(*out));
        break;
      }
    }
  }

  const Graph& graph_;
  const RenderOptions& options_;
  std::string out_;
  std::unordered_map<const Node*, int> box_of_;
  /// Boxes and node statements by box + 1 (0: the top level), in order.
  std::vector<std::vector<int>> children_;
  std::vector<std::vector<std::string>> members_;
  std::vector<Node*> outputs_;
  /// The keys each node's value is written to, in output order.
  std::unordered_map<const Node*, std::vector<const NestedKey*>> written_;
};

}  // namespace

std::string to_dot(const Graph& graph, const RenderOptions& options) {
  if (options.view == View::kModules) return module_view_dot(options);
  return DotWriter(graph, options).run();
}

}  // namespace tdfx
