#pragma once

/// \file
/// Drawing a graph: its DOT text, and SVG/PNG/PDF rendered in process with
/// Graphviz (cgraph + gvc, the `dot` layout), as torch.fx's FxGraphDrawer
/// does, plus what a TensorDict pipeline needs to be debugged from a picture:
/// the key each getitem reads, the key each output is written to, and one box
/// per TensorDictModule. Two views of the same pipeline:
///
/// - View::kOps: every graph node, boxed by the TensorDictModule that produced it.
/// - View::kModules: every TensorDictModule one node, every key an edge from the module
///   that writes it to the modules that read it, drawn from `RenderOptions::modules` alone.
///
///     RenderOptions options;
///     options.output_keys = {"hidden", "out"};
///     write(graph, "pipeline.svg", options);     // or .png, .pdf, .dot
///     options.view = View::kModules;
///     write(graph, "modules.svg", options);
///
/// Graphviz IDs (the `<title>` of each SVG group) say what was drawn: `node:NAME` for a
/// graph node, `module:PATH` for a module of the module view, `input:N` / `output:N` for
/// the N-th pipeline input / output key of the module view.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tdfx/core/nested_key.h"
#include "tdfx/graph/graph.h"

namespace tdfx {

/// An output format of `render`. kHtml is the interactive page (viz/page.h): one
/// self-contained file with the SVG, pan and zoom, search and a panel per node.
enum class Format { kSvg, kPng, kPdf, kDot, kHtml };

/// A TensorDictModule (or a nested TensorDictSequential) of the pipeline. In the op view,
/// one labelled box around the nodes its call produced (those with
/// `NodeMeta::td_module == path`); in the module view, one node (a sequential: a box
/// around its children). A box whose path extends another's (`0.module.1` in `0`) is
/// drawn inside it.
struct ModuleBox {
  /// Its path in the module tree ("0", "0.module.1").
  std::string path;
  /// The wrapped module's configuration (`Linear(in_features=3, out_features=4, bias=true)`);
  /// may be "". Long text wraps.
  std::string label;
  /// The keys it reads.
  std::vector<NestedKey> in_keys;
  /// The keys it writes.
  std::vector<NestedKey> out_keys;
  /// The wrapped module's type as its user knows it (`Linear`, `Net`), or
  /// `TensorDictSequential`; may be "".
  std::string type;
  /// A TensorDictSequential: a box around its children, never a node of its own.
  bool sequential = false;
  /// Number of parameter elements (a shared layer counts in each module that calls it).
  int64_t parameters = 0;
  /// Number of buffer elements (BatchNorm's running statistics).
  int64_t buffers = 0;
};

/// Which picture of the pipeline `to_dot` and `render` draw.
enum class View {
  /// Every graph node, boxed by TensorDictModule (torch.fx's FxGraphDrawer, and more).
  kOps,
  /// Every TensorDictModule one node, every key an edge; nested sequentials as boxes.
  kModules
};

/// The direction the drawing flows in: Graphviz's `rankdir`.
enum class Rankdir {
  /// Top to bottom (`TB`). The module view then reads like text: rows of modules, left
  /// to right, one under the other.
  kTopBottom,
  /// Left to right (`LR`). The module view then reads in columns.
  kLeftRight
};

/// "ops" / "modules"; and back, std::nullopt for anything else.
std::string_view to_string(View view);
std::optional<View> view_from_string(std::string_view text);

/// The Graphviz ID of a module of the module view (`module:0.module.1`), unquoted.
std::string module_node_id(const std::string& path);

/// What a debugging run adds to one node's drawing (see debug/overlay.h).
struct NodeOverlay {
  /// The node's fill colour (`#f4a582`); "" keeps its style's.
  std::string fill;
  /// Rows added to the node's label (`12.5 µs, 61.0%`, `min -1.2 max 3.4`).
  std::vector<std::string> lines;
  /// Drawn with a thick red border: the node where NaN or Inf started.
  bool marked = false;
};

/// The default of RenderOptions::max_nodes: a graph of this size renders to SVG in a few
/// seconds on a 2-core machine.
inline constexpr size_t kDefaultMaxNodes = 2500;

/// How many modules the module view lays out per unit of RenderOptions::max_nodes.
inline constexpr size_t kModuleNodesPerNode = 10;

/// What to draw beyond the graph itself. Everything is plain data, so that a
/// caller without a tracer (a test, a tool) can supply it.
struct RenderOptions {
  /// The op view (the default) or the module view.
  View view = View::kOps;
  /// Top-down (the default) or left-right.
  Rankdir rankdir = Rankdir::kTopBottom;
  /// Show each call_module's parameters (name, dtype, shape) in its node.
  bool show_parameters = true;
  /// Show each call_module's buffers (BatchNorm's running statistics) as its parameters.
  bool show_buffers = true;
  /// Module view: at most this many modules side by side before the next row (column with
  /// Rankdir::kLeftRight) starts, so that a long chain reads like a page rather than a
  /// strip. A row also ends where the enclosing sequential changes. 0: no limit.
  size_t modules_per_row = 4;
  /// The TensorDictModule boxes; matched against `NodeMeta::td_module`.
  std::vector<ModuleBox> modules;
  /// The key each element of the output tuple is written to, in order.
  std::vector<NestedKey> output_keys;
  /// call_module target → its configuration,
  /// `Linear(in_features=100, out_features=50, bias=true)`.
  std::map<std::string, std::string> module_descriptions;
  /// call_module target → its parameters, `[("weight", f32[50, 100]), ...]`.
  std::map<std::string, std::vector<std::pair<std::string, TensorMeta>>> module_parameters;
  /// call_module target → its buffers, `[("running_mean", f32[10]), ...]`.
  std::map<std::string, std::vector<std::pair<std::string, TensorMeta>>> module_buffers;
  /// Per node name: colours, rows and marks from a debugging run (profile, statistics,
  /// first non-finite node). Names not in the graph are ignored.
  std::map<std::string, NodeOverlay> overlay;
  /// A title drawn above the graph; none when "".
  std::string title;
  /// The most graph nodes `render` lays out (SVG, PNG, PDF): Graphviz's layout grows faster
  /// than the node count, and a graph of 100,000 nodes would not finish. Above it, render
  /// throws tdfx::Error naming the count; raise it here or with `tdfx render --max-nodes N`.
  /// DOT text has no limit. The module view counts modules, and lays out
  /// kModuleNodesPerNode times as many (its nodes are cheaper: 10,000 modules take seconds).
  size_t max_nodes = kDefaultMaxNodes;
};

/// The DOT text of `graph` in `options.view`: pure and deterministic (the same graph and
/// options give the same bytes), needs no Graphviz. In the op view each written key is a
/// row of the node that produces it; above `kMaxOutputEdges` outputs the output node gets
/// no edge per output, since that fan-in is what makes `dot` take minutes on long
/// pipelines. The module view reads `options.modules` and `options.output_keys` only.
std::string to_dot(const Graph& graph, const RenderOptions& options = {});

/// The module view's DOT text, from `options.modules` and `options.output_keys` alone (a
/// pipeline need not be traced to be drawn so): deterministic, like to_dot.
std::string module_view_dot(const RenderOptions& options);

/// Above this many outputs, the output node lists its keys instead of
/// receiving one edge per output.
inline constexpr size_t kMaxOutputEdges = 16;

/// The drawing of `graph` in `format`, as bytes. kDot gives `to_dot`'s text;
/// the others are laid out by Graphviz's `dot` in this process; kHtml gives
/// `page_html(graph, options)` (viz/page.h) around the SVG. Safe to call
/// from several threads (Graphviz itself runs one call at a time). Throws
/// tdfx::Error when the drawing is over its budget (not for kDot): the op view's graph
/// has more than `options.max_nodes` nodes, or the module view more than
/// kModuleNodesPerNode times as many modules; and when Graphviz reports an error, with
/// Graphviz's message.
std::string render(const Graph& graph, Format format, const RenderOptions& options = {});

/// DOT text (from `to_dot` or elsewhere) laid out by `dot` and rendered in
/// `format`; kDot returns it as is; kHtml, which needs the graph, is a
/// tdfx::Error. Throws tdfx::Error with Graphviz's
/// message when Graphviz reports an error, even one it recovers from (a label
/// it cannot parse, which it would draw as the node's ID instead).
std::string render_dot(const std::string& dot, Format format);

/// The format named by `path`'s extension (.svg .png .pdf .dot .gv .html .htm, any
/// case); throws tdfx::Error naming the path and the accepted extensions.
Format format_from_extension(const std::string& path);

/// Renders `graph` to `path` in the format of its extension (`pipeline.html`:
/// the interactive page). Atomic: the
/// bytes go to a temporary file in the same directory, renamed over `path`;
/// on any failure no file is left behind. The file's mode is 0666 less the
/// umask. Throws tdfx::Error naming the path.
void write(const Graph& graph, const std::string& path, const RenderOptions& options = {});

}  // namespace tdfx
