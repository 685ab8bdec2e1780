// The Watch's cost, side by side with the same training step unwatched.
//
// BM_TrainStep/P/M: one step of training — forward, loss, zero_grad, backward, Adam — of
// pipeline P (0: the chain of 100 relu(Linear(64, 64)) links of samples/chain.h at batch
// 16; 1: the PPO-style actor-critic of samples/pipelines.h at batch 16), watched M: 0 not, 1
// at the default intervals (statistics every 100 steps, histograms every 1000, in memory),
// 2 every step with histograms every step, to TensorBoard event files in a temporary folder.
// Goals: M = 1 within 1.05× of M = 0; M = 2 within 2×.
#include <ATen/ops/randn.h>
#include <benchmark/benchmark.h>
#include <torch/optim/adam.h>

#include <filesystem>

#include "bench/chain_pipeline.h"
#include "samples/pipelines.h"
#include "tdfx/debug/watch.h"

namespace {

struct Setup {
  std::shared_ptr<tdfx::TensorDictSequential> pipeline;
  tdfx::TensorDict input;
  std::function<at::Tensor(const tdfx::TensorDict&)> loss;
};

Setup setup(int64_t which) {
  at::manual_seed(0);
  if (which == 0) {
    auto chain = tdfx::bench::chain(100);
    return {chain.pipeline, tdfx::bench::chain_input(),
            [](const tdfx::TensorDict& td) { return td.get("h100").pow(2).mean(); }};
  }
  auto pipeline = tdfx::samples::actor_critic();
  pipeline->train();
  return {pipeline, tdfx::samples::actor_critic_input(), [](const tdfx::TensorDict& td) {
            return td.get({"agent", "action"}).pow(2).mean() +
                   td.get({"critic", "value"}).pow(2).mean();
          }};
}

void BM_TrainStep(benchmark::State& state) {
  Setup s = setup(state.range(0));
  torch::optim::Adam optimizer(s.pipeline->parameters(), torch::optim::AdamOptions(1e-4));
  const int64_t mode = state.range(1);
  const std::filesystem::path logdir =
      std::filesystem::temp_directory_path() / ("tdfx_bench_watch_" + std::to_string(getpid()));
  std::unique_ptr<tdfx::Watch> watch;
  if (mode > 0) {
    tdfx::WatchOptions options;
    if (mode == 2) {
      options.interval = 1;
      options.histogram_interval = 1;
      options.logdir = logdir.string();
    }
    watch = std::make_unique<tdfx::Watch>(s.pipeline, options);
  }
  int64_t step = 0;
  for (auto _ : state) {
    tdfx::TensorDict td = s.input;  // a copy of its structure: the inputs are shared
    s.pipeline->forward(td);
    const at::Tensor loss = s.loss(td);
    optimizer.zero_grad();
    loss.backward();
    if (watch) benchmark::DoNotOptimize(watch->observe(step, td, loss));
    optimizer.step();
    ++step;
  }
  watch.reset();
  std::error_code ignored;
  std::filesystem::remove_all(logdir, ignored);
}
// BM_Moments / BM_Histogram: what the watch takes of each tensor, over 2^20 floats of a normal
// distribution — the moments alone, then with 30 histogram buckets (moments and buckets).
void BM_Moments(benchmark::State& state) {
  const at::Tensor values = at::randn({1 << 20});
  for (auto _ : state) benchmark::DoNotOptimize(tdfx::detail::moments_of(values));
  state.SetItemsProcessed(state.iterations() * values.numel());
}
BENCHMARK(BM_Moments)->Unit(benchmark::kMicrosecond);

void BM_Histogram(benchmark::State& state) {
  const at::Tensor values = at::randn({1 << 20});
  for (auto _ : state) {
    benchmark::DoNotOptimize(tdfx::histogram_from(values, tdfx::detail::moments_of(values)));
  }
  state.SetItemsProcessed(state.iterations() * values.numel());
}
BENCHMARK(BM_Histogram)->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_TrainStep)
    ->ArgsProduct({{0, 1}, {0, 1, 2}})
    ->ArgNames({"pipeline", "watched"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
