#pragma once
// Pipelines whose sizes are functions of the batch: attention reshapes to [T, B*heads, d],
// and a time-distributed head to [B*T, E]. A dynamic trace runs them at any batch (issue 37;
// tests/tracer, tests/export, tests/onnx, the demo's archive for the Python loader).

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/transformerlayer.h>

#include <string>
#include <utility>
#include <vector>

#include "tdfx/tensordict/modules.h"

namespace tdfx::samples {

/// Self-attention over batch-first [B, T, E], as RL pipelines keep their tensors, through
/// LibTorch's sequence-first MultiheadAttention.
struct SelfAttentionImpl : torch::nn::Module {
  SelfAttentionImpl(int64_t embed, int64_t heads)
      : mha(register_module("mha", torch::nn::MultiheadAttention(embed, heads))) {}
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor t = x.transpose(0, 1);
    return std::get<0>(mha->forward(t, t, t)).transpose(0, 1);
  }
  torch::nn::MultiheadAttention mha;
};
TORCH_MODULE(SelfAttention);

/// A TransformerEncoderLayer over batch-first [B, T, E].
struct EncoderBlockImpl : torch::nn::Module {
  EncoderBlockImpl(int64_t embed, int64_t heads)
      : layer(register_module("layer", torch::nn::TransformerEncoderLayer(
                                           torch::nn::TransformerEncoderLayerOptions(embed, heads)
                                               .dim_feedforward(16)
                                               .dropout(0.0)))) {}
  at::Tensor forward(const at::Tensor& x) {
    return layer->forward(x.transpose(0, 1)).transpose(0, 1);
  }
  torch::nn::TransformerEncoderLayer layer;
};
TORCH_MODULE(EncoderBlock);

/// A TransformerDecoderLayer over batch-first [B, T, E], attending to its own input.
struct DecoderBlockImpl : torch::nn::Module {
  DecoderBlockImpl(int64_t embed, int64_t heads)
      : layer(register_module("layer", torch::nn::TransformerDecoderLayer(
                                           torch::nn::TransformerDecoderLayerOptions(embed, heads)
                                               .dim_feedforward(16)
                                               .dropout(0.0)))) {}
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor t = x.transpose(0, 1);
    return layer->forward(t, t).transpose(0, 1);
  }
  torch::nn::TransformerDecoderLayer layer;
};
TORCH_MODULE(DecoderBlock);

/// A Linear applied at every step: [B, T, E] reshaped to [B*T, E] and back.
struct TimeDistributedImpl : torch::nn::Module {
  explicit TimeDistributedImpl(int64_t embed)
      : linear(register_module("linear", torch::nn::Linear(embed, embed))) {}
  at::Tensor forward(const at::Tensor& x) {
    const int64_t batch = x.size(0), steps = x.size(1);
    return linear(x.reshape({batch * steps, -1})).relu().reshape({batch, steps, -1});
  }
  torch::nn::Linear linear;
};
TORCH_MODULE(TimeDistributed);

/// The embedding size and steps of the pipelines' input "obs": [B, kSteps, kEmbed].
constexpr int64_t kEmbed = 8;
constexpr int64_t kSteps = 5;

/// Each pipeline, by name, reading "obs" and writing "y", in eval mode.
inline std::vector<std::pair<std::string, TensorDictModulePtr>> batch_sized_pipelines() {
  std::vector<std::pair<std::string, TensorDictModulePtr>> out = {
      {"multihead_attention", make_td_module(SelfAttention(kEmbed, 2), {"obs"}, {"y"})},
      {"transformer_encoder_layer", make_td_module(EncoderBlock(kEmbed, 2), {"obs"}, {"y"})},
      {"transformer_decoder_layer", make_td_module(DecoderBlock(kEmbed, 2), {"obs"}, {"y"})},
      {"reshape_batch_times_steps", make_td_module(TimeDistributed(kEmbed), {"obs"}, {"y"})},
  };
  for (auto& [name, module] : out) module->eval();
  return out;
}

/// "obs" at batch `batch`.
inline TensorDict batch_sized_input(int64_t batch) {
  return TensorDict({{"obs", at::randn({batch, kSteps, kEmbed})}}, {batch});
}

}  // namespace tdfx::samples
