// Drawing long TensorDict pipelines, end to end (options, DOT text, Graphviz layout and SVG):
// the op view and the module view side by side, tdfx's op view against a FxGraphDrawer-like
// one, and the layout choices that make the difference.
// Run: build/bin/bench_viz (the naive variant stops at 40 modules: at 100 torch.fx's drawing
// takes `dot` about 40 minutes). Goals (issue 13): op view of 1000 modules under 1.5 s; module
// view of 1000 under 1 s and of 10,000 under 10 s.

#include <benchmark/benchmark.h>
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/chain_pipeline.h"
#include "samples/drawn_chain.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/export/program_diff.h"
#include "tdfx/tracer/module_tree.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tdfx/viz/render.h"

namespace {

using tdfx::Format;
using tdfx::samples::module_chain;

/// One traced chain per length, traced once (tracing is bench_trace's business).
const tdfx::TDGraphModule& traced_chain(int64_t n) {
  static std::map<int64_t, std::unique_ptr<tdfx::TDGraphModule>> traced;
  auto& slot = traced[n];
  if (!slot) {
    const auto chain = tdfx::bench::chain(n);
    slot = std::make_unique<tdfx::TDGraphModule>(
        tdfx::symbolic_trace(chain.pipeline, tdfx::bench::chain_input()));
  }
  return *slot;
}

void report(benchmark::State& state, const std::string& dot) {
  state.counters["dot_kB"] = static_cast<double>(dot.size()) / 1024.0;
}

/// The op view of a traced chain: diagram_options, DOT text, layout and SVG.
void BM_OpViewSvg(benchmark::State& state) {
  const tdfx::TDGraphModule& gm = traced_chain(state.range(0));
  for (auto _ : state) {
    tdfx::RenderOptions options = tdfx::diagram_options(gm);
    benchmark::DoNotOptimize(tdfx::render(gm.graph(), Format::kSvg, options));
  }
  report(state, tdfx::to_dot(gm.graph(), tdfx::diagram_options(gm)));
}
BENCHMARK(BM_OpViewSvg)->Arg(30)->Arg(100)->Unit(benchmark::kMillisecond)->UseRealTime();
// 2499 modules: 9,998 nodes, the most RenderOptions::kDefaultMaxNodes lets through.
BENCHMARK(BM_OpViewSvg)
    ->Arg(1000)
    ->Arg(2499)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// The page of a traced chain (`tdfx render -o x.html`), its size and the time to write it:
/// at 100 modules (402 nodes) and more, the pipeline view (laid out by the page) and the module
/// view (laid out by Graphviz, which is most of the time); no op view. The budget is raised
/// for the 10,000-module chain (40,002 nodes).
void BM_PageHtml(benchmark::State& state) {
  const tdfx::TDGraphModule& gm = traced_chain(state.range(0));
  size_t bytes = 0;
  for (auto _ : state) {
    tdfx::RenderOptions options = tdfx::diagram_options(gm);
    options.max_nodes = 50000;
    bytes = tdfx::render(gm.graph(), Format::kHtml, options).size();
  }
  state.counters["page_MB"] = static_cast<double>(bytes) / (1 << 20);
}
BENCHMARK(BM_PageHtml)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// The module view of a chain, without tracing it: module_view_options, DOT, layout, SVG.
void BM_ModuleViewSvg(benchmark::State& state) {
  const auto chain = tdfx::bench::chain(state.range(0));
  tdfx::RenderOptions options;
  for (auto _ : state) {
    options = tdfx::module_view_options(chain.pipeline);
    benchmark::DoNotOptimize(tdfx::render(tdfx::Graph(), Format::kSvg, options));
  }
  report(state, tdfx::module_view_dot(options));
}
BENCHMARK(BM_ModuleViewSvg)->Arg(30)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ModuleViewSvg)
    ->Arg(10000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// The module view of a traced chain, from diagram_options as `tdfx render --view modules`
/// draws an archive.
void BM_ModuleViewOfTraceSvg(benchmark::State& state) {
  const tdfx::TDGraphModule& gm = traced_chain(state.range(0));
  for (auto _ : state) {
    tdfx::RenderOptions options = tdfx::diagram_options(gm);
    options.view = tdfx::View::kModules;
    benchmark::DoNotOptimize(tdfx::render(gm.graph(), Format::kSvg, options));
  }
}
BENCHMARK(BM_ModuleViewOfTraceSvg)
    ->Arg(1000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// diagram_options alone: linear in the graph and the parameters (it was quadratic: 1.3 s at
/// 1000 modules, 6.9 s at 2000).
void BM_DiagramOptions(benchmark::State& state) {
  const tdfx::TDGraphModule& gm = traced_chain(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::diagram_options(gm));
}
BENCHMARK(BM_DiagramOptions)->Arg(1000)->Arg(2000)->Unit(benchmark::kMillisecond)->UseRealTime();

/// The DOT text alone (no Graphviz), both views.
void BM_ToDot(benchmark::State& state) {
  auto chain = module_chain(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::to_dot(chain.graph, chain.options));
}
BENCHMARK(BM_ToDot)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime();

std::string record_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string("{}|<>\"").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

/// What torch.fx's FxGraphDrawer writes for the chain: one record node per
/// node, and every written value an edge into the one output node.
std::string fx_drawer_dot(const tdfx::Graph& graph, const tdfx::RenderOptions& options) {
  std::string dot = "digraph G {\n  rankdir=TB;\n  node [shape=record, style=filled];\n";
  for (tdfx::Node* node : graph.nodes()) {
    std::string label =
        "{name=%" + node->name() + "|op_code=" + std::string(tdfx::to_string(node->op())) + "\\n";
    if (node->op() == tdfx::OpCode::kCallModule) {
      const std::string& target = node->target().str();
      label += "|" + record_escape(options.module_descriptions.at(target)) + "\\n";
      for (const auto& [name, meta] : options.module_parameters.at(target)) {
        label += "|" + name + ": torch.float32[64, 64]\\n";
      }
    } else {
      label += "|target=" + record_escape(node->target().str()) + "\\n";
    }
    label += "|num_users=" + std::to_string(node->users().size()) + "\\n}";
    dot += "  \"" + node->name() + "\" [label=\"" + label + "\", fillcolor=\"#CAFFE3\"];\n";
    for (tdfx::Node* input : node->input_nodes()) {
      dot += "  \"" + input->name() + "\" -> \"" + node->name() + "\";\n";
    }
  }
  return dot + "}\n";
}

/// FxGraphDrawer's shape of diagram: records, every output an edge into one node.
void BM_NaiveFxDrawerSvg(benchmark::State& state) {
  auto chain = module_chain(static_cast<size_t>(state.range(0)));
  const std::string dot = fx_drawer_dot(chain.graph, chain.options);
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
BENCHMARK(BM_NaiveFxDrawerSvg)
    ->Arg(10)
    ->Arg(40)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// Ablation: the op view without TensorDictModule clusters.
void BM_AblationOpViewNoClusters(benchmark::State& state) {
  auto chain = module_chain(static_cast<size_t>(state.range(0)));
  chain.options.modules.clear();
  const std::string dot = tdfx::to_dot(chain.graph, chain.options);
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
BENCHMARK(BM_AblationOpViewNoClusters)
    ->Arg(1000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// Ablation: the module view as one strip (no rows).
void BM_AblationModuleViewNoRows(benchmark::State& state) {
  const auto chain = tdfx::bench::chain(state.range(0));
  tdfx::RenderOptions options = tdfx::module_view_options(chain.pipeline);
  options.modules_per_row = 0;
  const std::string dot = tdfx::module_view_dot(options);
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
BENCHMARK(BM_AblationModuleViewNoRows)
    ->Arg(1000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// The same DOT text laid out and rendered again and again, by tdfx (a child process per
/// drawing, its cgraph objects in an arena) and by Graphviz's API as documented, in this
/// process (agmemread, gvLayout, gvRender on malloc's heap): the second gets slower each time.
void BM_ModuleViewRepeated(benchmark::State& state) {
  const auto chain = tdfx::bench::chain(state.range(0));
  const std::string dot = tdfx::module_view_dot(tdfx::module_view_options(chain.pipeline));
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
}
BENCHMARK(BM_ModuleViewRepeated)
    ->Arg(10000)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_PlainGraphvizRepeated(benchmark::State& state) {
  const auto chain = tdfx::bench::chain(state.range(0));
  const std::string dot = tdfx::module_view_dot(tdfx::module_view_options(chain.pipeline));
  static GVC_t* gvc = gvContext();
  for (auto _ : state) {
    Agraph_t* g = agmemread(dot.c_str());
    gvLayout(gvc, g, "dot");
    char* data = nullptr;
    unsigned int length = 0;
    gvRenderData(gvc, g, "svg", &data, &length);
    gvFreeRenderData(data);
    gvFreeLayout(gvc, g);
    agclose(g);
  }
}
BENCHMARK(BM_PlainGraphvizRepeated)
    ->Arg(10000)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// `dot` text without the plain subgraphs that group sibling subgraphs
/// (viz/subgraph_groups.h): the same drawing.
std::string without_groups(const std::string& dot) {
  std::string out;
  std::vector<bool> groups;  // one entry per open brace: is it a group's?
  size_t start = 0;
  while (start < dot.size()) {
    const size_t end = dot.find('\n', start);
    const std::string line = dot.substr(start, end - start + 1);
    start = end + 1;
    const std::string text = line.substr(line.find_first_not_of(' '));
    if (text == "subgraph {\n") {
      groups.push_back(true);
      continue;
    }
    if (text == "}\n" && !groups.empty()) {
      const bool group = groups.back();
      groups.pop_back();
      if (group) continue;
    } else if (text.size() > 1 && text[text.size() - 2] == '{') {
      groups.push_back(false);
    }
    out += line;
  }
  return out;
}

/// Ablation: the module view with its 2,500 rows side by side, not grouped by 16.
void BM_AblationModuleViewNoGroups(benchmark::State& state) {
  const auto chain = tdfx::bench::chain(state.range(0));
  const std::string dot =
      without_groups(tdfx::module_view_dot(tdfx::module_view_options(chain.pipeline)));
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
BENCHMARK(BM_AblationModuleViewNoGroups)
    ->Arg(10000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// Ablation: the op view with its 1000 boxes side by side, not grouped by 16.
void BM_AblationOpViewNoGroups(benchmark::State& state) {
  const tdfx::TDGraphModule& gm = traced_chain(state.range(0));
  const std::string dot = without_groups(tdfx::to_dot(gm.graph(), tdfx::diagram_options(gm)));
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
BENCHMARK(BM_AblationOpViewNoGroups)
    ->Arg(1000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// What a drawing's process costs, side by side: the op view of a 10-module chain (about 40
/// nodes) drawn to SVG by tdfx's helper (posix_spawn of tdfx-graphviz, DOT in and SVG out over
/// a socket), and as tdfx drew before the helper: a fork() of this process whose child lays it
/// out with Graphviz's API and sends the SVG back over a pipe. Both load Graphviz's plugins
/// and fonts afresh per drawing.
void BM_SmallDrawing_Helper(benchmark::State& state) {
  const tdfx::TDGraphModule& gm = traced_chain(10);
  const std::string dot = tdfx::to_dot(gm.graph(), tdfx::diagram_options(gm));
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
}
BENCHMARK(BM_SmallDrawing_Helper)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SmallDrawing_Fork(benchmark::State& state) {
  const tdfx::TDGraphModule& gm = traced_chain(10);
  const std::string dot = tdfx::to_dot(gm.graph(), tdfx::diagram_options(gm));
  for (auto _ : state) {
    int fds[2];
    if (::pipe(fds) != 0) state.SkipWithError("pipe");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      GVC_t* gvc = gvContext();
      Agraph_t* g = agmemread(dot.c_str());
      gvLayout(gvc, g, "dot");
      char* data = nullptr;
      unsigned int length = 0;
      gvRenderData(gvc, g, "svg", &data, &length);
      for (unsigned int sent = 0; sent < length;) {
        const ssize_t n = ::write(fds[1], data + sent, length - sent);
        if (n <= 0) break;
        sent += static_cast<unsigned int>(n);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    std::string svg;
    char buffer[1 << 16];
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) svg.append(buffer, n);
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    benchmark::DoNotOptimize(svg);
  }
}
BENCHMARK(BM_SmallDrawing_Fork)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

// diff_programs on two exported 1000-link chains (goal: under a second): the same weights
// (/0: equal, every node aligned by its label) and other weights (/1: every weight differs,
// so every linear is paired after the alignment and its weights compared).
void BM_DiffChain(benchmark::State& state) {
  at::manual_seed(0);
  const tdfx::bench::Chain chain = tdfx::bench::chain(state.range(0));
  const std::vector<std::pair<std::string, at::Tensor>> inputs{
      {"h0", tdfx::bench::chain_input().get("h0")}};
  const tdfx::ExportedProgram a = tdfx::export_program(chain.pipeline, inputs);
  const tdfx::ExportedProgram b =
      state.range(1) ? tdfx::export_program(tdfx::bench::chain(state.range(0)).pipeline, inputs)
                     : tdfx::export_program(chain.pipeline, inputs);
  for (auto _ : state) {
    auto diff = tdfx::diff_programs(a, b);
    benchmark::DoNotOptimize(diff);
  }
}
BENCHMARK(BM_DiffChain)
    ->Args({1000, 0})
    ->Args({1000, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

namespace {

/// A program of `n` nodes: x through a chain of `n - 2` calls of `op` (`aten::relu`).
tdfx::ExportedProgram op_chain(int64_t n, const char* op) {
  tdfx::Graph g;
  tdfx::Node* x = g.placeholder("x");
  x->meta().tensor.dtype = at::kFloat;
  x->meta().tensor.shape = std::vector<int64_t>{2};
  tdfx::Node* last = x;
  for (int64_t i = 2; i < n; ++i) last = g.call_function(tdfx::Target::aten(op), {last});
  g.output(tdfx::tuple({last}));
  tdfx::GraphSignature signature;
  signature.inputs = {{tdfx::InputKind::kUserInput, "x", "x", {}}};
  signature.outputs = {{last->name(), tdfx::NestedKey("y")}};
  return tdfx::ExportedProgram(std::move(g), std::move(signature), {});
}

}  // namespace

// diff_programs of two chains of N nodes with no label in common (relu against sigmoid): the
// alignment pairs nothing in the middle, so every node is paired by its kind afterwards.
// Goal: linear or n log n in N (it was quadratic: 2.2, 7.9 and 29.9 s at 8k, 16k, 32k).
void BM_DiffUnmatched(benchmark::State& state) {
  const tdfx::ExportedProgram a = op_chain(state.range(0), "aten::relu");
  const tdfx::ExportedProgram b = op_chain(state.range(0), "aten::sigmoid");
  for (auto _ : state) {
    auto diff = tdfx::diff_programs(a, b);
    benchmark::DoNotOptimize(diff);
  }
}
BENCHMARK(BM_DiffUnmatched)
    ->Arg(8000)
    ->Arg(32000)
    ->Arg(128000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Layout of a graph a stranger's archive can hold inside the drawing limits: N nodes, each
// reading two earlier nodes picked at random (a fixed seed), drawn to SVG by the helper. Such a
// graph costs Graphviz far more than a traced pipeline of as many nodes; what bounds it is
// RenderOptions::time_budget, which stops the helper.
void BM_RandomGraphLayout(benchmark::State& state) {
  tdfx::Graph g;
  std::vector<tdfx::Node*> nodes{g.placeholder("x")};
  uint64_t seed = 12345;
  auto pick = [&] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return nodes[(seed >> 33) % nodes.size()];
  };
  for (int64_t i = 1; i < state.range(0); ++i) {
    nodes.push_back(g.call_function(tdfx::Target::aten("aten::add.Tensor"), {pick(), pick()}));
  }
  g.output(nodes.back());
  tdfx::RenderOptions options;
  options.time_budget = 1e6;
  for (auto _ : state) {
    std::string svg = tdfx::render(g, tdfx::Format::kSvg, options);
    benchmark::DoNotOptimize(svg);
  }
}
BENCHMARK(BM_RandomGraphLayout)
    ->Arg(250)
    ->Arg(500)
    ->Arg(1000)
    ->Arg(2000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
