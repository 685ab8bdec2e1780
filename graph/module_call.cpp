#include "tdfx/graph/module_call.h"

#include <torch/nn/functional.h>  // modules.h uses it without including it
#include <torch/nn/modules.h>

#include "tdfx/core/error.h"

namespace tdfx::detail {
namespace {

std::shared_ptr<torch::nn::Module> submodule(const std::shared_ptr<torch::nn::Module>& root,
                                             const std::string& path, const Node& node) {
  if (!root) fail<GraphError>("call_module %{}: the graph module has no root module", node.name());
  if (path.empty()) return root;
  for (const auto& item : root->named_modules("", /*include_self=*/false)) {
    if (item.key() == path) return item.value();
  }
  fail<GraphError>("call_module %{}: the root module has no submodule '{}'", node.name(), path);
}

template <typename Impl>
LeafCall unary(std::shared_ptr<Impl> module, const Node& node) {
  if (node.args().size() != 1) {
    fail<GraphError>("call_module %{}: {} takes 1 tensor, the node passes {}", node.name(),
                     module->name(), node.args().size());
  }
  return [module](std::vector<c10::IValue>& args) -> c10::IValue {
    return module->forward(args[0].toTensor());
  };
}

template <typename Impl>
LeafCall binary(std::shared_ptr<Impl> module, const Node& node) {
  if (node.args().size() != 2) {
    fail<GraphError>("call_module %{}: {} takes 2 tensors, the node passes {}", node.name(),
                     module->name(), node.args().size());
  }
  return [module](std::vector<c10::IValue>& args) -> c10::IValue {
    return module->forward(args[0].toTensor(), args[1].toTensor());
  };
}

}  // namespace

// The layers whose forward takes one tensor and returns one (a Sequential of them too): a
// table of names, kept in rows.
// clang-format off
#define TDFX_UNARY_LAYERS(X)                                                                     \
  X(Linear) X(Identity) X(Flatten) X(Unflatten) X(Conv1d) X(Conv2d) X(Conv3d)                  \
  X(ConvTranspose1d) X(ConvTranspose2d) X(ConvTranspose3d) X(BatchNorm1d) X(BatchNorm2d)        \
  X(BatchNorm3d) X(InstanceNorm1d) X(InstanceNorm2d) X(InstanceNorm3d) X(LayerNorm)             \
  X(GroupNorm) X(LocalResponseNorm) X(CrossMapLRN2d) X(Embedding) X(EmbeddingBag) X(Dropout)    \
  X(Dropout2d) X(Dropout3d) X(AlphaDropout) X(FeatureAlphaDropout) X(ELU) X(SELU)                \
  X(Hardshrink) X(Hardtanh) X(LeakyReLU) X(LogSigmoid) X(Softmax) X(Softmin) X(LogSoftmax)      \
  X(Softmax2d) X(PReLU) X(ReLU) X(ReLU6) X(RReLU) X(CELU) X(GLU) X(GELU) X(SiLU) X(Mish)         \
  X(Sigmoid) X(Softplus) X(Softshrink) X(Softsign) X(Tanh) X(Tanhshrink) X(Threshold)           \
  X(AvgPool1d) X(AvgPool2d) X(AvgPool3d) X(MaxPool1d) X(MaxPool2d) X(MaxPool3d)                 \
  X(AdaptiveAvgPool1d) X(AdaptiveAvgPool2d) X(AdaptiveAvgPool3d) X(AdaptiveMaxPool1d)           \
  X(AdaptiveMaxPool2d) X(AdaptiveMaxPool3d) X(LPPool1d) X(LPPool2d) X(ReflectionPad1d)          \
  X(ReflectionPad2d) X(ReflectionPad3d) X(ReplicationPad1d) X(ReplicationPad2d)                 \
  X(ReplicationPad3d) X(ZeroPad2d) X(ConstantPad1d) X(ConstantPad2d) X(ConstantPad3d)           \
  X(PixelShuffle) X(PixelUnshuffle) X(Upsample) X(Fold) X(Unfold) X(Sequential)

// clang-format on

// The layers whose forward takes two tensors and returns one.
#define TDFX_BINARY_LAYERS(X) X(CosineSimilarity) X(PairwiseDistance) X(Bilinear)

LeafCall module_call(const std::shared_ptr<torch::nn::Module>& root, const std::string& path,
                     const Node& node) {
  const auto module = submodule(root, path, node);
#define TDFX_TRY_UNARY(Name) \
  if (auto m = std::dynamic_pointer_cast<torch::nn::Name##Impl>(module)) return unary(m, node);
#define TDFX_TRY_BINARY(Name) \
  if (auto m = std::dynamic_pointer_cast<torch::nn::Name##Impl>(module)) return binary(m, node);
  TDFX_UNARY_LAYERS(TDFX_TRY_UNARY)
  TDFX_BINARY_LAYERS(TDFX_TRY_BINARY)
#undef TDFX_TRY_UNARY
#undef TDFX_TRY_BINARY
  fail<GraphError>(
      "call_module %{}: '{}' is a {}, which has no body graph and is not a built-in layer tdfx "
      "can call; record the call with the tracer, or override Interpreter::call_module",
      node.name(), path, module->name());
}

}  // namespace tdfx::detail
