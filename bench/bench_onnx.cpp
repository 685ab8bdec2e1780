// ONNX export: the time to turn chain_1000's exported program into a checked ONNX model
// (onnx_model: conversion, check_model and strict shape inference), and the time of one run of
// the same program in tdfx's GraphModule and in ONNX Runtime (onnxruntime-node, through
// tests/onnx/run_onnx.js; scripts/bootstrap.sh --test installs it), with as many intra-op
// threads as LibTorch uses. ONNX Runtime's time is the mean of its own timed runs, measured in
// Node.js, so it includes the JavaScript binding's cost per run and not the process's start.
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/chain_pipeline.h"
#include "samples/pipelines.h"
#include "tdfx/export/program.h"
#include "tdfx/onnx/onnx_export.h"
#include "tests/onnx/ort_runner.h"

namespace {

using tdfx::testing::NamedTensors;

/// A program to run both ways: exported, its inputs by graph input name, written as ONNX.
struct Subject {
  Subject(const tdfx::TensorDictModuleBasePtr& module, NamedTensors in)
      : inputs(std::move(in)), program(tdfx::export_program(module, inputs)), dir("bench_onnx") {
    model = (dir / "model.onnx").string();
    tdfx::save_onnx(program, model);
  }
  NamedTensors inputs;
  tdfx::ExportedProgram program;
  tdfx::testing::ScratchDir dir;
  std::string model;
};

Subject& chain_1000() {
  static Subject subject(tdfx::bench::chain(1000).pipeline,
                         {{"h0", tdfx::bench::chain_input().get("h0")}});
  return subject;
}

Subject& seed_000() {
  at::manual_seed(0);
  static Subject subject(tdfx::samples::seed_000_model(), {{"x", at::randn({1, 3})}});
  return subject;
}

void BM_OnnxExportChain1000(benchmark::State& state) {
  const auto& program = chain_1000().program;
  for (auto _ : state) {
    std::string bytes = tdfx::onnx_model(program);
    benchmark::DoNotOptimize(bytes);
  }
}

void run_in_tdfx(benchmark::State& state, Subject& subject) {
  const auto module = subject.program.module();
  for (auto _ : state) {
    auto out = module(subject.inputs);
    benchmark::DoNotOptimize(out);
  }
}

/// One benchmark iteration is one Node.js process timing `kTimedRuns` runs; the iteration's
/// (manual) time is their mean.
void run_in_ort(benchmark::State& state, Subject& subject) {
  constexpr int kTimedRuns = 200;
  const tdfx::testing::OrtRunOptions options{kTimedRuns, at::get_num_threads()};
  for (auto _ : state) {
    const auto result = tdfx::testing::run_in_ort(subject.model, subject.inputs, options);
    state.SetIterationTime(result.ns_per_run * 1e-9);
  }
}

/// The chain's links called directly, eager LibTorch: the floor for both.
void BM_EagerChain1000(benchmark::State& state) {
  static auto links = tdfx::bench::chain(1000).links;
  const at::Tensor x = chain_1000().inputs[0].second;
  for (auto _ : state) {
    at::Tensor y = x;
    for (auto& link : links) y = link->forward(y);
    benchmark::DoNotOptimize(y);
  }
}

void BM_TdfxRunChain1000(benchmark::State& state) { run_in_tdfx(state, chain_1000()); }
void BM_OrtRunChain1000(benchmark::State& state) { run_in_ort(state, chain_1000()); }
void BM_TdfxRunSeed000(benchmark::State& state) { run_in_tdfx(state, seed_000()); }
void BM_OrtRunSeed000(benchmark::State& state) { run_in_ort(state, seed_000()); }

}  // namespace

BENCHMARK(BM_OnnxExportChain1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EagerChain1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TdfxRunChain1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OrtRunChain1000)->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TdfxRunSeed000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OrtRunSeed000)->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
