// The debugging tools' cost, side by side with a plain run.
//
// BM_ReluChain_Plan / BM_ReluChain_Interpreter: a graph of 1000 aten::relu nodes on a
// 1-element tensor, run by the compiled plan and by an Interpreter with no hooks: the
// difference per node is the interpreter's overhead (goal: at most 1 µs per node).
//
// BM_Chain_*/N: the chain of N relu(Linear(64, 64)) modules (samples/chain.h) at batch
// 16: Direct calls the links on tensors; Run is the traced TDGraphModule's run (the flat
// plan); Printed runs the printed graph's plan; Interpreter walks it; Stats is node_stats
// (goal: at most 2× Run at N = 100). Goal: Run within 1.05× Direct.
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <benchmark/benchmark.h>
#include <torch/csrc/autograd/autograd.h>

#include "bench/chain_pipeline.h"
#include "bench/relu_chain.h"
#include "samples/pipelines.h"
#include "tdfx/debug/gradients.h"
#include "tdfx/debug/node_stats.h"
#include "tdfx/graph/interpreter.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace {

using tdfx::bench::relu_chain;

constexpr int64_t kReluChain = 1000;

void per_node(benchmark::State& state, int64_t nodes) {
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

void BM_ReluChain_Plan(benchmark::State& state) {
  const tdfx::GraphModule gm(nullptr, relu_chain(kReluChain));
  const at::Tensor x = at::randn({1});
  for (auto _ : state) benchmark::DoNotOptimize(gm.forward({x}));
  per_node(state, kReluChain);
}
BENCHMARK(BM_ReluChain_Plan);

void BM_ReluChain_Interpreter(benchmark::State& state) {
  const tdfx::GraphModule gm(nullptr, relu_chain(kReluChain));
  const at::Tensor x = at::randn({1});
  tdfx::Interpreter interpreter(gm);
  for (auto _ : state) benchmark::DoNotOptimize(interpreter.run({x}));
  per_node(state, kReluChain);
}
BENCHMARK(BM_ReluChain_Interpreter);

using tdfx::bench::TracedChain;

void BM_Chain_Direct(benchmark::State& state) {
  TracedChain c(state.range(0));
  const at::Tensor h0 = c.input.get("h0");
  for (auto _ : state) {
    at::Tensor h = h0;
    for (auto& link : c.chain.links) h = link->forward(h);
    benchmark::DoNotOptimize(h);
  }
}
BENCHMARK(BM_Chain_Direct)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_Chain_Run(benchmark::State& state) {
  const TracedChain c(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(c.gm.run(c.input));
}
BENCHMARK(BM_Chain_Run)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_Chain_Printed(benchmark::State& state) {
  const TracedChain c(state.range(0));
  const auto& gm = c.gm.graph_module();
  const auto inputs = c.gm.graph_inputs(c.input);
  for (auto _ : state) benchmark::DoNotOptimize(gm.forward(inputs));
}
BENCHMARK(BM_Chain_Printed)->Arg(100)->Unit(benchmark::kMicrosecond);

void BM_Chain_Interpreter(benchmark::State& state) {
  const TracedChain c(state.range(0));
  tdfx::Interpreter interpreter(c.gm.graph_module());
  const auto inputs = c.gm.graph_inputs(c.input);
  for (auto _ : state) benchmark::DoNotOptimize(interpreter.run(inputs));
}
BENCHMARK(BM_Chain_Interpreter)->Arg(100)->Unit(benchmark::kMicrosecond);

void BM_Chain_Stats(benchmark::State& state) {
  const TracedChain c(state.range(0));
  const tdfx::Debuggee run = tdfx::debuggee(c.gm, c.input);
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::node_stats(run));
}
BENCHMARK(BM_Chain_Stats)->Arg(100)->Unit(benchmark::kMicrosecond);

// ---- Gradients -----------------------------------------------------------------------------
// BM_Grad_*/0: the chain of 100 links; /1: the PPO actor-critic (samples/pipelines.h), batch
// 16. ForwardBackward is the plain training step on the traced module: run, sum the outputs,
// the parameters' gradients by torch::autograd::grad. Stats is grad_stats (every node's and
// parameter's gradient statistics and the flow per module); FirstNonFinite is
// first_nonfinite_grad on finite gradients (the whole search). Goal: Stats at most 3×
// ForwardBackward, FirstNonFinite at most that plus one pass.

struct GradCase {
  explicit GradCase(int64_t which)
      : pipeline(which == 0 ? std::static_pointer_cast<tdfx::TensorDictModuleBase>(
                                  tdfx::bench::chain(100).pipeline)
                            : tdfx::samples::actor_critic()),
        input(which == 0 ? tdfx::bench::chain_input() : tdfx::samples::actor_critic_input()),
        gm(tdfx::symbolic_trace(pipeline, input)) {
    for (const auto& p : pipeline->parameters()) {
      if (p.requires_grad()) parameters.push_back(p);
    }
  }
  std::shared_ptr<tdfx::TensorDictModuleBase> pipeline;
  tdfx::TensorDict input;
  tdfx::TDGraphModule gm;
  std::vector<at::Tensor> parameters;
};

void label(benchmark::State& state) { state.SetLabel(state.range(0) == 0 ? "chain_100" : "ppo"); }

void BM_Grad_ForwardBackward(benchmark::State& state) {
  const GradCase c(state.range(0));
  for (auto _ : state) {
    at::Tensor loss;
    for (const at::Tensor& value : c.gm.run(c.input)) {
      if (!at::isFloatingType(value.scalar_type())) continue;
      loss = loss.defined() ? loss + value.sum() : value.sum();
    }
    benchmark::DoNotOptimize(torch::autograd::grad({loss}, c.parameters, {}, false, false, true));
  }
  label(state);
}
BENCHMARK(BM_Grad_ForwardBackward)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_Grad_Stats(benchmark::State& state) {
  const GradCase c(state.range(0));
  const tdfx::Debuggee run = tdfx::debuggee(c.gm, c.input);
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::grad_stats(run));
  label(state);
}
BENCHMARK(BM_Grad_Stats)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_Grad_FirstNonFinite(benchmark::State& state) {
  const GradCase c(state.range(0));
  const tdfx::Debuggee run = tdfx::debuggee(c.gm, c.input);
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::first_nonfinite_grad(run));
  label(state);
}
BENCHMARK(BM_Grad_FirstNonFinite)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
