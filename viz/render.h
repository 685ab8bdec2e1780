#pragma once

/// \file
/// Drawing a graph: its DOT text, and SVG/PNG/PDF rendered in process with
/// Graphviz (cgraph + gvc, the `dot` layout), as torch.fx's FxGraphDrawer
/// does, plus what a TensorDict pipeline needs to be debugged from a picture:
/// the key each getitem reads, the key each output is written to, and one box
/// per TensorDictModule.
///
///     RenderOptions options;
///     options.output_keys = {"hidden", "out"};
///     write(graph, "pipeline.svg", options);     // or .png, .pdf, .dot

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/nested_key.h"
#include "graph/graph.h"

namespace tdfx {

/// An output format of `render`. kHtml is the interactive page (viz/page.h): one
/// self-contained file with the SVG, pan and zoom, search and a panel per node.
enum class Format { kSvg, kPng, kPdf, kDot, kHtml };

/// A TensorDictModule of the traced pipeline, drawn as one labelled box
/// around the nodes its call produced (those with `NodeMeta::td_module == path`).
/// A box whose path extends another's (`0.module.1` in `0`) is drawn inside it.
struct ModuleBox {
  /// Its path in the module tree ("0", "0.module.1").
  std::string path;
  /// What it is, shown under the path (`TensorDictModule(Linear)`); may be "".
  std::string label;
  /// The keys it reads.
  std::vector<NestedKey> in_keys;
  /// The keys it writes.
  std::vector<NestedKey> out_keys;
};

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

/// What to draw beyond the graph itself. Everything is plain data, so that a
/// caller without a tracer (a test, a tool) can supply it.
struct RenderOptions {
  /// Show each call_module's parameters (name, dtype, shape) in its node.
  bool show_parameters = true;
  /// The TensorDictModule boxes; matched against `NodeMeta::td_module`.
  std::vector<ModuleBox> modules;
  /// The key each element of the output tuple is written to, in order.
  std::vector<NestedKey> output_keys;
  /// call_module target → its configuration,
  /// `Linear(in_features=100, out_features=50, bias=true)`.
  std::map<std::string, std::string> module_descriptions;
  /// call_module target → its parameters, `[("weight", f32[50, 100]), ...]`.
  std::map<std::string, std::vector<std::pair<std::string, TensorMeta>>> module_parameters;
  /// Per node name: colours, rows and marks from a debugging run (profile, statistics,
  /// first non-finite node). Names not in the graph are ignored.
  std::map<std::string, NodeOverlay> overlay;
  /// A title drawn above the graph; none when "".
  std::string title;
  /// The most graph nodes `render` lays out (SVG, PNG, PDF): Graphviz's layout grows faster
  /// than the node count, and a graph of 100,000 nodes would not finish. Above it, render
  /// throws tdfx::Error naming the count; raise it here or with `tdfx render --max-nodes N`.
  /// DOT text has no limit.
  size_t max_nodes = kDefaultMaxNodes;
};

/// The DOT text of `graph`: pure and deterministic (the same graph and
/// options give the same bytes), needs no Graphviz. Written keys are notes
/// beside the nodes that produce them; above `kMaxOutputEdges` outputs the
/// output node gets no edge per output, since that fan-in is what makes
/// `dot` take minutes on long pipelines.
std::string to_dot(const Graph& graph, const RenderOptions& options = {});

/// Above this many outputs, the output node lists its keys instead of
/// receiving one edge per output.
inline constexpr size_t kMaxOutputEdges = 16;

/// The drawing of `graph` in `format`, as bytes. kDot gives `to_dot`'s text;
/// the others are laid out by Graphviz's `dot` in this process; kHtml gives
/// `page_html(graph, options)` (viz/page.h) around the SVG. Safe to call
/// from several threads (Graphviz itself runs one call at a time). Throws
/// tdfx::Error when the graph has more than `options.max_nodes` nodes (not for
/// kDot) and when Graphviz reports an error, with Graphviz's message.
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
