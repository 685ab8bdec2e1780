// render / write: DOT text laid out and rendered by Graphviz in this process.

#include "viz/render.h"

#include <fcntl.h>
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <graphviz/gvplugin.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/error.h"

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

/// The process's one Graphviz context, and the lock that serialises every use
/// of Graphviz: neither cgraph's parser nor gvc's layout is thread-safe.
struct Graphviz {
  GVC_t* gvc = nullptr;
  std::mutex mutex;
  /// Graphviz's error messages of the current call (guarded by `mutex`).
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

/// Parses DOT text with the deterministic ID discipline.
Agraph_t* read_dot(const std::string& dot) {
  static Agiodisc_t io = {read_line, AgIoDisc.putstr, AgIoDisc.flush};
  static Agdisc_t disc = {&AgMemDisc, &kNameIds, &io};
  Reader reader{dot};
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
  }
  return "svg";
}

/// Lays out and renders DOT text; the caller holds the Graphviz lock.
std::string render_locked(Graphviz& gv, const std::string& dot, Format format) {
  gv.errors.clear();
  Agraph_t* g = read_dot(dot);
  if (!g) fail("viz: Graphviz could not parse the DOT text: {}", gv.errors);
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> close(g, agclose);
  if (gvLayout(gv.gvc, g, "dot") != 0) fail("viz: Graphviz layout failed: {}", gv.errors);
  char* data = nullptr;
  unsigned int length = 0;
  const int rc = gvRenderData(gv.gvc, g, graphviz_format(format), &data, &length);
  std::string bytes = data && rc == 0 ? std::string(data, length) : std::string();
  if (data) gvFreeRenderData(data);
  gvFreeLayout(gv.gvc, g);
  if (rc != 0) {
    fail("viz: Graphviz could not render {}: {}", graphviz_format(format), gv.errors);
  }
  return bytes;
}

}  // namespace

std::string render(const Graph& graph, Format format, const RenderOptions& options) {
  return render_dot(to_dot(graph, options), format);
}

std::string render_dot(const std::string& dot, Format format) {
  if (format == Format::kDot) return dot;
  Graphviz& gv = graphviz();
  std::lock_guard<std::mutex> lock(gv.mutex);
  return render_locked(gv, dot, format);
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
  fail(
      "cannot draw a graph to '{}': unknown extension; expected one of .svg, .png, .pdf, .dot, .gv",
      path);
}

void write(const Graph& graph, const std::string& path, const RenderOptions& options) {
  const Format format = format_from_extension(path);
  const std::string bytes = render(graph, format, options);
  // Same directory as the target, so the rename cannot cross file systems.
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) fail("cannot write '{}': {}", path, std::strerror(errno));
  bool ok = true;
  for (size_t done = 0; ok && done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  const int saved = errno;
  // mkstemp makes 0600; a drawing is an ordinary file.
  ok = ok && fchmod(fd, 0644) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = ok ? errno : saved;
    std::remove(tmp.c_str());
    fail("cannot write '{}': {}", path, std::strerror(err ? err : EIO));
  }
}

}  // namespace tdfx
