// render / save_diagram: DOT text laid out and rendered by Graphviz, in a helper process per
// drawing (see below).

#include "tdfx/viz/render.h"

#include <algorithm>
#include <cctype>
#include <chrono>

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
constexpr std::chrono::seconds kDrawingTimeout{600};
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

std::string render(const Graph& graph, Format format, const RenderOptions& options) {
  // Compared by division: kModuleNodesPerNode * max_nodes overflows for a huge max_nodes.
  if (format != Format::kDot && options.view == View::kModules &&
      (options.modules.size() + kModuleNodesPerNode - 1) / kModuleNodesPerNode >
          options.max_nodes) {
    fail(
        "viz: the pipeline has {} modules, more than the {} a module view may have ({} times "
        "RenderOptions::max_nodes); raise max_nodes (tdfx render --max-nodes N) to draw it "
        "anyway, or write .dot text, which has no limit",
        options.modules.size(), kModuleNodesPerNode * options.max_nodes, kModuleNodesPerNode);
  }
  if (format != Format::kDot && options.view == View::kOps && graph.size() > options.max_nodes) {
    fail(
        "viz: the graph has {} nodes, more than the {} a drawing may have; raise "
        "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, or write "
        ".dot text, which has no limit",
        graph.size(), options.max_nodes);
  }
  if (format == Format::kHtml) return page_html(graph, options);
  return render_dot(to_dot(graph, options), format);
}

std::string render_dot(const std::string& dot, Format format) {
  if (format == Format::kDot) return dot;
  if (format == Format::kHtml) {
    fail("viz: a page shows a graph's nodes, not DOT text: call render(graph, Format::kHtml)");
  }
  return detail::run_helper("viz: Graphviz", detail::graphviz_helper_path(),
                            {graphviz_format(format), kDrawingMemoryMb}, dot, kDrawingTimeout);
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
