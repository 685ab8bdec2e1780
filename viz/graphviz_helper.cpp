// tdfx-graphviz: the helper program that lays out and renders one DOT drawing with Graphviz,
// started by tdfx's render (viz/render.cpp) with posix_spawn for every drawing and never run
// in the caller's process.
//
//   tdfx-graphviz FORMAT MEMORY_MB < drawing.dot > answer
//
// FORMAT is svg, png or pdf. The answer on standard output is one tag byte ('R': the
// drawing follows; 'F': an error message follows), the length of what follows as 8 bytes,
// little endian, then the bytes. It links Graphviz and the C++ runtime only: no LibTorch, no
// tdfx library, so that it starts fast and no state of the caller (threads, locks, sanitizer
// state) is ever copied into the process that runs Pango.
//
// Why a process per drawing: Graphviz 2.42 keeps state across graphs in process globals, and
// it goes wrong: after a few dozen drawings of ordinary pipelines in one process, `dot` aborts
// (mincross.c: install_in_rank assertion) or segfaults, the same with Graphviz's own API and
// no tdfx code; every drawing leaks 0.6 to 1.7 MB; and layouts slow down. Here each drawing
// starts from the same state, a crash in Graphviz is the caller's Error rather than the end of
// the caller, its leaks go with the process, and threads draw at once.

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <graphviz/gvplugin.h>
#include <graphviz/types.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

// The plugins are linked in, not loaded from Debian's plugin config, so that
// rendering works even when that config is missing or stale.
extern "C" {
extern gvplugin_library_t gvplugin_dot_layout_LTX_library;
extern gvplugin_library_t gvplugin_core_LTX_library;
extern gvplugin_library_t gvplugin_pango_LTX_library;
extern gvplugin_library_t gvplugin_gd_LTX_library;
}

namespace {

lt_symlist_t kPlugins[] = {
    {"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library},
    {"gvplugin_core_LTX_library", &gvplugin_core_LTX_library},
    {"gvplugin_pango_LTX_library", &gvplugin_pango_LTX_library},
    {"gvplugin_gd_LTX_library", &gvplugin_gd_LTX_library},
    {nullptr, nullptr},
};

/// The process's one Graphviz context: it runs one drawing.
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
    char text[256];
    std::snprintf(text, sizeof text,
                  "viz: the drawing is %.0f x %.0f pixels, more than a PNG holds (32767 a "
                  "side), and Graphviz would shrink it to fit; write .svg or .pdf, or draw the "
                  "module view",
                  pixels_w, pixels_h);
    throw std::runtime_error(text);
  }
}

/// Lays out and renders DOT text with Graphviz.
std::string render_here(Graphviz& gv, const std::string& dot, const std::string& format) {
  gv.errors.clear();
  agreseterrors();
  Agraph_t* g = read_dot(dot);
  if (!g) throw std::runtime_error("viz: Graphviz could not parse the DOT text: " + messages(gv));
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> close(g, agclose);
  if (graphviz_failed()) {
    throw std::runtime_error("viz: Graphviz could not parse the DOT text: " + messages(gv));
  }
  const int layout_rc = gvLayout(gv.gvc, g, "dot");
  // Frees the layout before the graph is closed, on every path.
  auto free_layout = [&gv](Agraph_t* laid_out) { gvFreeLayout(gv.gvc, laid_out); };
  std::unique_ptr<Agraph_t, decltype(free_layout)> layout(layout_rc == 0 ? g : nullptr,
                                                          free_layout);
  if (layout_rc != 0 || graphviz_failed()) {
    throw std::runtime_error("viz: Graphviz could not lay out the graph: " + messages(gv));
  }
  if (format == "png") refuse_oversized_png(g);
  char* data = nullptr;
  unsigned int length = 0;
  const int rc = gvRenderData(gv.gvc, g, format.c_str(), &data, &length);
  std::string bytes = data && rc == 0 ? std::string(data, length) : std::string();
  if (data) gvFreeRenderData(data);
  if (rc != 0 || graphviz_failed()) {
    throw std::runtime_error("viz: Graphviz could not render " + format + ": " + messages(gv));
  }
  return bytes;
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool answer(char tag, const std::string& bytes) {
  char header[9] = {tag};
  const uint64_t length = bytes.size();
  for (size_t i = 0; i < 8; ++i) header[1 + i] = static_cast<char>(length >> (8 * i));
  return write_all(STDOUT_FILENO, header, sizeof header) &&
         write_all(STDOUT_FILENO, bytes.data(), bytes.size());
}

}  // namespace

// Under AddressSanitizer (the TDFX_SANITIZE build): Graphviz and Pango keep memory until the
// process ends, which this one does after one drawing; leak reports would only hide the
// answer's exit status.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

int main(int argc, char** argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the caller gone, nobody reads the answer
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (argc != 3) {
    return answer('F', "viz: tdfx-graphviz takes FORMAT MEMORY_MB") ? 0 : 3;
  }
  const std::string format = argv[1];
  if (format != "svg" && format != "png" && format != "pdf") {
    return answer('F', "viz: tdfx-graphviz cannot write '" + format + "'") ? 0 : 3;
  }
#if !defined(__SANITIZE_ADDRESS__)
  // The drawing's memory budget (AddressSanitizer reserves terabytes of address space, so the
  // sanitizer build goes without it).
  const unsigned long long megabytes = std::strtoull(argv[2], nullptr, 10);
  if (megabytes > 0) {
    const rlimit memory{megabytes << 20, megabytes << 20};
    ::setrlimit(RLIMIT_AS, &memory);
  }
#endif
  std::string dot;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 3;
    if (n == 0) break;
    dot.append(buffer, static_cast<size_t>(n));
  }
  try {
    return answer('R', render_here(graphviz(), dot, format)) ? 0 : 3;
  } catch (const std::bad_alloc&) {
    return answer('F',
                  "viz: Graphviz ran out of memory (its budget is " + std::string(argv[2]) + " MB)")
               ? 0
               : 3;
  } catch (const std::exception& e) {
    return answer('F', e.what()) ? 0 : 3;
  }
}
