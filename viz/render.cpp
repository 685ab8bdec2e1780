// render / save_diagram: DOT text laid out and rendered by Graphviz, in a child process per
// drawing (see below).

#include "tdfx/viz/render.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <graphviz/gvplugin.h>
#include <graphviz/types.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/core/file_io.h"
#include "tdfx/viz/forked.h"
#include "tdfx/viz/page.h"

// The plugins are linked in, not loaded from Debian's plugin config, so that
// rendering works even when that config is missing or stale.
extern "C" {
extern gvplugin_library_t gvplugin_dot_layout_LTX_library;
extern gvplugin_library_t gvplugin_core_LTX_library;
extern gvplugin_library_t gvplugin_pango_LTX_library;
extern gvplugin_library_t gvplugin_gd_LTX_library;
}

namespace tdfx {
namespace {

lt_symlist_t kPlugins[] = {
    {"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library},
    {"gvplugin_core_LTX_library", &gvplugin_core_LTX_library},
    {"gvplugin_pango_LTX_library", &gvplugin_pango_LTX_library},
    {"gvplugin_gd_LTX_library", &gvplugin_gd_LTX_library},
    {nullptr, nullptr},
};

// Graphviz runs in a forked copy of the process that exits after one drawing
// (detail::run_forked), never in the caller's process: not even once to load the fonts
// ahead, since Pango then starts threads of its own in the caller (fontconfig is loaded in
// one), and a lock such a thread holds at a fork would be held forever in the child. Graphviz 2.42
// keeps state across graphs in process globals, and it goes wrong: after a few dozen drawings of
// ordinary pipelines in one process, `dot` aborts (mincross.c: install_in_rank assertion) or
// segfaults, the same with Graphviz's own API and no tdfx code; every drawing leaks 0.6 to
// 1.7 MB; and layouts slow down. In a child each drawing starts from the same state, a crash
// in Graphviz is an Error rather than the end of the caller, its leaks go with the child, and
// threads draw at once, since no Graphviz state is shared. fork copies page tables only.

/// The child's one Graphviz context: neither cgraph's parser nor gvc's layout is
/// thread-safe, and the child runs one drawing.
struct Graphviz {
  GVC_t* gvc = nullptr;
  /// Graphviz's error messages of the current call.
  std::string errors;
};

Graphviz& graphviz();

int collect_error(char* message) {
  graphviz().errors += message;
  return 0;
}

Graphviz& graphviz() {
  // Created once, never freed: gvFreeContext at exit would race other static destructors.
  static Graphviz* instance = [] {
    auto* gv = new Graphviz;
    gv->gvc = gvContextPlugins(kPlugins, 0);
    agseterrf(collect_error);
    return gv;
  }();
  return *instance;
}

/// A cgraph ID discipline that numbers named objects in order of creation.
/// cgraph's default uses the address of the interned name as the ID, and
/// subgraphs (so clusters) are kept in ID order: with it, the order of
/// clusters in the layout and in the SVG changes from run to run.
struct NameIds {
  std::unordered_map<std::string, IDTYPE> ids;
  /// Names by ID / 2 - 1; a deque, so that the names' bytes never move.
  std::deque<std::string> names;
  /// Anonymous objects get odd IDs, named ones even IDs.
  IDTYPE next_anonymous = 1;
};

void* ids_open(Agraph_t*, Agdisc_t*) { return new NameIds; }

long ids_map(void* state, int, char* name, IDTYPE* id, int create) {
  auto* ids = static_cast<NameIds*>(state);
  if (!name) {
    *id = ids->next_anonymous;
    ids->next_anonymous += 2;
    return 1;
  }
  auto it = ids->ids.find(name);
  if (it != ids->ids.end()) {
    *id = it->second;
    return 1;
  }
  if (!create) {
    *id = 0;  // no object has ID 0: the lookup finds nothing
    return 1;
  }
  ids->names.emplace_back(name);
  *id = 2 * static_cast<IDTYPE>(ids->names.size());
  ids->ids.emplace(ids->names.back(), *id);
  return 1;
}

long ids_alloc(void*, int, IDTYPE request) { return request % 2 == 1; }

void ids_free(void*, int, IDTYPE) {}

char* ids_print(void* state, int, IDTYPE id) {
  auto* ids = static_cast<NameIds*>(state);
  if (id == 0 || id % 2 == 1 || id / 2 > ids->names.size()) return nullptr;
  return ids->names[id / 2 - 1].data();
}

void ids_close(void* state) { delete static_cast<NameIds*>(state); }

void ids_register(void*, int, void*) {}

Agiddisc_t kNameIds = {ids_open, ids_map, ids_alloc, ids_free, ids_print, ids_close, ids_register};

/// A bump allocator for the objects of one cgraph graph (its Agmemdisc_t): a graph's nodes,
/// edges, subgraphs, records and dictionaries sit together in the order they were made, and
/// nothing is freed before the graph closes.
/// Why: cgraph keeps every node and subgraph in splay trees, and `dot` walks them all the
/// time. On malloc's heap, where a process that has run anything has its free memory
/// scattered, the 10,000-module view took 5.5 s to lay out the first time and 9-12 s each
/// time after; in one arena, 3.3 s every time. The arena of that graph holds 27 MB in all.
struct Arena {
  std::vector<std::unique_ptr<char, decltype(&std::free)>> blocks;
  char* next = nullptr;
  size_t left = 0;
  /// The last allocation, which resize may grow in place.
  char* last = nullptr;
};

constexpr size_t kArenaAlign = alignof(std::max_align_t);
constexpr size_t kFirstArenaBlock = size_t{64} << 10;
constexpr size_t kLargestArenaBlock = size_t{4} << 20;

void* arena_open(Agdisc_t*) { return new Arena; }

/// Zeroed memory, as cgraph expects of its allocator (its own uses calloc).
void* arena_alloc(void* state, size_t request) {
  auto* arena = static_cast<Arena*>(state);
  // At least one unit: a request of 0 still gets an address of its own.
  const size_t size = std::max<size_t>(1, (request + kArenaAlign - 1) / kArenaAlign) * kArenaAlign;
  if (size > arena->left) {
    const size_t block =
        std::max(size, std::min(kLargestArenaBlock,
                                kFirstArenaBlock << std::min<size_t>(arena->blocks.size(), 6)));
    char* memory = static_cast<char*>(std::calloc(1, block));
    if (!memory) return nullptr;  // cgraph reports it
    arena->blocks.emplace_back(memory, &std::free);
    arena->next = memory;
    arena->left = block;
  }
  arena->last = arena->next;
  arena->next += size;
  arena->left -= size;
  return arena->last;
}

void* arena_resize(void* state, void* ptr, size_t old_size, size_t request) {
  auto* arena = static_cast<Arena*>(state);
  const size_t old_rounded = (old_size + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  const size_t size = (request + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  if (ptr == arena->last && static_cast<char*>(ptr) + old_rounded == arena->next &&
      size >= old_rounded && size - old_rounded <= arena->left) {
    // What follows `last` was never handed out, so it is still calloc's zeros.
    arena->next += size - old_rounded;
    arena->left -= size - old_rounded;
    return ptr;
  }
  void* moved = arena_alloc(state, request);
  if (moved && ptr) std::memcpy(moved, ptr, std::min(old_size, request));
  return moved;
}

void arena_free(void*, void*) {}

void arena_close(void* state) { delete static_cast<Arena*>(state); }

Agmemdisc_t kArenaMemory = {arena_open, arena_alloc, arena_resize, arena_free, arena_close};

/// DOT text being read by cgraph, a line at a time as agmemread does.
struct Reader {
  const std::string& text;
  size_t pos = 0;
};

int read_line(void* chan, char* buf, int bufsize) {
  auto* reader = static_cast<Reader*>(chan);
  int n = 0;
  while (n < bufsize && reader->pos < reader->text.size()) {
    const char c = reader->text[reader->pos++];
    buf[n++] = c;
    if (c == '\n') break;
  }
  return n;
}

/// Parses DOT text with the deterministic ID discipline, its objects in an arena. cgraph
/// closes a graph with a memory discipline of its own at once ("whoosh"), leaving its
/// dictionaries' handles and its ID discipline unfreed: a few kB per graph, which the child's
/// exit returns.
Agraph_t* read_dot(const std::string& dot) {
  static Agiodisc_t io = {read_line, AgIoDisc.putstr, AgIoDisc.flush};
  static Agdisc_t disc = {&kArenaMemory, &kNameIds, &io};
  Reader reader{dot};
  agreadline(1);  // cgraph counts lines across reads: an error would name a line of earlier text
  return agread(&reader, &disc);
}

const char* graphviz_format(Format format) {
  switch (format) {
    case Format::kSvg:
      return "svg";
    case Format::kPng:
      return "png";
    case Format::kPdf:
      return "pdf";
    case Format::kDot:
      return "dot";
    case Format::kHtml:
      return "html";
  }
  return "svg";
}

/// Graphviz's messages of the current call, trimmed, for an exception.
std::string messages(const Graphviz& gv) {
  const auto end = gv.errors.find_last_not_of(" \n");
  return end == std::string::npos ? "(no message)" : gv.errors.substr(0, end + 1);
}

/// True when Graphviz reported an error since the call began. It recovers from
/// some (a label it cannot parse becomes the node's ID), but the drawing is then
/// not the one asked for.
bool graphviz_failed() { return agerrors() >= AGERR; }

/// Graphviz shrinks a bitmap past cairo's largest (32,767 pixels a side) until it fits, which
/// makes a long pipeline's PNG a strip nobody can read (it says so on stderr only): such a PNG
/// is refused. The size in pixels is the layout's, scaled down to the DOT's `size` when it
/// has one, at its `dpi` (96 by default for bitmaps).
void refuse_oversized_png(Agraph_t* g) {
  constexpr double kMaxPixels = 32767;
  const boxf box = GD_bb(g);
  const double width = box.UR.x - box.LL.x, height = box.UR.y - box.LL.y;  // points
  double dpi = 96;
  for (const char* name : {"dpi", "resolution"}) {
    const char* value = agget(g, const_cast<char*>(name));
    if (value && std::atof(value) > 0) dpi = std::atof(value);
  }
  double scale = 1;
  double size_w = 0, size_h = 0;
  const char* size = agget(g, const_cast<char*>("size"));
  if (size && std::sscanf(size, "%lf,%lf", &size_w, &size_h) == 2 && size_w > 0 && size_h > 0) {
    scale = std::min({1.0, size_w * 72 / width, size_h * 72 / height});
  }
  const double pixels_w = width * scale * dpi / 72, pixels_h = height * scale * dpi / 72;
  if (pixels_w > kMaxPixels || pixels_h > kMaxPixels) {
    fail(
        "viz: the drawing is {:.0f} x {:.0f} pixels, more than a PNG holds (32767 a side), and "
        "Graphviz would shrink it to fit; write .svg or .pdf, or draw the module view",
        pixels_w, pixels_h);
  }
}

/// Lays out and renders DOT text with Graphviz in this process: in a child only.
std::string render_here(Graphviz& gv, const std::string& dot, Format format) {
  gv.errors.clear();
  agreseterrors();
  Agraph_t* g = read_dot(dot);
  if (!g) fail("viz: Graphviz could not parse the DOT text: {}", messages(gv));
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> close(g, agclose);
  if (graphviz_failed()) fail("viz: Graphviz could not parse the DOT text: {}", messages(gv));
  const int layout_rc = gvLayout(gv.gvc, g, "dot");
  // Frees the layout before the graph is closed, on every path.
  auto free_layout = [&gv](Agraph_t* laid_out) { gvFreeLayout(gv.gvc, laid_out); };
  std::unique_ptr<Agraph_t, decltype(free_layout)> layout(layout_rc == 0 ? g : nullptr,
                                                          free_layout);
  if (layout_rc != 0 || graphviz_failed()) {
    fail("viz: Graphviz could not lay out the graph: {}", messages(gv));
  }
  if (format == Format::kPng) refuse_oversized_png(g);
  char* data = nullptr;
  unsigned int length = 0;
  const int rc = gvRenderData(gv.gvc, g, graphviz_format(format), &data, &length);
  std::string bytes = data && rc == 0 ? std::string(data, length) : std::string();
  if (data) gvFreeRenderData(data);
  if (rc != 0 || graphviz_failed()) {
    fail("viz: Graphviz could not render {}: {}", graphviz_format(format), messages(gv));
  }
  return bytes;
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
  return detail::run_forked("viz: Graphviz", [&] { return render_here(graphviz(), dot, format); });
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
