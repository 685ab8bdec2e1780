// Errors while running a traced or exported graph name what the user sees:
// the printed node and its module, LibTorch's message without a backtrace.
#include <doctest/doctest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tests/support/test_support.h"

using namespace tdfx;

TEST_CASE("run errors: a failure inside an outlined leaf names the call_module node") {
  auto pipeline = samples::seed_sequential();
  TDGraphModule gm = symbolic_trace(pipeline, samples::seed_sequential_input());
  // fc1's weight made double after the trace: the inputs are as traced, fc1's matmul fails.
  {
    at::NoGradGuard no_grad;
    at::Tensor weight = pipeline->named_parameters()["module.0.module.fc1.weight"];
    weight.set_data(weight.to(at::kDouble));
  }
  std::string message;
  try {
    gm.run(samples::seed_sequential_input());
  } catch (const RunError& e) {
    message = e.what();
  }
  CHECK(message ==
        "while executing %_0_fc1 = call_module[0.module.fc1](%getitem,): self and mat2 must "
        "have the same dtype");
}

TEST_CASE("run errors: a key whose other dimensions differ from the trace is a ShapeError") {
  TDGraphModule gm = symbolic_trace(samples::seed_sequential(), samples::seed_sequential_input());
  TensorDict wrong({{{"input", "x"}, at::randn({32, 7})}, {{"input", "mask"}, at::ones({32, 10})}},
                   {32});
  CHECK_THROWS_WITH_AS(gm.run(wrong),
                       "input ('input', 'x') has shape [32, 7]; the graph was traced with static "
                       "shapes [32, 100]: trace with TraceOptions::dynamic_batch (export_program: "
                       "ExportOptions::dynamic_batch) for a batch size that varies",
                       ShapeError);
}

TEST_CASE("run errors: an input of another dtype than traced is a ShapeError naming it") {
  // The graph holds the traced dtype in its constants (`ones(..., x.options())`): a half
  // input would compute in float32, unlike eager.
  TDGraphModule gm = symbolic_trace(samples::seed_sequential(), samples::seed_sequential_input());
  TensorDict wrong(
      {{{"input", "x"}, at::randn({32, 100}, at::kHalf)}, {{"input", "mask"}, at::ones({32, 10})}},
      {32});
  CHECK_THROWS_WITH_AS(gm.run(wrong),
                       "input ('input', 'x') is float16; the graph was traced with float32, and "
                       "the dtypes it computes in are constants of the graph: convert the input, "
                       "or trace with this dtype",
                       ShapeError);
}

TEST_CASE("run errors: no message prints a tensor's values") {
  const std::string message = library_message(c10::Error(
      "Cannot insert a Tensor that requires grad as a constant.\nTensor:\n 0.1 0.2\n 0.3 0.4\n",
      ""));
  CHECK(message ==
        "Cannot insert a Tensor that requires grad as a constant. (tensor values omitted)");
}

TEST_CASE("run errors: tdfx run's passes start from the archive's state, a NaN input found first") {
  // BatchNorm in training mode writes its running statistics, a Dropout draws: neither the
  // printed run nor the saved one may leave NaN in a buffer for --find-nonfinite to blame.
  at::manual_seed(22);
  auto pipeline = make_td_sequential(
      {make_td_module(torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4),
                                            torch::nn::Dropout(0.5)),
                      {"x"}, {"h"})});
  pipeline->train(true);
  const tdfx::testing::ScratchDir dir("tdfx_run_state");
  save(export_program(pipeline, {{"x", at::randn({6, 3})}}), (dir / "p.pt2").string());
  const auto made = tdfx::testing::run_command(
      "/usr/bin/python3 -c \"import sys, torch; x = torch.randn(6, 3); x[2, 1] = float('nan'); "
      "torch.save({'x': x}, sys.argv[1])\" '" +
      (dir / "x.pt").string() + "' 2>&1");
  REQUIRE_MESSAGE(made.status == 0,
                  "Python's torch (Debian python3-torch) is required: " << made.out);
  const auto run = tdfx::testing::run_command(
      "cd '" + dir.path().string() + "' && '" + tdfx::testing::bin_dir() +
      "/tdfx' run p.pt2 --input x=x.pt --save s.pt --stats --find-nonfinite 2>&1");
  INFO(run.out);
  CHECK(run.status == 3);
  CHECK(run.out.find("first non-finite value: %x ") != std::string::npos);
}
