// A program that links tdfx::tracer alone: it traces a two-module pipeline and prints its graph.
#include <fmt/format.h>
#include <tdfx/tensordict/modules.h>
#include <tdfx/tracer/symbolic_trace.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

int main() {
  torch::manual_seed(0);
  auto pipeline =
      tdfx::make_td_sequential({tdfx::make_td_module(torch::nn::Linear(3, 4), {"x"}, {"hidden"}),
                                tdfx::make_td_module(torch::nn::ReLU(), {"hidden"}, {"y"})});
  tdfx::TensorDict td({{"x", at::randn({2, 3})}}, {2});
  fmt::print("{}\n", tdfx::symbolic_trace(pipeline, td).graph());
}
