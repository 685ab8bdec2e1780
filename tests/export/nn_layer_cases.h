#pragma once
// Every torch::nn module type of LibTorch 1.13 as a test case (tests/export/test_nn_layers.cpp
// runs each through trace, run, export, load and drawing; tests/onnx/test_onnx.cpp writes each
// as ONNX and runs it in ONNX Runtime): the layer, in its two forms, its inputs at any batch,
// its output keys, and what refuses it.
#include <doctest/doctest.h>
// LibTorch 1.13's modules/instancenorm.h uses the functional without including it.
#include <torch/nn/functional/instancenorm.h>
#include <torch/nn/modules.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/tensordict/modules.h"

namespace tdfx::testing::nn_layers {

namespace nn = torch::nn;

/// A user module calling `layer` with whatever it is given, as a C++ user writes one.
template <typename Layer>
struct UserModule : nn::Module {
  explicit UserModule(Layer l) : layer(register_module("layer", std::move(l))) {}
  template <typename... A>
  auto forward(A&&... args) -> decltype(std::declval<Layer&>()->forward(std::forward<A>(args)...)) {
    return layer->forward(std::forward<A>(args)...);
  }
  Layer layer;
};

/// A user module calling AdaptiveLogSoftmaxWithLoss::log_prob.
struct LogProbImpl : nn::Module {
  LogProbImpl()
      : softmax(register_module(
            "softmax", nn::AdaptiveLogSoftmaxWithLoss(
                           nn::AdaptiveLogSoftmaxWithLossOptions(6, 8, {4}).div_value(2.)))) {}
  at::Tensor forward(const at::Tensor& x) { return softmax->log_prob(x); }
  nn::AdaptiveLogSoftmaxWithLoss softmax;
};
TORCH_MODULE(LogProb);

/// A user module holding the containers that have no forward of their own.
struct ContainersNetImpl : nn::Module {
  ContainersNetImpl() {
    list = register_module("list", nn::ModuleList(nn::Linear(6, 6), nn::ReLU()));
    dict = register_module(
        "dict", nn::ModuleDict(std::vector<std::pair<std::string, std::shared_ptr<Module>>>{
                    {"out", nn::Linear(6, 3).ptr()}}));
    params = register_module("params", nn::ParameterList(at::randn({6})));
    named = register_module("named", nn::ParameterDict());
    named->insert("scale", at::randn({3}));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h =
        list[1]->as<nn::ReLU>()->forward(list[0]->as<nn::Linear>()->forward(x * params[0]));
    return dict["out"]->as<nn::Linear>()->forward(h) * named["scale"];
  }
  nn::ModuleList list{nullptr};
  nn::ModuleDict dict{nullptr};
  nn::ParameterList params{nullptr};
  nn::ParameterDict named{nullptr};
};
TORCH_MODULE(ContainersNet);

/// One input of a case: its key and its value at a batch size.
struct Input {
  std::string key;
  std::function<at::Tensor(int64_t batch)> make;
};

using ModuleMaker = std::function<TensorDictModuleBasePtr(bool in_user_module)>;

struct LayerCase {
  std::string name;
  ModuleMaker module;
  std::vector<Input> inputs;
  std::vector<std::string> outputs;
  /// The TensorDict's batch is the inputs' dim 0; false when some input or output has the
  /// batch elsewhere (sequence-first layers, losses), then the TensorDict has no batch dims.
  bool batched = true;
  bool train = false;
  /// Where a case that must be refused is: at the trace (a TraceError) or when the exported
  /// program is loaded (an ArchiveError); with the message, `{module}` standing for the
  /// traced module's describe().
  enum class Refused { kNo, kAtTrace, kAtLoad } refused = Refused::kNo;
  std::string refusal;
};

template <typename Layer>
ModuleMaker wrap(std::function<Layer()> make, std::vector<std::string> in,
                 std::vector<std::string> out) {
  return [=](bool in_user_module) -> TensorDictModuleBasePtr {
    std::vector<NestedKey> in_keys(in.begin(), in.end());
    std::vector<NestedKey> out_keys(out.begin(), out.end());
    if (!in_user_module) return make_td_module(make(), in_keys, out_keys);
    return make_td_sequential(
        {make_td_module(std::make_shared<UserModule<Layer>>(make()), in_keys, out_keys)});
  };
}

inline Input normal(const std::string& key, std::vector<int64_t> rest) {
  return {key, [rest](int64_t batch) {
            std::vector<int64_t> sizes{batch};
            sizes.insert(sizes.end(), rest.begin(), rest.end());
            return at::randn(sizes);
          }};
}

/// Builds cases with fewer words: `add<nn::Linear>("Linear", [] { return nn::Linear(4, 3); },
/// {normal("x", {4})})`.
class Cases {
 public:
  template <typename Layer, typename Make>
  Cases& add(const std::string& name, Make make, std::vector<Input> inputs,
             std::vector<std::string> outputs = {"y"}, bool batched = true) {
    std::vector<std::string> in;
    for (const Input& input : inputs) in.push_back(input.key);
    LayerCase layer;
    layer.name = name;
    layer.module = wrap<Layer>(std::function<Layer()>(make), in, outputs);
    layer.inputs = std::move(inputs);
    layer.outputs = std::move(outputs);
    layer.batched = batched;
    cases_.push_back(std::move(layer));
    return *this;
  }
  /// As add, in train mode and in eval mode.
  template <typename Layer, typename Make>
  Cases& both(const std::string& name, Make make, std::vector<Input> inputs,
              std::vector<std::string> outputs = {"y"}, bool batched = true) {
    add<Layer>(name + " eval", make, inputs, outputs, batched);
    add<Layer>(name + " train", make, inputs, outputs, batched);
    cases_.back().train = true;
    return *this;
  }
  /// The last case added must be refused, with `message`.
  Cases& refused(LayerCase::Refused where, std::string message) {
    cases_.back().refused = where;
    cases_.back().refusal = std::move(message);
    return *this;
  }
  std::vector<LayerCase> take() { return std::move(cases_); }

 private:
  std::vector<LayerCase> cases_;
};

// Inputs that are not plain normal tensors.
inline Input uniform(const std::string& key, std::vector<int64_t> rest, double low, double high) {
  return {key, [=](int64_t batch) {
            std::vector<int64_t> sizes{batch};
            sizes.insert(sizes.end(), rest.begin(), rest.end());
            return at::rand(sizes) * (high - low) + low;
          }};
}
inline Input classes(const std::string& key, int64_t count, std::vector<int64_t> rest = {}) {
  return {key, [=](int64_t batch) {
            std::vector<int64_t> sizes{batch};
            sizes.insert(sizes.end(), rest.begin(), rest.end());
            return at::randint(count, sizes);
          }};
}
inline Input signs(const std::string& key) {
  return {key, [](int64_t batch) { return at::randint(2, {batch}).mul(2).sub(1).to(at::kFloat); }};
}
/// A sequence-first input `[length, batch, rest…]`.
inline Input sequence_first(const std::string& key, int64_t length, std::vector<int64_t> rest) {
  return {key, [=](int64_t batch) {
            std::vector<int64_t> sizes{length, batch};
            sizes.insert(sizes.end(), rest.begin(), rest.end());
            return at::randn(sizes);
          }};
}
/// A recurrent state `[layers, batch, hidden]`.
inline Input state(const std::string& key, int64_t layers, int64_t hidden) {
  return {key, [=](int64_t batch) { return at::randn({layers, batch, hidden}); }};
}

// Max-pool indices of a random input, as MaxUnpool takes them with that input's pooled
// values: (values, indices).
template <typename Pool>
std::pair<Input, Input> pooled(Pool pool, std::vector<int64_t> rest) {
  auto make = [pool, rest](int64_t batch) mutable {
    at::manual_seed(batch);
    std::vector<int64_t> sizes{batch};
    sizes.insert(sizes.end(), rest.begin(), rest.end());
    return pool->forward_with_indices(at::randn(sizes));
  };
  return {{"x", [make](int64_t b) mutable { return std::get<0>(make(b)); }},
          {"indices", [make](int64_t b) mutable { return std::get<1>(make(b)); }}};
}

inline std::vector<LayerCase> layer_cases() {
  Cases c;
  const std::vector<int64_t> seq{3, 6}, image{3, 6, 6}, volume{2, 4, 4, 4};
  const auto x1 = normal("x", seq), x2 = normal("x", image), x3 = normal("x", volume);
  const auto flat = normal("x", {6});
  // Activations.
  c.add<nn::CELU>("CELU", [] { return nn::CELU(); }, {x2});
  c.add<nn::ELU>("ELU", [] { return nn::ELU(); }, {x2});
  c.add<nn::GELU>("GELU", [] { return nn::GELU(); }, {x2});
  c.add<nn::GLU>("GLU", [] { return nn::GLU(); }, {x2});
  c.add<nn::Hardshrink>("Hardshrink", [] { return nn::Hardshrink(); }, {x2});
  c.add<nn::Hardtanh>("Hardtanh", [] { return nn::Hardtanh(); }, {x2});
  c.add<nn::LeakyReLU>("LeakyReLU", [] { return nn::LeakyReLU(); }, {x2});
  c.add<nn::LogSigmoid>("LogSigmoid", [] { return nn::LogSigmoid(); }, {x2});
  c.add<nn::LogSoftmax>("LogSoftmax", [] { return nn::LogSoftmax(1); }, {x2});
  c.add<nn::Mish>("Mish", [] { return nn::Mish(); }, {x2});
  c.add<nn::PReLU>("PReLU", [] { return nn::PReLU(); }, {x2});
  c.add<nn::ReLU>("ReLU", [] { return nn::ReLU(); }, {x2});
  c.add<nn::ReLU6>("ReLU6", [] { return nn::ReLU6(); }, {x2});
  c.both<nn::RReLU>("RReLU", [] { return nn::RReLU(); }, {x2});
  c.add<nn::SELU>("SELU", [] { return nn::SELU(); }, {x2});
  c.add<nn::SiLU>("SiLU", [] { return nn::SiLU(); }, {x2});
  c.add<nn::Sigmoid>("Sigmoid", [] { return nn::Sigmoid(); }, {x2});
  c.add<nn::Softmax>("Softmax", [] { return nn::Softmax(1); }, {x2});
  c.add<nn::Softmax2d>("Softmax2d", [] { return nn::Softmax2d(); }, {x2});
  c.add<nn::Softmin>("Softmin", [] { return nn::Softmin(1); }, {x2});
  c.add<nn::Softplus>("Softplus", [] { return nn::Softplus(); }, {x2});
  c.add<nn::Softshrink>("Softshrink", [] { return nn::Softshrink(); }, {x2});
  c.add<nn::Softsign>("Softsign", [] { return nn::Softsign(); }, {x2});
  c.add<nn::Tanh>("Tanh", [] { return nn::Tanh(); }, {x2});
  c.add<nn::Tanhshrink>("Tanhshrink", [] { return nn::Tanhshrink(); }, {x2});
  c.add<nn::Threshold>("Threshold", [] { return nn::Threshold(0.1, 20.0); }, {x2});
  c.add<nn::MultiheadAttention>(
      "MultiheadAttention self", [] { return nn::MultiheadAttention(6, 2); },
      {sequence_first("q", 5, {6}), sequence_first("q", 5, {6}), sequence_first("q", 5, {6})},
      {"y", "weights"}, false);
  c.add<nn::MultiheadAttention>(
      "MultiheadAttention cross", [] { return nn::MultiheadAttention(6, 2); },
      {sequence_first("q", 5, {6}), sequence_first("kv", 4, {6}), sequence_first("kv", 4, {6})},
      {"y", "weights"}, false);
  c.both<nn::MultiheadAttention>(
      "MultiheadAttention separate",
      [] { return nn::MultiheadAttention(nn::MultiheadAttentionOptions(6, 2).dropout(0.5)); },
      {sequence_first("q", 5, {6}), sequence_first("k", 4, {6}), sequence_first("v", 4, {6})},
      {"y", "weights"}, false);
  // Normalisation.
  c.both<nn::BatchNorm1d>("BatchNorm1d", [] { return nn::BatchNorm1d(3); }, {x1});
  c.both<nn::BatchNorm2d>("BatchNorm2d", [] { return nn::BatchNorm2d(3); }, {x2});
  c.both<nn::BatchNorm3d>("BatchNorm3d", [] { return nn::BatchNorm3d(2); }, {x3});
  c.both<nn::InstanceNorm1d>(
      "InstanceNorm1d",
      [] { return nn::InstanceNorm1d(nn::InstanceNorm1dOptions(3).track_running_stats(true)); },
      {x1});
  c.add<nn::InstanceNorm2d>("InstanceNorm2d", [] { return nn::InstanceNorm2d(3); }, {x2});
  c.add<nn::InstanceNorm3d>("InstanceNorm3d", [] { return nn::InstanceNorm3d(2); }, {x3});
  c.add<nn::GroupNorm>("GroupNorm", [] { return nn::GroupNorm(1, 3); }, {x2});
  c.add<nn::LayerNorm>("LayerNorm", [] { return nn::LayerNorm(nn::LayerNormOptions({6})); }, {x1});
  c.add<nn::LocalResponseNorm>("LocalResponseNorm", [] { return nn::LocalResponseNorm(2); }, {x2});
  c.add<nn::CrossMapLRN2d>("CrossMapLRN2d", [] { return nn::CrossMapLRN2d(3); }, {x2})
      .refused(LayerCase::Refused::kAtTrace,
               "{module}: torch::nn::CrossMapLRN2d{at} cannot be traced: LibTorch computes it in "
               "a custom autograd function whose forward creates tensors the trace cannot "
               "follow. Write the normalisation with tensor ops in a module of your own "
               "(torch::nn::LocalResponseNorm is a traceable cross-channel normalisation, with a "
               "different scaling)");
  // Convolutions.
  c.add<nn::Conv1d>("Conv1d", [] { return nn::Conv1d(3, 2, 3); }, {x1});
  c.add<nn::Conv2d>("Conv2d", [] { return nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)); },
                    {x2});
  c.add<nn::Conv2d>(
      "Conv2d reflect",
      [] {
        return nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1).padding_mode(torch::kReflect));
      },
      {x2});
  c.add<nn::Conv2d>(
      "Conv2d circular",
      [] {
        return nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1).padding_mode(torch::kCircular));
      },
      {x2});
  c.add<nn::Conv3d>("Conv3d", [] { return nn::Conv3d(2, 2, 3); }, {x3});
  c.add<nn::ConvTranspose1d>("ConvTranspose1d", [] { return nn::ConvTranspose1d(3, 2, 2); }, {x1});
  c.add<nn::ConvTranspose2d>("ConvTranspose2d", [] { return nn::ConvTranspose2d(3, 2, 2); }, {x2});
  c.add<nn::ConvTranspose3d>("ConvTranspose3d", [] { return nn::ConvTranspose3d(2, 2, 2); }, {x3});
  // Pooling.
  c.add<nn::AvgPool1d>("AvgPool1d", [] { return nn::AvgPool1d(2); }, {x1});
  c.add<nn::AvgPool2d>("AvgPool2d", [] { return nn::AvgPool2d(2); }, {x2});
  c.add<nn::AvgPool3d>("AvgPool3d", [] { return nn::AvgPool3d(2); }, {x3});
  c.add<nn::MaxPool1d>("MaxPool1d", [] { return nn::MaxPool1d(2); }, {x1});
  c.add<nn::MaxPool2d>("MaxPool2d", [] { return nn::MaxPool2d(2); }, {x2});
  c.add<nn::MaxPool3d>("MaxPool3d", [] { return nn::MaxPool3d(2); }, {x3});
  c.add<nn::AdaptiveAvgPool1d>("AdaptiveAvgPool1d", [] { return nn::AdaptiveAvgPool1d(2); }, {x1});
  c.add<nn::AdaptiveAvgPool2d>("AdaptiveAvgPool2d", [] { return nn::AdaptiveAvgPool2d(2); }, {x2});
  c.add<nn::AdaptiveAvgPool3d>("AdaptiveAvgPool3d", [] { return nn::AdaptiveAvgPool3d(2); }, {x3});
  c.add<nn::AdaptiveMaxPool1d>("AdaptiveMaxPool1d", [] { return nn::AdaptiveMaxPool1d(2); }, {x1});
  c.add<nn::AdaptiveMaxPool2d>("AdaptiveMaxPool2d", [] { return nn::AdaptiveMaxPool2d(2); }, {x2});
  c.add<nn::AdaptiveMaxPool3d>("AdaptiveMaxPool3d", [] { return nn::AdaptiveMaxPool3d(2); }, {x3});
  c.add<nn::LPPool1d>("LPPool1d", [] { return nn::LPPool1d(2, 2); }, {x1});
  c.add<nn::LPPool2d>("LPPool2d", [] { return nn::LPPool2d(2, 2); }, {x2});
  c.add<nn::FractionalMaxPool2d>(
       "FractionalMaxPool2d",
       [] { return nn::FractionalMaxPool2d(nn::FractionalMaxPool2dOptions(2).output_size(3)); },
       {x2})
      .refused(LayerCase::Refused::kAtLoad,
               "{name}.pt2: node %fractional_max_pool2d calls aten::fractional_max_pool2d, which a "
               "loaded program may not run: ATen does "
               "not check that its samples lie in [0, 1), so a file could make it read outside "
               "its input");
  c.add<nn::FractionalMaxPool3d>(
       "FractionalMaxPool3d",
       [] { return nn::FractionalMaxPool3d(nn::FractionalMaxPool3dOptions(2).output_size(2)); },
       {x3})
      .refused(LayerCase::Refused::kAtLoad,
               "{name}.pt2: node %fractional_max_pool3d calls aten::fractional_max_pool3d, which a "
               "loaded program may not run: ATen does "
               "not check that its samples lie in [0, 1), so a file could make it read outside "
               "its input");
  {
    auto [v1, i1] = pooled(nn::MaxPool1d(2), seq);
    c.add<nn::MaxUnpool1d>("MaxUnpool1d", [] { return nn::MaxUnpool1d(2); }, {v1, i1});
    auto [v2, i2] = pooled(nn::MaxPool2d(2), image);
    c.add<nn::MaxUnpool2d>("MaxUnpool2d", [] { return nn::MaxUnpool2d(2); }, {v2, i2});
    auto [v3, i3] = pooled(nn::MaxPool3d(2), volume);
    c.add<nn::MaxUnpool3d>("MaxUnpool3d", [] { return nn::MaxUnpool3d(2); }, {v3, i3});
  }
  // Padding.
  c.add<nn::ConstantPad1d>("ConstantPad1d", [] { return nn::ConstantPad1d(1, 0.5); }, {x1});
  c.add<nn::ConstantPad2d>("ConstantPad2d", [] { return nn::ConstantPad2d(1, 0.5); }, {x2});
  c.add<nn::ConstantPad3d>("ConstantPad3d", [] { return nn::ConstantPad3d(1, 0.5); }, {x3});
  c.add<nn::ReflectionPad1d>("ReflectionPad1d", [] { return nn::ReflectionPad1d(1); }, {x1});
  c.add<nn::ReflectionPad2d>("ReflectionPad2d", [] { return nn::ReflectionPad2d(1); }, {x2});
  c.add<nn::ReflectionPad3d>("ReflectionPad3d", [] { return nn::ReflectionPad3d(1); }, {x3});
  c.add<nn::ReplicationPad1d>("ReplicationPad1d", [] { return nn::ReplicationPad1d(1); }, {x1});
  c.add<nn::ReplicationPad2d>("ReplicationPad2d", [] { return nn::ReplicationPad2d(1); }, {x2});
  c.add<nn::ReplicationPad3d>("ReplicationPad3d", [] { return nn::ReplicationPad3d(1); }, {x3});
  c.add<nn::ZeroPad2d>("ZeroPad2d", [] { return nn::ZeroPad2d(1); }, {x2});
  // Dropout.
  c.both<nn::Dropout>("Dropout", [] { return nn::Dropout(0.5); }, {x2});
  c.both<nn::Dropout2d>("Dropout2d", [] { return nn::Dropout2d(0.5); }, {x2});
  c.both<nn::Dropout3d>("Dropout3d", [] { return nn::Dropout3d(0.5); }, {x3});
  c.both<nn::AlphaDropout>("AlphaDropout", [] { return nn::AlphaDropout(0.5); }, {x2});
  c.both<nn::FeatureAlphaDropout>("FeatureAlphaDropout",
                                  [] { return nn::FeatureAlphaDropout(0.5); }, {x2});
  // Linear, embedding, shape.
  c.add<nn::Identity>("Identity", [] { return nn::Identity(); }, {x2});
  c.add<nn::Linear>("Linear", [] { return nn::Linear(6, 3); }, {flat});
  c.add<nn::Bilinear>("Bilinear", [] { return nn::Bilinear(6, 4, 3); },
                      {normal("a", {6}), normal("b", {4})});
  c.add<nn::Embedding>("Embedding", [] { return nn::Embedding(10, 3); }, {classes("x", 10, {4})});
  c.add<nn::EmbeddingBag>("EmbeddingBag", [] { return nn::EmbeddingBag(10, 3); },
                          {classes("x", 10, {4})});
  c.add<nn::Flatten>("Flatten", [] { return nn::Flatten(); }, {x2});
  c.add<nn::Unflatten>("Unflatten",
                       [] {
                         return nn::Unflatten(1, std::vector<int64_t>{2, 3});
                       },
                       {flat});
  c.add<nn::Fold>("Fold",
                  [] {
                    return nn::Fold(nn::FoldOptions({4, 5}, {2, 2}));
                  },
                  {normal("x", {12, 12})});
  c.add<nn::Unfold>("Unfold", [] { return nn::Unfold(nn::UnfoldOptions({2, 2})); }, {x2});
  c.add<nn::PixelShuffle>("PixelShuffle", [] { return nn::PixelShuffle(2); },
                          {normal("x", {4, 3, 3})});
  c.add<nn::PixelUnshuffle>("PixelUnshuffle", [] { return nn::PixelUnshuffle(2); }, {x2});
  c.add<nn::Upsample>(
      "Upsample nearest",
      [] {
        return nn::Upsample(nn::UpsampleOptions().scale_factor(std::vector<double>{2, 2}));
      },
      {x2});
  c.add<nn::Upsample>("Upsample bilinear",
                      [] {
                        return nn::Upsample(nn::UpsampleOptions()
                                                .size(std::vector<int64_t>{9, 9})
                                                .mode(torch::kBilinear)
                                                .align_corners(false));
                      },
                      {x2});
  c.add<nn::CosineSimilarity>("CosineSimilarity", [] { return nn::CosineSimilarity(); },
                              {normal("a", {6}), normal("b", {6})});
  c.add<nn::PairwiseDistance>("PairwiseDistance", [] { return nn::PairwiseDistance(); },
                              {normal("a", {6}), normal("b", {6})});
  // Recurrent layers, batch first: their state `[layers, batch, hidden]` has the batch on
  // dim 1, so the TensorDict has no batch dims (see "recurrent state under a batch").
  const auto steps = normal("x", {5, 4});
  c.both<nn::RNN>(
      "RNN", [] { return nn::RNN(nn::RNNOptions(4, 3).batch_first(true)); }, {steps}, {"y", "h"},
      false);
  c.both<nn::GRU>(
      "GRU", [] { return nn::GRU(nn::GRUOptions(4, 3).batch_first(true)); }, {steps}, {"y", "h"},
      false);
  c.both<nn::LSTM>(
      "LSTM",
      [] { return nn::LSTM(nn::LSTMOptions(4, 3).num_layers(2).dropout(0.5).batch_first(true)); },
      {steps}, {"y", "h", "c"}, false);
  c.add<nn::LSTM>(
      "LSTM with state", [] { return nn::LSTM(nn::LSTMOptions(4, 3).batch_first(true)); },
      {steps, state("h0", 1, 3), state("c0", 1, 3)}, {"y", "h", "c"}, false);
  c.add<nn::GRU>(
      "GRU with state", [] { return nn::GRU(nn::GRUOptions(4, 3).batch_first(true)); },
      {steps, state("h0", 1, 3)}, {"y", "h"}, false);
  c.add<nn::RNNCell>("RNNCell", [] { return nn::RNNCell(4, 3); }, {normal("x", {4})});
  c.add<nn::GRUCell>("GRUCell", [] { return nn::GRUCell(4, 3); },
                     {normal("x", {4}), normal("h0", {3})});
  c.add<nn::LSTMCell>("LSTMCell", [] { return nn::LSTMCell(4, 3); },
                      {normal("x", {4}), normal("h0", {3}), normal("c0", {3})}, {"h", "c"});
  // Transformers: sequence first.
  const auto src = sequence_first("src", 5, {6}), tgt = sequence_first("tgt", 4, {6});
  c.both<nn::TransformerEncoderLayer>(
      "TransformerEncoderLayer",
      [] {
        return nn::TransformerEncoderLayer(
            nn::TransformerEncoderLayerOptions(6, 2).dim_feedforward(8));
      },
      {src}, {"y"}, false);
  c.both<nn::TransformerDecoderLayer>(
      "TransformerDecoderLayer",
      [] {
        return nn::TransformerDecoderLayer(
            nn::TransformerDecoderLayerOptions(6, 2).dim_feedforward(8));
      },
      {tgt, src}, {"y"}, false);
  c.add<nn::TransformerEncoder>(
      "TransformerEncoder",
      [] {
        return nn::TransformerEncoder(nn::TransformerEncoderOptions(
            nn::TransformerEncoderLayerOptions(6, 2).dim_feedforward(8), 2));
      },
      {src}, {"y"}, false);
  c.add<nn::TransformerDecoder>(
      "TransformerDecoder",
      [] {
        return nn::TransformerDecoder(nn::TransformerDecoderOptions(
            nn::TransformerDecoderLayerOptions(6, 2).dim_feedforward(8), 2));
      },
      {tgt, src}, {"y"}, false);
  c.both<nn::Transformer>(
      "Transformer",
      [] { return nn::Transformer(nn::TransformerOptions(6, 2, 1, 1).dim_feedforward(8)); },
      {src, tgt}, {"y"}, false);
  // Losses: a scalar each, so the TensorDict has no batch dims.
  const auto logits = normal("x", {5});
  const auto target = normal("t", {5});
  c.add<nn::BCELoss>(
      "BCELoss", [] { return nn::BCELoss(); },
      {uniform("x", {5}, 0.05, 0.95), uniform("t", {5}, 0, 1)}, {"y"}, false);
  c.add<nn::BCEWithLogitsLoss>(
      "BCEWithLogitsLoss", [] { return nn::BCEWithLogitsLoss(); },
      {logits, uniform("t", {5}, 0, 1)}, {"y"}, false);
  c.add<nn::CrossEntropyLoss>(
      "CrossEntropyLoss", [] { return nn::CrossEntropyLoss(); }, {logits, classes("t", 5)}, {"y"},
      false);
  c.add<nn::NLLLoss>(
      "NLLLoss", [] { return nn::NLLLoss(); }, {logits, classes("t", 5)}, {"y"}, false);
  c.add<nn::MultiMarginLoss>(
      "MultiMarginLoss", [] { return nn::MultiMarginLoss(); }, {logits, classes("t", 5)}, {"y"},
      false);
  c.add<nn::MultiLabelMarginLoss>(
      "MultiLabelMarginLoss", [] { return nn::MultiLabelMarginLoss(); },
      {logits, classes("t", 5, {5})}, {"y"}, false);
  c.add<nn::MultiLabelSoftMarginLoss>(
      "MultiLabelSoftMarginLoss", [] { return nn::MultiLabelSoftMarginLoss(); },
      {logits, classes("t", 2, {5})}, {"y"}, false);
  c.add<nn::MSELoss>(
      "MSELoss", [] { return nn::MSELoss(); }, {logits, target}, {"y"}, false);
  c.add<nn::L1Loss>(
      "L1Loss", [] { return nn::L1Loss(); }, {logits, target}, {"y"}, false);
  c.add<nn::HuberLoss>(
      "HuberLoss", [] { return nn::HuberLoss(); }, {logits, target}, {"y"}, false);
  c.add<nn::SmoothL1Loss>(
      "SmoothL1Loss", [] { return nn::SmoothL1Loss(); }, {logits, target}, {"y"}, false);
  c.add<nn::KLDivLoss>(
      "KLDivLoss", [] { return nn::KLDivLoss(); }, {logits, uniform("t", {5}, 0.1, 1)}, {"y"},
      false);
  c.add<nn::PoissonNLLLoss>(
      "PoissonNLLLoss", [] { return nn::PoissonNLLLoss(); }, {logits, uniform("t", {5}, 0, 3)},
      {"y"}, false);
  c.add<nn::SoftMarginLoss>(
      "SoftMarginLoss", [] { return nn::SoftMarginLoss(); }, {normal("x", {}), signs("t")}, {"y"},
      false);
  c.add<nn::HingeEmbeddingLoss>(
      "HingeEmbeddingLoss", [] { return nn::HingeEmbeddingLoss(); }, {normal("x", {}), signs("t")},
      {"y"}, false);
  c.add<nn::MarginRankingLoss>(
      "MarginRankingLoss", [] { return nn::MarginRankingLoss(); },
      {normal("a", {}), normal("b", {}), signs("t")}, {"y"}, false);
  c.add<nn::CosineEmbeddingLoss>(
      "CosineEmbeddingLoss", [] { return nn::CosineEmbeddingLoss(); },
      {normal("a", {5}), normal("b", {5}), signs("t")}, {"y"}, false);
  c.add<nn::TripletMarginLoss>(
      "TripletMarginLoss", [] { return nn::TripletMarginLoss(); },
      {normal("a", {5}), normal("p", {5}), normal("n", {5})}, {"y"}, false);
  c.add<nn::TripletMarginWithDistanceLoss>(
      "TripletMarginWithDistanceLoss", [] { return nn::TripletMarginWithDistanceLoss(); },
      {normal("a", {5}), normal("p", {5}), normal("n", {5})}, {"y"}, false);
  c.add<nn::CTCLoss>(
       "CTCLoss", [] { return nn::CTCLoss(); },
       {{"log_probs",
         [](int64_t batch) {
           return at::randn({6, batch, 4}).log_softmax(2);
         }},
        {"targets",
         [](int64_t batch) {
           return at::randint(1, 4, {batch, 3});
         }},
        {"input_lengths", [](int64_t batch) { return at::full({batch}, 6, at::kLong); }},
        {"target_lengths", [](int64_t batch) { return at::full({batch}, 3, at::kLong); }}},
       {"y"}, false)
      .refused(LayerCase::Refused::kAtLoad,
               "{name}.pt2: node %ctc_loss calls aten::ctc_loss.Tensor, which a loaded program "
               "may not run: ATen does not check its target classes or lengths against "
               "log_probs, so a file could make it read outside them");
  // AdaptiveLogSoftmaxWithLoss: its forward computes the loss as a C++ double, so it is
  // refused; a module calling its log_prob traces.
  c.add<nn::AdaptiveLogSoftmaxWithLoss>(
       "AdaptiveLogSoftmaxWithLoss",
       [] {
         return nn::AdaptiveLogSoftmaxWithLoss(
             nn::AdaptiveLogSoftmaxWithLossOptions(6, 8, {4}).div_value(2.));
       },
       {flat, classes("t", 8)}, {"y", "loss"}, false)
      .refused(LayerCase::Refused::kAtTrace,
               "{module}: LibTorch's {where} turns a traced tensor into a C++ value "
               "(aten::item) in its forward; tdfx guards only the query/key/value comparisons "
               "of attention. Trace a module that calls its log_prob(input) instead (and "
               "computes the loss from it with at::nll_loss)");
  c.add<LogProb>("AdaptiveLogSoftmaxWithLoss log_prob", [] { return LogProb(); }, {flat});
  // Containers without a forward, in a user module only (both forms are the same module).
  c.add<ContainersNet>("ModuleList, ModuleDict, ParameterList, ParameterDict",
                       [] { return ContainersNet(); }, {flat});
  // Containers with a forward.
  c.add<nn::Sequential>("Sequential", [] { return nn::Sequential(nn::Linear(6, 4), nn::ReLU()); },
                        {flat});
  c.add<nn::Functional>("Functional", [] { return nn::Functional(at::relu); }, {flat});
  return c.take();
}

inline TensorDict inputs_at(const LayerCase& layer, int64_t batch) {
  at::manual_seed(batch);
  TensorDict td(layer.batched ? std::vector<int64_t>{batch} : std::vector<int64_t>{});
  for (const Input& input : layer.inputs) {
    if (!td.contains(input.key)) td.set(input.key, input.make(batch));
  }
  return td;
}

inline std::vector<at::Tensor> outputs_of(const LayerCase& layer, const TensorDict& td) {
  std::vector<at::Tensor> out;
  for (const std::string& key : layer.outputs) out.push_back(td.get(key));
  return out;
}

inline std::vector<at::Tensor> eager(const LayerCase& layer, TensorDictModuleBase& module,
                                     const TensorDict& td) {
  TensorDict work(td);
  at::manual_seed(11);
  module.forward(work);
  return outputs_of(layer, work);
}

inline void check_equal(const std::vector<at::Tensor>& actual,
                        const std::vector<at::Tensor>& expected, const std::string& what) {
  CAPTURE(what);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    CAPTURE(i);
    CHECK(actual[i].sizes() == expected[i].sizes());
    CHECK(at::equal(actual[i], expected[i]));
  }
}

inline std::vector<std::pair<std::string, at::Tensor>> program_inputs(const LayerCase& layer,
                                                                      const TensorDict& td) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  std::set<std::string> seen;
  for (const Input& input : layer.inputs) {
    if (seen.insert(input.key).second) named.emplace_back(input.key, td.get(input.key));
  }
  return named;
}

inline constexpr int64_t kBatch = 4;

}  // namespace tdfx::testing::nn_layers
