#pragma once

/// \file
/// Drawing a graph: its DOT text, and SVG/PNG/PDF rendered with Graphviz's library
/// (cgraph + gvc, the `dot` layout) in a child process per drawing, as torch.fx's FxGraphDrawer
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
///     save_diagram(graph, "pipeline.svg", options);   // or .png, .pdf, .dot, .html
///     options.view = View::kModules;
///     save_diagram(graph, "modules.svg", options);
///
/// Graphviz IDs (the `<title>` of each SVG group) say what was drawn: `node:NAME` for a
/// graph node, `module:PATH` for a module of the module view, `input:N` / `output:N` for
/// the N-th pipeline input / output key of the module view.

#include <string>

#include "tdfx/graph/graph.h"
#include "tdfx/viz/dot_writer.h"
#include "tdfx/viz/module_view.h"
#include "tdfx/viz/render_options.h"

namespace tdfx {

/// An output format of `render`. kHtml is the interactive page (viz/page.h): one
/// self-contained file with the SVG, pan and zoom, search and a panel per node.
enum class Format { kSvg, kPng, kPdf, kDot, kHtml };

/// The drawing of `graph` in `format`, as bytes. kDot gives `to_dot`'s text;
/// the others are laid out by Graphviz's `dot` in tdfx's helper program, tdfx-graphviz, one
/// process per drawing (viz/graphviz_helper.cpp says why; viz/helper_process.h how it is
/// found); a helper that cannot be found, crashes or runs past 600 s is a tdfx::Error;
/// kHtml gives `page_html(graph, options)` (viz/page.h) around the SVG. Safe to call
/// from several threads, which draw at once. Throws
/// tdfx::Error, before any layout, when the view `options.view` is over its budget (not for
/// kDot; `budget_refusal` gives the message; a page checks the view it opens on, and leaves
/// out its second view when that one is over); and when Graphviz reports an error, with
/// Graphviz's message.
std::string render(const Graph& graph, Format format, const RenderOptions& options = {});

/// Why `render` would refuse to lay out `view` of `graph`, or "" when it fits: the module
/// boxes nest deeper than kMaxNesting; either view has more than `options.max_nodes`
/// TensorDictModules or as many sequentials (each a box of both views); the op view has more
/// than `options.max_nodes` nodes or kEdgesPerNode times as many edges; the module view more
/// than kKeyCellsPerNode times as many key cells. Linear in the graph and the modules.
std::string budget_refusal(const Graph& graph, const RenderOptions& options, View view);

/// DOT text (from `to_dot` or elsewhere) laid out by `dot` and rendered in
/// `format`; kDot returns it as is; kHtml, which needs the graph, is a
/// tdfx::Error. Throws tdfx::Error with Graphviz's
/// message when Graphviz reports an error, even one it recovers from (a label
/// it cannot parse, which it would draw as the node's ID instead).
/// Graphviz is stopped after `time_budget` seconds (RenderOptions::time_budget), a tdfx::Error.
std::string render_dot(const std::string& dot, Format format,
                       double time_budget = kDefaultDrawingSeconds);

/// The format named by `path`'s extension (.svg .png .pdf .dot .gv .html .htm, any
/// case); throws tdfx::Error naming the path and the accepted extensions.
Format format_from_extension(const std::string& path);

/// Saves the drawing of `graph` to `path`, in the format of its extension (`pipeline.html`:
/// the interactive page). Atomic: the bytes go to a temporary file in the same directory,
/// renamed over `path`; on any failure no file is left behind. The file's mode is 0666 less
/// the umask. FileError when the file cannot be written; tdfx::Error when the drawing
/// cannot be made (see render).

void save_diagram(const Graph& graph, const std::string& path, const RenderOptions& options = {});

}  // namespace tdfx
