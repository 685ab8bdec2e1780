#pragma once

/// \file
/// Python source printers for graphs: torch.fx's `GraphModule.code`, a
/// readable class with dtype/shape annotations (`print_readable`), and the
/// export style that names aten overloads (`torch.ops.aten.linear.default`).

#include <string>
#include <vector>

#include "tdfx/graph/graph.h"

namespace tdfx {

/// How calls are spelled.
enum class CodeStyle {
  /// torch.fx symbolic-trace style: `torch.softmax(mul, dim = 1)`, `a * b`.
  kFx,
  /// torch.export style: `torch.ops.aten.softmax.int(mul, 1)`.
  kExport,
};

/// Options of the source printers.
struct CodeOptions {
  /// How calls are spelled: torch.fx's style (the default) or torch.export's.
  CodeStyle style = CodeStyle::kFx;
  /// Annotate placeholders and tensor-valued nodes with `"f32[1, 3]"`, and an int that is a
  /// function of the batch (a size node of a dynamic trace) as torch.export annotates a SymInt,
  /// `"Sym(5*s0)"` (graph/value_type.h).
  bool annotations = false;
  /// Put a `# Module: path (type)` comment before each run of nodes that
  /// came from the same module.
  bool module_comments = false;
  /// The class name print_readable uses.
  std::string class_name = "GraphModule";
};

/// The forward function, byte-identical to torch.fx 1.13's `GraphModule.code`
/// in the FX style: a blank-line prologue, `def forward(self, ...):`, one
/// line per node with `;  x = None` after a value's last use, `return ...`
/// and a trailing indented empty line.
std::string python_code(const Graph& graph, const CodeOptions& options = {});

/// Each node's own line of `python_code(graph, options)`, unindented, in graph order
/// (`relu = torch.relu(_0_fc1);  _0_fc1 = None`): a placeholder's is its parameter in the
/// signature (`tensordict`), or its `name = target` line when it has one; the output's is its
/// `return` line. What the interactive page (viz/page.h) shows beside each node.
std::vector<std::string> node_lines(const Graph& graph, const CodeOptions& options = {});

/// Annotations and module comments on.
CodeOptions readable_defaults();

/// `class GraphModule(torch.nn.Module):` followed by the forward, indented,
/// as `GraphModule.print_readable(print_output=False)` prints it. Defaults to
/// annotations and module comments on.
std::string print_readable(const Graph& graph, CodeOptions options = readable_defaults());

/// The annotation of a node's value, `f32[1, 3]`, or "" when not one tensor; a dimension
/// that follows the batch size is `s0` (TensorMeta::prints_symbolic): `f32[s0, 3]`.
std::string type_annotation(const Node& node);

}  // namespace tdfx
