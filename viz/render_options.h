#pragma once

/// \file
/// What a drawing shows beyond the graph itself: the view (ops or modules), the direction,
/// the TensorDictModule boxes, the output keys, module configurations and parameters, and a
/// debugging run's overlay. Plain data, so a caller without a tracer can fill it in.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tdfx/core/nested_key.h"
#include "tdfx/graph/node.h"
#include "tdfx/tensordict/module_box.h"

namespace tdfx {

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

///@{
/// "ops" / "modules"; and back, std::nullopt for anything else.
std::string_view to_string(View view);
std::optional<View> view_from_string(std::string_view text);
///@}

/// The Graphviz ID of a module of the module view (`module:0.module.1`), unquoted.
std::string module_node_id(const std::string& path);

/// What a debugging run adds to one node's drawing, or to one module's in the module view
/// (see diagram/overlay.h).
struct NodeOverlay {
  /// The node's fill colour (`#f4a582`); "" keeps its style's.
  std::string fill;
  /// Rows added to the node's label (`12.5 µs, 61.0%`, `min -1.2 max 3.4`).
  std::vector<std::string> lines;
  /// Drawn with a thick red border: the node where NaN or Inf started.
  bool marked = false;
};

/// A chart of values over training steps in the interactive page's panel: one or more
/// series over the same steps (`min`, `mean`, `max` of a key). A value that is not finite
/// (NaN or Inf) is drawn as a red mark at the chart's top.
struct Timeline {
  /// The chart's caption (`hidden`, `weight: gradient norm`).
  std::string label;
  /// The training steps charted, in order: the x axis.
  std::vector<int64_t> steps;
  /// Each series' name and its value at each of `steps` (as many as `steps`).
  std::vector<std::pair<std::string, std::vector<double>>> series;
};

/// One layer of a debugging run that the interactive page can switch on and off (forward
/// statistics, a profile, a training step's gradients, a training run): what it is called,
/// what its colours mean, and what it adds to each node and module.
struct OverlayLayer {
  /// Its name on the page's switch (`statistics`).
  std::string name;
  /// What its colours and marks mean, shown while it is on
  /// (`fill: share of the time, white (none) to red (the largest)`).
  std::string legend;
  /// Per node name, as RenderOptions::overlay.
  std::map<std::string, NodeOverlay> nodes;
  /// Per TensorDictModule path, as RenderOptions::module_overlay.
  std::map<std::string, NodeOverlay> modules;
  /// Charts over training steps per TensorDictModule path, shown in a module's panel while the
  /// layer is on; and the run's own (the loss), shown in the panel when nothing is selected.
  std::map<std::string, std::vector<Timeline>> module_timelines;
  /// The run's own charts (the loss), shown in the panel when nothing is selected.
  std::vector<Timeline> timelines;
  /// A step every chart marks with a red line (the first bad step of a training run).
  std::optional<int64_t> marked_step;
};

/// The default of RenderOptions::max_nodes: a drawing this size takes seconds, not minutes.
/// Measured on a 2-core machine (bench/bench_viz.cpp): the op view of the traced 1000-module
/// chain (4,002 nodes) in 1.6 s, of the 2499-module chain (9,998 nodes) in 6 s, its page in
/// 7.4 s; the module view of 10,000 modules in 9 s. Layout grows faster than the graph.
inline constexpr size_t kDefaultMaxNodes = 10000;

/// The default of RenderOptions::time_budget, in seconds.
inline constexpr double kDefaultDrawingSeconds = 60;

///@{
/// What else a drawing may hold, per unit of RenderOptions::max_nodes: the op view's edges
/// (one per node input), and the module view's key cells (one per in key and per out key of
/// each module, each an edge too). A 10,000-module chain has 20,000 key cells.
inline constexpr size_t kEdgesPerNode = 4;
inline constexpr size_t kKeyCellsPerNode = 3;
///@}
/// The deepest nesting of module boxes (sequentials in sequentials) a drawing may have:
/// Graphviz's clusters cost more with every level.
inline constexpr size_t kMaxNesting = 64;

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
  /// Per TensorDictModule path (`ModuleBox::path`): the same for the module view and its
  /// page items (diagram/overlay.h's flow_overlay). Paths not drawn are ignored.
  std::map<std::string, NodeOverlay> module_overlay;
  /// The interactive page only: layers of a debugging run the page switches between (its
  /// drawings are then best left without `overlay`, which they would show whatever is on).
  std::vector<OverlayLayer> layers;
  /// A title drawn above the graph; none when "".
  std::string title;
  /// What the page's panel calls the rows `overlay` and `module_overlay` add: `run` for a
  /// debugging run's reports, `diff` for a comparison's (diff_render_options).
  std::string overlay_label = "run";
  /// The most graph nodes `render` lays out (SVG, PNG, PDF, and the page's drawings):
  /// Graphviz's layout grows faster than the node count, and a graph of 100,000 nodes would
  /// not finish. It also bounds the TensorDictModules and the sequentials (boxes of both
  /// views), and with it go kEdgesPerNode edges and kKeyCellsPerNode key cells per node, and
  /// kMaxNesting levels of boxes (`budget_refusal`, viz/render.h). Past any of them,
  /// render throws tdfx::Error at once naming the count and the limit; raise max_nodes here
  /// or with `tdfx render --max-nodes N`. DOT text has no limit.
  size_t max_nodes = kDefaultMaxNodes;
  /// The most seconds Graphviz may take to lay out and render one drawing (each view of a
  /// page is one): past it, its process is stopped and render throws tdfx::Error saying so.
  /// Raise it here or with `tdfx render --time-budget S`.
  double time_budget = kDefaultDrawingSeconds;
};

}  // namespace tdfx
