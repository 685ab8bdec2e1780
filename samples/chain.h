#pragma once
// The chain pipeline of the benchmarks and of the page at scale: a TensorDictSequential of N
// links relu(Linear(64, 64)), link i reading "h{i}" and writing "h{i+1}", on a 16×64 input.

#include <ATen/ops/relu.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <vector>

#include "tdfx/tensordict/modules.h"

namespace tdfx::samples {

/// relu(fc(x)), fc = Linear(64, 64): one link of the chain.
struct ChainLinkImpl : torch::nn::Module {
  ChainLinkImpl() { fc = register_module("fc", torch::nn::Linear(64, 64)); }
  at::Tensor forward(const at::Tensor& x) { return at::relu(fc(x)); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ChainLink);

/// The chain's links, to call them directly.
struct Chain {
  std::vector<ChainLink> links;
  std::shared_ptr<TensorDictSequential> pipeline;
};

/// A chain of `length` links.
inline Chain chain(int64_t length) {
  Chain out;
  std::vector<TensorDictModuleBasePtr> modules;
  modules.reserve(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i) {
    out.links.emplace_back();
    modules.push_back(
        make_td_module(out.links.back(), {"h" + std::to_string(i)}, {"h" + std::to_string(i + 1)}));
  }
  out.pipeline = std::make_shared<TensorDictSequential>(std::move(modules));
  return out;
}

/// The chain's input: "h0", 16×64.
inline TensorDict chain_input() { return TensorDict({{"h0", at::randn({16, 64})}}, {16}); }

}  // namespace tdfx::samples
