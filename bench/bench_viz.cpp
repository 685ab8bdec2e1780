// Rendering long TensorDict pipelines: tdfx's diagram against a
// FxGraphDrawer-like one, and the layout choices that make the difference.
// Run: build/bin/bench_viz (the naive variants stop at 40 modules: at 100
// torch.fx's drawing takes `dot` about 40 minutes).

#include <benchmark/benchmark.h>

#include <regex>
#include <string>

#include "tests/viz/chain.h"
#include "viz/render.h"

namespace {

using tdfx::Format;
using tdfx::testing::module_chain;

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

void report(benchmark::State& state, const std::string& dot) {
  state.counters["dot_kB"] = static_cast<double>(dot.size()) / 1024.0;
}

/// tdfx's diagram: DOT text + in-process layout and SVG.
void BM_RenderSvg(benchmark::State& state) {
  auto chain = module_chain(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(tdfx::render(chain.graph, Format::kSvg, chain.options));
  }
  report(state, tdfx::to_dot(chain.graph, chain.options));
}
BENCHMARK(BM_RenderSvg)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RenderSvg)->Arg(1000)->Iterations(1)->Unit(benchmark::kMillisecond);

/// The DOT text alone (no Graphviz).
void BM_ToDot(benchmark::State& state) {
  auto chain = module_chain(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::to_dot(chain.graph, chain.options));
}
BENCHMARK(BM_ToDot)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

/// FxGraphDrawer's shape of diagram: records, every output an edge into one node.
void BM_NaiveFxDrawerSvg(benchmark::State& state) {
  auto chain = module_chain(static_cast<size_t>(state.range(0)));
  const std::string dot = fx_drawer_dot(chain.graph, chain.options);
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
BENCHMARK(BM_NaiveFxDrawerSvg)
    ->Arg(10)
    ->Arg(20)
    ->Arg(40)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

/// Ablation: tdfx's diagram with the fan-in put back (every key note -> output);
/// with `clusters` false, also without the TensorDictModule boxes.
void fan_in(benchmark::State& state, bool clusters) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto chain = module_chain(n);
  if (!clusters) chain.options.modules.clear();
  std::string dot = tdfx::to_dot(chain.graph, chain.options);
  dot = std::regex_replace(dot, std::regex(R"(  "key_\d+" -> "output" \[style=invis\];\n)"), "");
  dot.resize(dot.rfind('}'));
  for (size_t i = 0; i < n; ++i) dot += "  \"key_" + std::to_string(i) + "\" -> \"output\";\n";
  dot += "}\n";
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
void BM_AblationFanIn(benchmark::State& state) { fan_in(state, true); }
void BM_AblationFanInNoClusters(benchmark::State& state) { fan_in(state, false); }
BENCHMARK(BM_AblationFanIn)
    ->Arg(40)
    ->Arg(100)
    ->Arg(1000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AblationFanInNoClusters)
    ->Arg(10)
    ->Arg(20)
    ->Arg(40)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

/// Ablation: dtype/shape as edge `label` (a virtual node per edge, twice the
/// ranks) instead of `xlabel` (placed after layout).
void BM_AblationEdgeLabels(benchmark::State& state) {
  auto chain = module_chain(static_cast<size_t>(state.range(0)));
  std::string dot = tdfx::to_dot(chain.graph, chain.options);
  dot = std::regex_replace(dot, std::regex(R"(\[xlabel=<)"), "[label=<");
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
BENCHMARK(BM_AblationEdgeLabels)->Arg(100)->Arg(1000)->Iterations(1)->Unit(benchmark::kMillisecond);

/// Ablation: no TensorDictModule clusters.
void BM_AblationNoClusters(benchmark::State& state) {
  auto chain = module_chain(static_cast<size_t>(state.range(0)));
  chain.options.modules.clear();
  const std::string dot = tdfx::to_dot(chain.graph, chain.options);
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
BENCHMARK(BM_AblationNoClusters)->Arg(1000)->Iterations(1)->Unit(benchmark::kMillisecond);

/// Ablation: key notes below their producers instead of on the same rank.
void BM_AblationKeysBelow(benchmark::State& state) {
  auto chain = module_chain(static_cast<size_t>(state.range(0)));
  std::string dot = tdfx::to_dot(chain.graph, chain.options);
  dot = std::regex_replace(dot, std::regex(R"(\{rank=same; [^}]*\}\n)"), "");
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::render_dot(dot, Format::kSvg));
  report(state, dot);
}
BENCHMARK(BM_AblationKeysBelow)->Arg(1000)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
