#pragma once

/// \file
/// The interactive page: one self-contained HTML file (no network, no external script, style
/// or font) holding the drawings of a graph with pan and zoom, a search box over node names and
/// keys that highlights and centres the matches, and a panel that shows a clicked node's op,
/// target, args, kwargs, dtype and shape, users, module path and line of printed code (the
/// same in a tooltip on hover).
///
///     save_diagram(graph, "pipeline.html", options);          // through viz/render.h
///     tdfx render model.pt2 -o pipeline.html
///
/// The page's data is a list of views, each a drawing (SVG) and the data of the elements in it,
/// matched to the SVG by their Graphviz IDs: the DOT ID Graphviz writes as each `<g>`'s
/// `<title>` (`node:relu`, `key:0`, `cluster_0`). A second drawing of the same graph (the
/// module view) is a second view; the page shows a switch when there is more than one.
///
/// Expanding one module in place while the others stay collapsed (as Google's Model Explorer
/// does) is the pipeline view's (pipeline_view, PageTree): the page lays it out itself, one
/// level of the module tree at a time. Graphviz views can also come expanded: a view names the
/// module paths it draws expanded (`PageView::expanded`) and its base view (`PageView::base`),
/// and the page offers "expand" on an element when it holds a view of the same base with that
/// module added to the current view's expanded set (see `expansionOf` in page.js); tdfx writes
/// no such views today.
///
/// Every text reaches the page as JSON data inside `<script type="application/json">`, with
/// `<`, `>` and `&` written as `\u003c`, `\u003e`, `\u0026`, and is put on screen as text
/// (`textContent`), never as markup: a key `</script><script>...` shows as those characters.

#include <optional>
#include <string>
#include <vector>

#include "tdfx/graph/graph.h"
#include "tdfx/viz/render.h"

namespace tdfx {

/// One row of an element's panel and tooltip: `op: call_function`.
struct PageField {
  /// The row's label (`op`).
  std::string label;
  /// The row's text (`call_function`).
  std::string text;
  /// When not empty, the elements the row refers to (`users`: their IDs); the page shows each
  /// as a link that selects it, and `text` is not shown.
  std::vector<std::string> refs;
};

/// One element of a drawing that the page can select: a graph node, or
/// a module box.
struct PageItem {
  /// Its Graphviz ID, the text of its `<g>`'s `<title>` in the SVG (`node:relu`).
  std::string id;
  /// The panel's heading (`%relu`).
  std::string title;
  /// What it is (`call_function`, `key`, `module`); also a CSS class of its `<g>`.
  std::string kind;
  /// The module path it stands for when it can be expanded into its contents; "" otherwise.
  std::string module;
  /// The rows of its panel and tooltip.
  std::vector<PageField> fields;
  /// Texts the search box matches besides the title: names and keys (the node's name and
  /// target, the keys it reads or writes, its module path), not descriptions.
  std::vector<std::string> search;
};

/// A TensorDictModule or nested sequential of a view the page lays out itself (PageView::tree).
struct PageTreeModule {
  /// Its path (`ModuleBox::path`); its item is `box:PATH`.
  std::string path;
  /// The enclosing sequential's path, "" at the top level.
  std::string parent;
  /// What its box shows under the path: the module's type (`Linear`, `TensorDictSequential`).
  std::string type;
  /// True for a sequential, whose box holds its children; false for a TensorDictModule, whose box
  /// holds its nodes.
  bool sequential = false;
  /// The keys it reads, shown along its box's top border.
  std::vector<std::string> in_keys;
  /// The keys it writes, shown along its box's bottom border.
  std::vector<std::string> out_keys;
  /// From RenderOptions::module_overlay: its fill ("" for its style's) and its red ring.
  std::string fill;
  /// Ringed in red (RenderOptions::module_overlay).
  bool marked = false;
};

/// A graph node of a view the page lays out itself.
struct PageTreeNode {
  /// Its item's ID (`node:relu`).
  std::string id;
  /// What its box shows: `%relu`, then `relu f32[16, 64]`.
  std::string title;
  /// The box's second line: the node's target or op, and its type (`relu f32[16, 64]`).
  std::string detail;
  /// The innermost TensorDictModule it belongs to (`NodeMeta::td_module`), "" for none.
  std::string module;
  /// The IDs of the nodes it reads, in argument order, once each.
  std::vector<std::string> inputs;
  /// From RenderOptions::overlay: its fill ("" for its style's) and its red ring.
  std::string fill;
  /// Ringed in red (RenderOptions::overlay).
  bool marked = false;
};

/// The module tree and nodes of a view the page lays out itself: each module one box until
/// expanded, the nodes of a TensorDictModule inside its box once expanded. Only what is
/// shown is laid out, so the cost of a layout follows what is open, not the whole graph.
struct PageTree {
  /// Pre-order: each sequential before its children.
  std::vector<PageTreeModule> modules;
  /// In graph order.
  std::vector<PageTreeNode> nodes;
  /// The module paths open when the page opens (all of them for a small graph, none for a
  /// large one).
  std::vector<std::string> open;
};

/// One drawing in the page.
struct PageView {
  /// Its name in the page and in its URL (`#view=ops`): `ops`, `modules`.
  std::string name;
  /// What the switch shows (`Ops`).
  std::string label;
  /// The drawing, as `render(..., Format::kSvg, ...)` gives it.
  std::string svg;
  /// The elements of the drawing the page can select, each matched to the SVG by its Graphviz ID.
  std::vector<PageItem> items;
  /// The view this one expands (its `name`), "" for a view of its own.
  std::string base;
  /// The module paths drawn expanded, relative to `base`.
  std::vector<std::string> expanded;
  /// Set for a view the page lays out itself (`svg` is then empty).
  std::optional<PageTree> tree;
};

/// From this many graph nodes on, the page opens on the pipeline view with every module
/// collapsed, and leaves the op view out: fitted to a window, a drawing of more nodes is too
/// small to read, and its layout and size grow faster than the graph (`tdfx render -o x.svg`
/// still draws it whole).
inline constexpr size_t kPageCollapseFrom = 200;

/// The op view of `graph`: its drawing by `render(graph, Format::kSvg, options)` and one item
/// per node (with the keys it writes) and per module box. Throws what `render` throws (a
/// graph over `options.max_nodes`, a Graphviz error).
PageView op_view(const Graph& graph, const RenderOptions& options = {});

/// The module view of `graph`: its drawing with `options.view` set to modules, and one item
/// per TensorDictModule node (`module:PATH`): its path, type, configuration, keys and
/// parameter counts; searchable by path and keys. Throws what `render` throws.
PageView module_view(const Graph& graph, const RenderOptions& options = {});

/// The pipeline view of `graph`: laid out by the page itself (PageTree), every
/// TensorDictModule and sequential of `options.modules` a box (`box:PATH`) with its keys on its
/// border, expanded in place to its nodes or children; the items of the op view's nodes and one
/// per module. Modules start open when the graph has fewer than kPageCollapseFrom nodes.
PageView pipeline_view(const Graph& graph, const RenderOptions& options = {});

/// The page's data as JSON text that can sit inside a `<script>` element: no `<`, `>` or `&`
/// (written as `\u` escapes); bytes that are not UTF-8 become U+FFFD.
///
///     {"title": "...", "views": [{"name": "ops", "label": "Ops", "svg": "<svg...",
///       "base": "", "expanded": [], "items": [{"id": "node:relu", "title": "%relu",
///       "kind": "call_function", "module": "", "search": [...],
///       "fields": [{"label": "op", "text": "call_function", "refs": []}, ...]}]}],
///      "layers": [{"name": "statistics", "legend": "...", "nodes": {"relu": {"fill": "#fde0dd",
///       "lines": ["min 0 max 2.1"], "marked": false}}, "modules": {...}}]}
/// A layer with timelines (a training run's, diagram/overlay.h training_layer) adds
/// `"timelines": [{"label": "loss", "steps": [0, 20], "series": [{"name": "loss", "values":
/// [1.5, null]}]}]`, `"module_timelines": {"module.0": [...]}` and `"marked_step": 120`, a value
/// that is not finite as null.
/// The page shows a switch for the layers (RenderOptions::layers) when there are any: the one
/// on fills the nodes and modules it colours, adds its rows to their panel and tooltip, rings
/// its marked ones and shows its legend; a module's timelines are charts in its panel, the
/// layer's own in the panel when nothing is selected, each marking `marked_step`.
std::string page_data(const std::vector<PageView>& views, const std::string& title,
                      const std::vector<OverlayLayer>& layers = {});

/// The whole page around `page_data(views, title)`, with its stylesheet and script inline.
/// Deterministic: the same views give the same bytes.
std::string page_html(const std::vector<PageView>& views, const std::string& title,
                      const std::vector<OverlayLayer>& layers = {});

/// The page of `graph` with every view tdfx draws of it — the op view, and the module view
/// when `options.modules` lists TensorDictModules — titled by `options.title`; what
/// `save_diagram(graph, "x.html", options)` writes. It opens on `options.view`; the other view
/// is left out when it is over its budget (`budget_refusal`, viz/render.h). The first view
/// over its budget is a tdfx::Error with that message (the op view is first when there are
/// no modules to show, whatever `options.view` says). A graph of kPageCollapseFrom nodes or
/// more with modules to show gets the pipeline view first, collapsed, then the module view
/// when it fits its budget, and no op view.
std::string page_html(const Graph& graph, const RenderOptions& options = {});

}  // namespace tdfx
