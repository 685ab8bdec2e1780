// GraphModule's cost per node: a chain of relu nodes on a 1-element tensor,
// run by GraphModule, by a plain loop of at::relu calls, and by a loop of
// boxed dispatcher calls (the floor for any boxed interpreter). Also checks
// that a 100,000-node chain runs and prints without deep recursion, and that
// editing and linting a node with 4k/8k/16k users grows linearly.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench/relu_chain.h"
#include "tdfx/codegen/python_code.h"
#include "tdfx/graph/graph.h"
#include "tdfx/graph/graph_module.h"

namespace {

using tdfx::bench::relu_chain;

constexpr int64_t kChain = 1000;
constexpr int64_t kLongChain = 100000;

/// Items processed and "ns_per_node": CPU time per node, an inverted rate, so the console
/// prints it with its unit (`ns_per_node=441.9ns`) and JSON holds it in seconds.
void set_per_node(benchmark::State& state, int64_t nodes) {
  state.SetItemsProcessed(state.iterations() * nodes);
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

void BM_GraphModuleReluChain(benchmark::State& state) {
  const tdfx::GraphModule gm(nullptr, relu_chain(kChain));
  const at::Tensor x = at::randn({1});
  for (auto _ : state) {
    auto out = gm.run({x});
    benchmark::DoNotOptimize(out);
  }
  set_per_node(state, kChain);
}

void BM_DirectReluChain(benchmark::State& state) {
  const at::Tensor x = at::randn({1});
  for (auto _ : state) {
    at::Tensor y = x;
    for (int64_t i = 0; i < kChain; ++i) y = at::relu(y);
    benchmark::DoNotOptimize(y);
  }
  set_per_node(state, kChain);
}

void BM_BoxedReluChain(benchmark::State& state) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::relu", "");
  const at::Tensor x = at::randn({1});
  std::vector<c10::IValue> stack;
  stack.reserve(1);
  for (auto _ : state) {
    c10::IValue y = x;
    for (int64_t i = 0; i < kChain; ++i) {
      stack.clear();
      stack.push_back(std::move(y));
      op.callBoxed(&stack);
      y = std::move(stack[0]);
    }
    benchmark::DoNotOptimize(y);
  }
  set_per_node(state, kChain);
}

void BM_GraphModuleChain100k(benchmark::State& state) {
  const tdfx::GraphModule gm(nullptr, relu_chain(kLongChain));
  const at::Tensor x = at::randn({1});
  for (auto _ : state) {
    auto out = gm.run({x});
    benchmark::DoNotOptimize(out);
  }
  set_per_node(state, kLongChain);
}

void BM_PrintChain100k(benchmark::State& state) {
  const tdfx::Graph graph = relu_chain(kLongChain);
  size_t chars = 0;
  for (auto _ : state) {
    const std::string text = tdfx::to_string(graph);
    const std::string code = tdfx::python_code(graph);
    chars = text.size() + code.size();
    benchmark::DoNotOptimize(chars);
  }
  state.counters["chars"] = static_cast<double>(chars);
  set_per_node(state, kLongChain);
}

/// placeholder x → `users` × aten::relu(x) → output of them all: %x has `users` users.
tdfx::Graph wide_graph(int64_t users) {
  tdfx::Graph graph;
  const tdfx::Target relu = tdfx::Target::aten("aten::relu");
  tdfx::Node* x = graph.placeholder("x");
  std::vector<tdfx::Argument> outputs;
  for (int64_t i = 0; i < users; ++i) outputs.emplace_back(graph.call_function(relu, {x}));
  graph.output(tdfx::tuple(std::move(outputs)));
  return graph;
}

/// Removes the oldest of %x's users (the costliest for a vector) by pointing it
/// at %y, and adds it back as the newest: one removal and one insertion per iteration.
void BM_RemoveOneUser(benchmark::State& state) {
  tdfx::Graph graph = wide_graph(state.range(0));
  tdfx::Node* x = *graph.nodes().begin();
  tdfx::Node* y = nullptr;
  {
    auto guard = graph.inserting_after(x);
    y = graph.placeholder("y");
  }
  for (auto _ : state) {
    tdfx::Node* user = *x->users().begin();
    user->set_args({y});
    user->set_args({x});
  }
  state.counters["users"] = static_cast<double>(x->users().size());
}

/// Moves all of %x's users to %y and back: 2 × `users` removals of one user each.
void BM_ReplaceAllUses(benchmark::State& state) {
  tdfx::Graph graph = wide_graph(state.range(0));
  tdfx::Node* x = *graph.nodes().begin();
  tdfx::Node* y = nullptr;
  {
    auto guard = graph.inserting_after(x);
    y = graph.placeholder("y");
  }
  for (auto _ : state) {
    x->replace_all_uses_with(y);
    y->replace_all_uses_with(x);
  }
  state.counters["users"] = static_cast<double>(x->users().size());
}

void BM_LintWideNode(benchmark::State& state) {
  const tdfx::Graph graph = wide_graph(state.range(0));
  for (auto _ : state) graph.lint();
  state.counters["users"] = static_cast<double>(state.range(0));
}

}  // namespace

BENCHMARK(BM_GraphModuleReluChain);
BENCHMARK(BM_DirectReluChain);
BENCHMARK(BM_BoxedReluChain);
BENCHMARK(BM_GraphModuleChain100k)->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PrintChain100k)->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RemoveOneUser)->Arg(4000)->Arg(8000)->Arg(16000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReplaceAllUses)->Arg(4000)->Arg(8000)->Arg(16000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LintWideNode)->Arg(4000)->Arg(8000)->Arg(16000)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
