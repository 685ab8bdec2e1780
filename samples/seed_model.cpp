// Seed 000 ("Exporting tensordict modules"): builds the tutorial's model in C++, calls it with a
// plain tensor as keyword argument, selects the "loc" output and calls it again. The model is
// written out here as the tutorial writes it; samples::seed_000_model() (samples/pipelines.h) is
// the same model for the other samples and the tests.

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <iostream>

#include "tdfx/tensordict/modules.h"

namespace {

void print_outputs(const tdfx::TensorDictModuleBase& model, const std::vector<at::Tensor>& outs) {
  const auto& keys = model.selected_out_keys();
  for (size_t i = 0; i < outs.size(); ++i) std::cout << keys[i] << ":\n" << outs[i] << "\n";
}

}  // namespace

int main() {
  using tdfx::make_td_module;
  auto model = tdfx::make_td_sequential({
      // 1. A small network for embedding
      make_td_module(torch::nn::Linear(3, 4), {"x"}, {"hidden"}),
      make_td_module(torch::nn::ReLU(), {"hidden"}, {"hidden"}),
      make_td_module(torch::nn::Linear(4, 4), {"hidden"}, {"latent"}),
      // 2. Extracting params (splits into loc and scale)
      make_td_module(tdfx::NormalParamExtractor(), {"latent"}, {"loc", "scale"}),
  });

  at::manual_seed(0);  // torch::manual_seed(0)
  at::Tensor x = at::randn({1, 3});
  std::cout << "in_keys: " << tdfx::repr(model->in_keys())
            << "\nout_keys: " << tdfx::repr(model->out_keys()) << "\n";
  print_outputs(*model, model->call({}, {{"x", x}}));

  model->select_out_keys("loc");
  std::cout << "\nafter select_out_keys('loc'):\n";
  print_outputs(*model, model->call({}, {{"x", x}}));

  model->reset_out_keys();
  return 0;
}
