// The interactive page: the data of each view as JSON, and the HTML around it. The page's
// script and stylesheet are viz/page.js and viz/page.css, embedded at build time
// (viz/embed_assets.cmake).

#include "tdfx/viz/page.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "page_assets.inc"
#include "tdfx/codegen/python_code.h"
#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/graph_printer.h"
#include "tdfx/viz/html.h"
#include "tdfx/viz/module_view.h"
#include "tdfx/viz/render.h"

namespace tdfx {
namespace {

using Json = nlohmann::ordered_json;

// The Graphviz IDs dot_writer.cpp gives what it draws: `node:NAME` for a node (a key it writes
// is a row of it), `cluster_N` for the box of the N-th ModuleBox.
std::string node_item_id(const Node& node) { return "node:" + node.name(); }
std::string box_item_id(size_t index) { return fmt::format("cluster_{}", index); }

PageItem make_item(std::string id, std::string title, std::string kind) {
  PageItem item;
  item.id = std::move(id);
  item.title = std::move(title);
  item.kind = std::move(kind);
  return item;
}

/// `[s0, 10]`: the shape as readable code prints it, a dimension that follows the batch as
/// s0 (or the function of it that it is, `s0*2`).
std::string shape_str(const TensorMeta& meta) {
  std::string out = "[";
  for (size_t i = 0; i < meta.shape->size(); ++i) out += (i ? ", " : "") + meta.dim_str(i);
  return out + "]";
}

/// Builds the items of the op view; holds what several nodes look up.
class OpItems {
 public:
  OpItems(const Graph& graph, const RenderOptions& options)
      : graph_(graph), options_(options), lines_(node_lines(graph)) {
    collect_outputs();
    for (const Node* node : graph_.nodes()) {
      if (!node->meta().td_module.empty()) in_box_[node->meta().td_module].push_back(node);
    }
  }

  std::vector<PageItem> run() {
    std::vector<PageItem> items;
    size_t index = 0;
    for (const Node* node : graph_.nodes()) items.push_back(node_item(*node, lines_[index++]));
    for (size_t b = 0; b < options_.modules.size(); ++b) items.push_back(box_item(b));
    return items;
  }

 private:
  /// The output elements, and for each node the keys it is written to.
  void collect_outputs() {
    for (Node* node : output_values(graph_)) outputs_.push_back(node);
    for (size_t i = 0; i < outputs_.size() && i < options_.output_keys.size(); ++i) {
      if (outputs_[i]) written_[outputs_[i]].push_back(options_.output_keys[i]);
    }
  }

  PageItem node_item(const Node& node, const std::string& line) const {
    PageItem item =
        make_item(node_item_id(node), "%" + node.name(), std::string(to_string(node.op())));
    item.search.push_back(node.name());
    auto add = [&item](std::string label, std::string text, bool searched = false) {
      if (searched) item.search.push_back(text);
      item.fields.push_back({std::move(label), std::move(text), {}});
    };
    add("op", std::string(to_string(node.op())));
    Args args = node.args();
    Kwargs kwargs = node.kwargs();
    if (node.op() == OpCode::kCallFunction) {
      try {
        FxCall call = fx_call(node);
        add("target", call.target, true);
        args = std::move(call.args);
        kwargs = std::move(call.kwargs);
      } catch (const Error&) {
        add("target", node.target().str(), true);
      }
    } else if (node.op() != OpCode::kOutput) {
      add("target", node.target().str(), true);
    }
    if (node.target().is_getitem() && args.size() == 2 && args[1].is<NestedKey>()) {
      add("reads key", args[1].as<NestedKey>().repr(), true);
    }
    // A placeholder's and a get_attr's are always empty.
    if (node.op() != OpCode::kPlaceholder && node.op() != OpCode::kGetAttr) {
      add("args", fx_str(Argument(ArgumentList{args, true})));
      add("kwargs", fx_kwargs_str(kwargs));
    }
    if (node.op() == OpCode::kCallModule) module_fields(node, item);
    const TensorMeta& meta = node.meta().tensor;
    if (meta.dtype) add("dtype", dtype_repr(*meta.dtype));
    if (meta.shape) add("shape", shape_str(meta));
    if (meta.device && !meta.device->is_cpu()) add("device", meta.device->str());
    auto written = written_.find(&node);
    if (written != written_.end()) add("writes", repr(written->second), true);
    PageField users{"users", node.users().empty() ? "none" : "", {}};
    for (const Node* user : node.users()) users.refs.push_back(node_item_id(*user));
    item.fields.push_back(std::move(users));
    if (!node.meta().module_path.empty()) {
      item.search.push_back(node.meta().module_path);
      std::string module = node.meta().module_path;
      if (!node.meta().module_type.empty()) module += " (" + node.meta().module_type + ")";
      add("module", module);
    }
    if (!node.meta().td_module.empty()) add("TensorDictModule", node.meta().td_module, true);
    add("code", line);
    overlay_fields(node, item);
    return item;
  }

  void module_fields(const Node& node, PageItem& item) const {
    const std::string& target = node.target().str();
    auto desc = options_.module_descriptions.find(target);
    const std::string& text =
        desc != options_.module_descriptions.end() ? desc->second : node.meta().module_type;
    if (!text.empty()) item.fields.push_back({"description", text, {}});
    auto params = options_.module_parameters.find(target);
    if (params == options_.module_parameters.end()) return;
    for (const auto& [name, meta] : params->second) {
      std::string value = meta.dtype ? dtype_repr(*meta.dtype) : "";
      if (meta.shape) value += (value.empty() ? "" : " ") + shape_str(meta);
      item.fields.push_back({"parameter " + name, value, {}});
    }
  }

  void overlay_fields(const Node& node, PageItem& item) const {
    auto overlay = options_.overlay.find(node.name());
    if (overlay == options_.overlay.end()) return;
    const std::string& label = options_.overlay_label;
    for (const std::string& line : overlay->second.lines) item.fields.push_back({label, line, {}});
    if (overlay->second.marked) item.fields.push_back({label, "non-finite values start here", {}});
  }

  PageItem box_item(size_t index) const {
    const ModuleBox& box = options_.modules[index];
    PageItem item = make_item(box_item_id(index), box.path, "module");
    item.module = box.path;
    item.search.push_back(box.path);
    item.fields.push_back({"module path", box.path, {}});
    if (!box.label.empty()) item.fields.push_back({"module", box.label, {}});
    for (const NestedKey& key : box.in_keys) item.search.push_back(key.repr());
    for (const NestedKey& key : box.out_keys) item.search.push_back(key.repr());
    item.fields.push_back({"in keys", repr(box.in_keys), {}});
    item.fields.push_back({"out keys", repr(box.out_keys), {}});
    PageField nodes{"nodes", "none", {}};
    auto members = in_box_.find(box.path);
    if (members != in_box_.end()) {
      nodes.text.clear();
      for (const Node* node : members->second) nodes.refs.push_back(node_item_id(*node));
    }
    item.fields.push_back(std::move(nodes));
    return item;
  }

  const Graph& graph_;
  const RenderOptions& options_;
  std::vector<std::string> lines_;
  std::vector<const Node*> outputs_;
  std::unordered_map<const Node*, std::vector<NestedKey>> written_;
  /// The nodes of each TensorDictModule's box, by its path, in graph order.
  std::unordered_map<std::string, std::vector<const Node*>> in_box_;
};

/// The item of a module: its path, type, configuration, keys, parameter counts and the rows
/// of its overlay; searchable by path and keys.
PageItem module_item(const ModuleBox& box, const RenderOptions& options, std::string id) {
  PageItem item = make_item(std::move(id), box.path, "module");
  item.module = box.path;
  item.search.push_back(box.path);
  for (const NestedKey& key : box.in_keys) item.search.push_back(key.repr());
  for (const NestedKey& key : box.out_keys) item.search.push_back(key.repr());
  item.fields.push_back({"module path", box.path, {}});
  if (!box.type.empty()) item.fields.push_back({"type", box.type, {}});
  if (!box.label.empty()) item.fields.push_back({"module", box.label, {}});
  item.fields.push_back({"in keys", repr(box.in_keys), {}});
  item.fields.push_back({"out keys", repr(box.out_keys), {}});
  if (!box.sequential) item.fields.push_back({"parameters", std::to_string(box.parameters), {}});
  if (box.buffers) item.fields.push_back({"buffers", std::to_string(box.buffers), {}});
  auto overlay = options.module_overlay.find(box.path);
  if (overlay != options.module_overlay.end()) {
    for (const std::string& line : overlay->second.lines) {
      item.fields.push_back({options.overlay_label, line, {}});
    }
  }
  return item;
}

/// The enclosing sequential of a module: the longest of `sequentials` that its path starts
/// with, followed by a dot; "" when none.
std::string parent_of(const std::string& path, const std::unordered_set<std::string>& sequentials) {
  for (size_t dot = path.rfind('.'); dot != std::string::npos && dot > 0;
       dot = path.rfind('.', dot - 1)) {
    std::string prefix = path.substr(0, dot);
    if (sequentials.count(prefix)) return prefix;
  }
  return "";
}

/// What a node's box shows under its name: its target or op, and its type.
std::string node_detail(const Node& node) {
  std::string what;
  if (node.op() == OpCode::kCallFunction) {
    try {
      what = fx_call(node).target;
    } catch (const Error&) {
      what = node.target().str();
    }
  } else if (node.op() == OpCode::kCallModule || node.op() == OpCode::kCallMethod) {
    what = node.target().str();
  } else {
    what = std::string(to_string(node.op()));
  }
  const TensorMeta& meta = node.meta().tensor;
  if (meta.dtype && meta.shape) what += " " + dtype_short(*meta.dtype) + shape_str(meta);
  return what;
}

/// The SVG element and what follows it: the XML declaration, DOCTYPE and comment before it add
/// nothing inside a page.
std::string svg_element(const std::string& svg) {
  const auto start = svg.find("<svg");
  if (start == std::string::npos) throw InternalError("Graphviz's SVG has no <svg> element");
  return svg.substr(start);
}

Json to_json(const PageItem& item) {
  Json fields = Json::array();
  for (const PageField& field : item.fields) {
    fields.push_back({{"label", field.label}, {"text", field.text}, {"refs", field.refs}});
  }
  return {{"id", item.id},         {"title", item.title},   {"kind", item.kind},
          {"module", item.module}, {"search", item.search}, {"fields", std::move(fields)}};
}

Json to_json(const PageTree& tree) {
  Json modules = Json::array(), nodes = Json::array();
  for (const PageTreeModule& m : tree.modules) {
    modules.push_back({{"path", m.path},
                       {"parent", m.parent},
                       {"type", m.type},
                       {"sequential", m.sequential},
                       {"in_keys", m.in_keys},
                       {"out_keys", m.out_keys},
                       {"fill", m.fill},
                       {"marked", m.marked}});
  }
  for (const PageTreeNode& n : tree.nodes) {
    nodes.push_back({{"id", n.id},
                     {"title", n.title},
                     {"detail", n.detail},
                     {"module", n.module},
                     {"inputs", n.inputs},
                     {"fill", n.fill},
                     {"marked", n.marked}});
  }
  return {{"modules", std::move(modules)}, {"nodes", std::move(nodes)}, {"open", tree.open}};
}

// Timelines as `[{"label": ..., "steps": [...], "series": [{"name": ..., "values": [...]}]}]`,
// a value that is not finite as null (JSON has no NaN or Inf).
Json timelines(const std::vector<Timeline>& charts) {
  Json out = Json::array();
  for (const Timeline& chart : charts) {
    if (std::any_of(chart.series.begin(), chart.series.end(),
                    [&](const auto& s) { return s.second.size() != chart.steps.size(); })) {
      throw InternalError("timeline '" + chart.label + "': a series not one value per step");
    }
    Json series = Json::array();
    for (const auto& [name, values] : chart.series) {
      Json numbers = Json::array();
      for (const double v : values) numbers.push_back(std::isfinite(v) ? Json(v) : Json(nullptr));
      series.push_back({{"name", name}, {"values", std::move(numbers)}});
    }
    out.push_back({{"label", chart.label}, {"steps", chart.steps}, {"series", std::move(series)}});
  }
  return out;
}

Json to_json(const PageView& view) {
  Json items = Json::array();
  for (const PageItem& item : view.items) items.push_back(to_json(item));
  Json out{{"name", view.name}, {"label", view.label},       {"svg", view.svg},
           {"base", view.base}, {"expanded", view.expanded}, {"items", std::move(items)}};
  if (view.tree) out["tree"] = to_json(*view.tree);
  return out;
}

}  // namespace

PageView op_view(const Graph& graph, const RenderOptions& options) {
  RenderOptions ops = options;
  ops.view = View::kOps;
  PageView view;
  view.name = "ops";
  view.label = "Ops";
  view.svg = svg_element(render(graph, Format::kSvg, ops));
  view.items = OpItems(graph, options).run();
  return view;
}

PageView module_view(const Graph& graph, const RenderOptions& options) {
  RenderOptions modules = options;
  modules.view = View::kModules;
  PageView view;
  view.name = "modules";
  view.label = "Modules";
  view.svg = svg_element(render(graph, Format::kSvg, modules));
  for (const ModuleBox& box : options.modules) {
    if (box.sequential) continue;  // a box around its children, not a node of the drawing
    view.items.push_back(module_item(box, options, module_node_id(box.path)));
  }
  // The pipeline's keys at the borders, so that a search for a key finds them too.
  const ModuleViewBorder border = module_view_border(options);
  auto add_key = [&view](const std::string& id, const NestedKey& key, const char* role) {
    PageItem item = make_item(id, key.repr(), "key");
    item.search.push_back(key.repr());
    item.fields.push_back({role, key.repr(), {}});
    view.items.push_back(std::move(item));
  };
  for (size_t i = 0; i < border.inputs.size(); ++i) {
    add_key(fmt::format("input:{}", i), border.inputs[i], "pipeline input");
  }
  for (size_t i = 0; i < border.outputs.size(); ++i) {
    add_key(fmt::format("output:{}", i), border.outputs[i], "pipeline output");
  }
  return view;
}

PageView pipeline_view(const Graph& graph, const RenderOptions& options) {
  PageView view;
  view.name = "pipeline";
  view.label = "Pipeline";
  for (PageItem& item : OpItems(graph, options).run()) {
    if (item.kind != "module") view.items.push_back(std::move(item));  // the op view's boxes
  }
  PageTree tree;
  std::unordered_set<std::string> sequentials;
  for (const ModuleBox& box : options.modules) {
    if (box.sequential) sequentials.insert(box.path);
  }
  for (const ModuleBox& box : options.modules) {
    view.items.push_back(module_item(box, options, "box:" + box.path));
    PageTreeModule module{box.path,
                          parent_of(box.path, sequentials),
                          box.type.empty() ? box.label : box.type,
                          box.sequential,
                          {},
                          {},
                          "",
                          false};
    if (auto o = options.module_overlay.find(box.path); o != options.module_overlay.end()) {
      module.fill = o->second.fill;
      module.marked = o->second.marked;
    }
    for (const NestedKey& key : box.in_keys) module.in_keys.push_back(key.repr());
    for (const NestedKey& key : box.out_keys) module.out_keys.push_back(key.repr());
    tree.modules.push_back(std::move(module));
  }
  for (const Node* node : graph.nodes()) {
    PageTreeNode entry{node_item_id(*node),
                       "%" + node->name(),
                       node_detail(*node),
                       node->meta().td_module,
                       {},
                       "",
                       false};
    if (auto o = options.overlay.find(node->name()); o != options.overlay.end()) {
      entry.fill = o->second.fill;
      entry.marked = o->second.marked;
    }
    // A weight or input placeholder whose users all belong to one module is drawn in it.
    if (entry.module.empty() && node->op() == OpCode::kPlaceholder && !node->users().empty()) {
      std::string shared = (*node->users().begin())->meta().td_module;
      for (const Node* user : node->users()) {
        if (user->meta().td_module != shared) shared.clear();
      }
      entry.module = shared;
    }
    for (const Node* input : node->input_nodes()) {
      const std::string id = node_item_id(*input);
      if (std::find(entry.inputs.begin(), entry.inputs.end(), id) == entry.inputs.end()) {
        entry.inputs.push_back(id);
      }
    }
    tree.nodes.push_back(std::move(entry));
  }
  if (graph.size() < kPageCollapseFrom) {
    for (const ModuleBox& box : options.modules) tree.open.push_back(box.path);
  }
  view.tree = std::move(tree);
  return view;
}

std::string page_data(const std::vector<PageView>& views, const std::string& title,
                      const std::vector<OverlayLayer>& layers) {
  Json views_json = Json::array();
  for (const PageView& view : views) views_json.push_back(to_json(view));
  Json data{{"title", title}, {"views", std::move(views_json)}};
  if (!layers.empty()) {
    auto overlays = [](const std::map<std::string, NodeOverlay>& by_name) {
      Json out = Json::object();
      for (const auto& [name, o] : by_name) {
        out[name] = {{"fill", o.fill}, {"lines", o.lines}, {"marked", o.marked}};
      }
      return out;
    };
    Json layers_json = Json::array();
    for (const OverlayLayer& layer : layers) {
      Json entry{{"name", layer.name},
                 {"legend", layer.legend},
                 {"nodes", overlays(layer.nodes)},
                 {"modules", overlays(layer.modules)}};
      if (!layer.timelines.empty() || !layer.module_timelines.empty()) {
        Json by_module = Json::object();
        for (const auto& [path, charts] : layer.module_timelines)
          by_module[path] = timelines(charts);
        entry["timelines"] = timelines(layer.timelines);
        entry["module_timelines"] = std::move(by_module);
      }
      if (layer.marked_step) entry["marked_step"] = *layer.marked_step;
      layers_json.push_back(std::move(entry));
    }
    data["layers"] = std::move(layers_json);
  }
  const std::string text = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  // Outside strings JSON has none of these characters, so each one here is inside a string,
  // where its \u escape means the same; `</script>` then cannot end the element.
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string page_html(const std::vector<PageView>& views, const std::string& title,
                      const std::vector<OverlayLayer>& layers) {
  const std::string heading = escape_markup(title.empty() ? "tdfx graph" : title);
  std::string out = R"page(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="tdfx">
)page";
  out += "<title>" + heading + "</title>\n<style>\n";
  out += detail::kPageCss;
  out += R"page(</style>
</head>
<body>
<header id="bar">
<span id="heading"></span>
<span id="views" role="group" aria-label="Views"></span>
<input id="search" type="search" placeholder="Search names and keys" autocomplete="off" spellcheck="false" aria-label="Search names and keys">
<span id="count" aria-live="polite"></span>
<span id="layers" role="group" aria-label="Run data"></span>
<button id="fit" type="button" title="Fit the drawing (0)">Fit</button>
</header>
<main>
<nav id="outline" hidden></nav>
<div id="stage" tabindex="0"><div id="canvas"></div></div>
<aside id="panel" aria-live="polite"><p class="hint">Click a node to see it here; drag to pan, wheel to zoom.</p></aside>
</main>
<p id="legend" hidden></p>
<div id="tooltip" hidden></div>
<p id="error" hidden></p>
<script id="tdfx-data" type="application/json">)page";
  out += page_data(views, title, layers);
  out += "</script>\n<script>\n";
  out += detail::kPageJs;
  out += "</script>\n</body>\n</html>\n";
  return out;
}

std::string page_html(const Graph& graph, const RenderOptions& options) {
  const bool has_modules = std::any_of(options.modules.begin(), options.modules.end(),
                                       [](const ModuleBox& box) { return !box.sequential; });
  // The page opens on its first view: the one the options ask for. The other view comes
  // second when it fits its budget (`budget_refusal`): a graph over the op view's budget
  // gets a page with the module view alone, and the other way round.
  // The first view must fit (without modules to show, that is the op view, whatever the
  // options ask for).
  auto fits = [&](View view) { return budget_refusal(graph, options, view).empty(); };
  if (has_modules && graph.size() >= kPageCollapseFrom) {
    // The pipeline view holds every node's item, as the op view does: the same budget.
    if (const std::string refusal = budget_refusal(graph, options, View::kOps); !refusal.empty()) {
      fail("{}", refusal);
    }
    std::vector<PageView> views{pipeline_view(graph, options)};
    if (fits(View::kModules)) views.push_back(module_view(graph, options));
    return page_html(views, options.title, options.layers);
  }
  const View first = has_modules ? options.view : View::kOps;
  if (const std::string refusal = budget_refusal(graph, options, first); !refusal.empty()) {
    fail("{}", refusal);
  }
  std::vector<PageView> views;
  if (first == View::kModules) {
    views.push_back(module_view(graph, options));
    if (fits(View::kOps)) views.push_back(op_view(graph, options));
  } else {
    views.push_back(op_view(graph, options));
    if (has_modules && fits(View::kModules)) views.push_back(module_view(graph, options));
  }
  return page_html(views, options.title, options.layers);
}

}  // namespace tdfx
