// Traces a one-module pipeline with the installed tdfx and prints its graph.
#include <torch/nn/modules/activation.h>

#include <iostream>

#include "tensordict/modules.h"
#include "tracer/symbolic_trace.h"

int main() {
  auto module = tdfx::make_td_module(torch::nn::ReLU(), {"x"}, {"y"});
  tdfx::TensorDict td({{"x", at::randn({2, 3})}}, {2});
  tdfx::TDGraphModule traced = tdfx::symbolic_trace(module, td);
  std::cout << traced.graph() << "\n";
  return 0;
}
