// symbolic_trace's cost and the traced graph's run time.
//
// BM_TraceChain/N: static trace time (one recording) of a TensorDictSequential of N
// TensorDictModules, each a small user module relu(fc(x)) with fc = Linear(64, 64), reading
// "h{i}" and writing "h{i+1}", on a 16×64 input. Goal: linear in N ("us_per_module" stays
// flat), and at most 2× BM_EagerChain/N, measured beside it in the same run.
// BM_TraceChainShown/N: the trace and its FX view, built when first shown (graph()).
// BM_TraceChainThenRun/N: the trace and its first run, which compiles its plan.
// BM_TraceChainDynamic/N: the same with TraceOptions::dynamic_batch (four recordings).
//
// BM_EagerChain/N: the same chain run eagerly.
// BM_EagerChainAtProbes/N: eager forwards at each batch BM_TraceChainDynamic records.
// BM_DispatchRecordChain/N: the same chain recorded into a flat graph by tdfx's recorder on
// the dispatcher alone (tracer/dispatch_recorder.h), no passes: the floor under a trace.
// BM_ExportChain/N: export_program of the chain (the recording and the program pass).
//
// BM_Seed002_*: seed 002's pipeline (Net then Masker) at batch 32, run three ways on the same
// Net/Masker instances: the traced TDGraphModule, the eager TensorDictSequential, and the same
// ops called directly on tensors. Goal: GraphModule no slower than Eager, within 1.1× Direct.
// GraphModule and Eager each write into a fresh shallow copy of the input per iteration.
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/softmax.h>
#include <benchmark/benchmark.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/chain_pipeline.h"
#include "samples/pipelines.h"
#include "tdfx/export/program.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/dispatch_recorder.h"
#include "tdfx/tracer/dynamic_batch.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace {

/// The chain's pipeline.
std::shared_ptr<tdfx::TensorDictSequential> chain(int64_t length) {
  return tdfx::bench::chain(length).pipeline;
}

/// The chain's input.
tdfx::TensorDict chain_input() { return tdfx::TensorDict({{"h0", at::randn({16, 64})}}, {16}); }

/// Reports CPU time per module of a chain of `length`, an inverted rate: printed with its unit,
/// in seconds in JSON.
void count_per_module(benchmark::State& state, int64_t length) {
  state.counters["us_per_module"] = benchmark::Counter(
      static_cast<double>(length),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// What trace_chain does with each trace besides making it.
enum class AfterTrace { kNothing, kShow, kRun };

// Traces the chain of state.range(0) modules with `options` in each iteration; kShow also
// builds the FX view (graph()), as printing the trace would; kRun runs the traced module once
// (its first run compiles its plan).
void trace_chain(benchmark::State& state, const tdfx::TraceOptions& options, AfterTrace after) {
  const int64_t length = state.range(0);
  const auto seq = chain(length);
  const tdfx::TensorDict td = chain_input();
  for (auto _ : state) {
    auto gm = tdfx::symbolic_trace(seq, td, options);
    if (after == AfterTrace::kShow) benchmark::DoNotOptimize(gm.graph().size());
    if (after == AfterTrace::kRun) {
      tdfx::TensorDict work(td);
      gm.forward(work);
      benchmark::DoNotOptimize(work);
    }
    benchmark::DoNotOptimize(gm);
  }
  state.SetItemsProcessed(state.iterations() * length);
  count_per_module(state, length);
}

void BM_TraceChain(benchmark::State& state) { trace_chain(state, {}, AfterTrace::kNothing); }
BENCHMARK(BM_TraceChain)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

// A trace that is then shown: symbolic_trace and the FX view it builds on first use (graph()).
void BM_TraceChainShown(benchmark::State& state) { trace_chain(state, {}, AfterTrace::kShow); }
BENCHMARK(BM_TraceChainShown)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

// A trace that is then run once, its plan compiled on that first run: compare with two eager
// forwards (BM_EagerChain).
void BM_TraceChainThenRun(benchmark::State& state) { trace_chain(state, {}, AfterTrace::kRun); }
BENCHMARK(BM_TraceChainThenRun)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

void BM_TraceChainDynamic(benchmark::State& state) {
  tdfx::TraceOptions options;
  options.dynamic_batch = true;
  trace_chain(state, options, AfterTrace::kNothing);
}
BENCHMARK(BM_TraceChainDynamic)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

// The chain run eagerly at each batch a dynamic trace of it records (the example's 16 and the
// default probes, tdfx::detail::dynamic_batch_probes): BM_TraceChainDynamic's eager
// counterpart. A probe at a larger batch costs more than a forward at 16 wherever compute
// matters.
void BM_EagerChainAtProbes(benchmark::State& state) {
  const auto seq = chain(state.range(0));
  std::vector<tdfx::TensorDict> inputs;
  inputs.push_back(chain_input());
  for (const int64_t batch : tdfx::detail::dynamic_batch_probes(16, {})) {
    inputs.push_back(tdfx::TensorDict({{"h0", at::randn({batch, 64})}}, {batch}));
  }
  for (auto _ : state) {
    for (const tdfx::TensorDict& td : inputs) {
      tdfx::TensorDict work(td);
      seq->forward(work);
      benchmark::DoNotOptimize(work);
    }
  }
}
BENCHMARK(BM_EagerChainAtProbes)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

// The same chain run eagerly.
void BM_EagerChain(benchmark::State& state) {
  const auto seq = chain(state.range(0));
  const tdfx::TensorDict td({{"h0", at::randn({16, 64})}}, {16});
  for (auto _ : state) {
    tdfx::TensorDict work(td);
    seq->forward(work);
    benchmark::DoNotOptimize(work);
  }
}
BENCHMARK(BM_EagerChain)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

// tdfx's recorder on the dispatcher (tracer/dispatch_recorder.h) recording the chain's forward
// into a flat graph: each op a node as it runs, the input and every parameter bound first.
void BM_DispatchRecordChain(benchmark::State& state) {
  const auto seq = chain(state.range(0));
  const tdfx::TensorDict td({{"h0", at::randn({16, 64})}}, {16});
  size_t nodes = 0;
  for (auto _ : state) {
    tdfx::Graph graph;
    tdfx::detail::DispatchRecorder recorder(graph);
    recorder.bind(td.get("h0"), graph.placeholder("h0"));
    for (const auto& item : seq->named_parameters(true)) {
      recorder.bind(item.value(), graph.get_attr(item.key()));
    }
    tdfx::TensorDict work(td);
    recorder.record([&] { seq->forward(work); });
    nodes = graph.size();
    benchmark::DoNotOptimize(graph);
  }
  state.counters["nodes"] = static_cast<double>(nodes);
}
BENCHMARK(BM_DispatchRecordChain)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

// export_program of the chain: the recording, the program pass, the lifted signature (no FX
// view). Goal: at most 1.2× BM_TraceChain/N.
void BM_ExportChain(benchmark::State& state) {
  const auto seq = chain(state.range(0));
  const at::Tensor h0 = at::randn({16, 64});
  for (auto _ : state) {
    tdfx::ExportedProgram program = tdfx::export_program(seq, {{"h0", h0}});
    benchmark::DoNotOptimize(program);
  }
}
BENCHMARK(BM_ExportChain)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

/// Seed 002's pipeline with handles to its Net and Masker, and its batch-32 input.
struct Seed002 {
  Seed002() : seq(tdfx::samples::seed_sequential()), input(tdfx::samples::seed_sequential_input()) {
    const auto& children = seq->children_modules();
    net = std::dynamic_pointer_cast<tdfx::samples::NetImpl>(
        std::dynamic_pointer_cast<tdfx::TensorDictModule>(children.at(0))->inner_ptr());
    masker = std::dynamic_pointer_cast<tdfx::samples::MaskerImpl>(
        std::dynamic_pointer_cast<tdfx::TensorDictModule>(children.at(1))->inner_ptr());
    if (!net || !masker) throw std::runtime_error("seed 002: unexpected children");
  }
  std::shared_ptr<tdfx::TensorDictSequential> seq;
  tdfx::TensorDict input;
  std::shared_ptr<tdfx::samples::NetImpl> net;
  std::shared_ptr<tdfx::samples::MaskerImpl> masker;
};

void BM_Seed002_GraphModule(benchmark::State& state) {
  const Seed002 seed;
  const auto gm = tdfx::symbolic_trace(seed.seq, seed.input);
  for (auto _ : state) {
    tdfx::TensorDict td(seed.input);
    gm.forward(td);
    benchmark::DoNotOptimize(td);
  }
}
BENCHMARK(BM_Seed002_GraphModule)->Unit(benchmark::kMicrosecond);

// The graph alone: reads the input keys and returns the outputs as tensors,
// without copying or writing a TensorDict (what the direct calls compare with).
void BM_Seed002_GraphModuleRun(benchmark::State& state) {
  const Seed002 seed;
  const auto gm = tdfx::symbolic_trace(seed.seq, seed.input);
  for (auto _ : state) {
    auto outputs = gm.run(seed.input);
    benchmark::DoNotOptimize(outputs);
  }
}
BENCHMARK(BM_Seed002_GraphModuleRun)->Unit(benchmark::kMicrosecond);

void BM_Seed002_Eager(benchmark::State& state) {
  const Seed002 seed;
  for (auto _ : state) {
    tdfx::TensorDict td(seed.input);
    seed.seq->forward(td);
    benchmark::DoNotOptimize(td);
  }
}
BENCHMARK(BM_Seed002_Eager)->Unit(benchmark::kMicrosecond);

void BM_Seed002_Direct(benchmark::State& state) {
  const Seed002 seed;
  const at::Tensor x = seed.input.get({"input", "x"});
  const at::Tensor mask = seed.input.get({"input", "mask"});
  for (auto _ : state) {
    at::Tensor hidden = seed.net->fc2(at::relu(seed.net->fc1(x)));
    at::Tensor probabilities = at::softmax(hidden * mask, 1);
    benchmark::DoNotOptimize(probabilities);
  }
}
BENCHMARK(BM_Seed002_Direct)->Unit(benchmark::kMicrosecond);

// The traced chain run beside what it came from (issue 21 §4), on one chain and input:
// the TDGraphModule writing every key into a copy of the TensorDict, the eager
// TensorDictSequential doing the same, the traced plan alone (run(): tensors in, tensors
// out), and the links called directly. Goals: GraphModule at most Eager; Run within 1.05× of
// Direct.
void BM_ChainForward_GraphModule(benchmark::State& state) {
  const tdfx::bench::TracedChain run(state.range(0));
  for (auto _ : state) {
    tdfx::TensorDict td(run.input);
    run.gm.forward(td);
    benchmark::DoNotOptimize(td);
  }
}
BENCHMARK(BM_ChainForward_GraphModule)->Arg(1000)->Unit(benchmark::kMillisecond);

void BM_ChainForward_Eager(benchmark::State& state) {
  const tdfx::bench::TracedChain run(state.range(0));
  for (auto _ : state) {
    tdfx::TensorDict td(run.input);
    run.chain.pipeline->forward(td);
    benchmark::DoNotOptimize(td);
  }
}
BENCHMARK(BM_ChainForward_Eager)->Arg(1000)->Unit(benchmark::kMillisecond);

void BM_ChainForward_Run(benchmark::State& state) {
  const tdfx::bench::TracedChain run(state.range(0));
  for (auto _ : state) {
    auto outputs = run.gm.run(run.input);
    benchmark::DoNotOptimize(outputs);
  }
}
BENCHMARK(BM_ChainForward_Run)->Arg(1000)->Unit(benchmark::kMillisecond);

void BM_ChainForward_Direct(benchmark::State& state) {
  tdfx::bench::TracedChain run(state.range(0));
  const at::Tensor h0 = run.input.get("h0");
  for (auto _ : state) {
    // Every intermediate kept, as the graph returns every key.
    std::vector<at::Tensor> outputs;
    outputs.reserve(run.chain.links.size());
    at::Tensor h = h0;
    for (auto& link : run.chain.links) outputs.push_back(h = link->forward(h));
    benchmark::DoNotOptimize(outputs);
  }
}
BENCHMARK(BM_ChainForward_Direct)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
