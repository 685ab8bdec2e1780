// render / save_diagram: DOT text laid out and rendered by Graphviz, in a helper process per
// drawing (see below).

#include "tdfx/viz/render.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/core/file_io.h"
#include "tdfx/viz/helper_process.h"
#include "tdfx/viz/page.h"

namespace tdfx {
namespace {

// Graphviz lays out and renders each drawing in a process of its own: tdfx-graphviz
// (viz/graphviz_helper.cpp, which says why), started by posix_spawn and never forked from the
// caller, so that none of the caller's threads, locks or sanitizer state is copied into a
// process that runs Pango.
// The helper's address-space budget (RLIMIT_AS), in MB: a 10,000-module view takes ~30 MB
// of graph and a few hundred MB of Pango and cairo.
constexpr const char* kDrawingMemoryMb = "4096";

const char* graphviz_format(Format format) {
  switch (format) {
    case Format::kPng:
      return "png";
    case Format::kPdf:
      return "pdf";
    default:
      return "svg";
  }
}

}  // namespace

namespace {

// The deepest nesting of the boxes: each box's depth is one more than its nearest enclosing
// sequential's (its path's longest prefix, by components, that is one).
size_t nesting_depth(const std::vector<ModuleBox>& boxes) {
  std::unordered_map<std::string_view, size_t> sequential_depth;
  size_t deepest = 0;
  for (const ModuleBox& box : boxes) {  // a sequential before its children
    size_t depth = 1;
    std::string_view path = box.path;
    for (size_t dot = path.rfind('.'); dot != std::string_view::npos;
         dot = path.rfind('.', dot - 1)) {
      auto parent = sequential_depth.find(path.substr(0, dot));
      if (parent != sequential_depth.end()) {
        depth = parent->second + 1;
        break;
      }
      if (dot == 0) break;
    }
    if (box.sequential) sequential_depth.emplace(box.path, depth);
    deepest = std::max(deepest, depth);
  }
  return deepest;
}

std::string over_budget(const std::string& what, size_t count, size_t limit,
                        const std::string& unit) {
  return fmt::format(
      "viz: the {} has {} {}, more than the {} a drawing may have; raise "
      "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, or write .dot "
      "text, which has no limit",
      what, count, unit, limit);
}

}  // namespace

std::string budget_refusal(const Graph& graph, const RenderOptions& options, View view) {
  const size_t n = options.max_nodes;
  // More than `limit` times `per`; a huge max_nodes must not overflow the product.
  auto over = [](size_t count, size_t limit, size_t per) {
    return limit <= SIZE_MAX / per && count > limit * per;
  };
  const size_t depth = nesting_depth(options.modules);
  if (depth > kMaxNesting) {
    return fmt::format(
        "viz: the pipeline's module boxes nest {} deep, more than the {} levels a drawing may "
        "have; write .dot text, which has no limit",
        depth, kMaxNesting);
  }
  // Both views draw every box: a TensorDictModule's (a node of the module view, a cluster of
  // the op view) and a sequential's (a cluster of both).
  size_t modules = 0, sequentials = 0, cells = 0;
  for (const ModuleBox& box : options.modules) {
    if (box.sequential) {
      ++sequentials;
      continue;
    }
    ++modules;
    cells += box.in_keys.size() + box.out_keys.size();
  }
  if (modules > n) return over_budget("pipeline", modules, n, "modules");
  if (sequentials > n) return over_budget("pipeline", sequentials, n, "sequentials");
  if (view == View::kModules) {
    if (over(cells, n, kKeyCellsPerNode)) {
      return over_budget("module view", cells, n * kKeyCellsPerNode, "key cells (in and out keys)");
    }
    return "";
  }
  if (graph.size() > n) return over_budget("graph", graph.size(), n, "nodes");
  size_t edges = 0;
  for (const Node* node : graph.nodes()) edges += node->input_nodes().size();
  if (over(edges, n, kEdgesPerNode)) return over_budget("graph", edges, n * kEdgesPerNode, "edges");
  return "";
}

std::string render(const Graph& graph, Format format, const RenderOptions& options) {
  if (format == Format::kHtml) return page_html(graph, options);  // it checks its views
  if (format != Format::kDot) {
    const std::string refusal = budget_refusal(graph, options, options.view);
    if (!refusal.empty()) fail("{}", refusal);
  }
  return render_dot(to_dot(graph, options), format, options.time_budget);
}

std::string render_dot(const std::string& dot, Format format, double time_budget) {
  if (format == Format::kDot) return dot;
  if (format == Format::kHtml) {
    fail("viz: a page shows a graph's nodes, not DOT text: call render(graph, Format::kHtml)");
  }
  return detail::run_helper(
      "viz: Graphviz", detail::graphviz_helper_path(), {graphviz_format(format), kDrawingMemoryMb},
      dot, std::chrono::seconds(static_cast<int64_t>(std::ceil(std::clamp(time_budget, 1.0, 1e7)))),
      "the drawing's time budget (RenderOptions::time_budget, tdfx render "
      "--time-budget)");
}

Format format_from_extension(const std::string& path) {
  const auto dot = path.rfind('.');
  const auto slash = path.rfind('/');
  std::string ext;
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) {
    ext = path.substr(dot + 1);
  }
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == "svg") return Format::kSvg;
  if (ext == "png") return Format::kPng;
  if (ext == "pdf") return Format::kPdf;
  if (ext == "dot" || ext == "gv") return Format::kDot;
  if (ext == "html" || ext == "htm") return Format::kHtml;
  fail(
      "cannot draw a graph to '{}': unknown extension; expected one of .svg, .png, .pdf, .dot, "
      ".gv, .html",
      path);
}

void save_diagram(const Graph& graph, const std::string& path, const RenderOptions& options) {
  const Format format = format_from_extension(path);
  write_file_atomically(path, render(graph, format, options));
}

}  // namespace tdfx
