#include "tdfx/tracer/builtin_layers.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/nn/modules/conv.h>

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>

#include "tdfx/tracer/module_tree.h"

namespace tdfx {

bool is_builtin_leaf(const torch::nn::Module& module) {
  // Module::name() is the C++ class, `torch::nn::SequentialImpl` behind TORCH_MODULE. A
  // Functional holds user code, which is traced through as a lambda's would be.
  static const std::set<std::string> containers = {
      "torch::nn::SequentialImpl",    "torch::nn::ModuleListImpl",    "torch::nn::ModuleDictImpl",
      "torch::nn::ParameterListImpl", "torch::nn::ParameterDictImpl", "torch::nn::FunctionalImpl"};
  return detail::is_torch_nn(module) && containers.count(module.name()) == 0;
}

namespace detail {

bool is_torch_nn(const torch::nn::Module& module) {
  return module.name().rfind("torch::nn::", 0) == 0;
}

bool records_its_op(const torch::nn::Module& module, const std::vector<torch::jit::Node*>& nodes) {
  static const std::unordered_map<std::string, std::vector<std::string>> ops = [] {
    std::unordered_map<std::string, std::vector<std::string>> table = {
        {"Linear", {"addmm", "matmul", "mm", "linear"}},
        {"Bilinear", {"bilinear"}},
        {"Embedding", {"embedding"}},
        {"EmbeddingBag", {"embedding_bag", "_embedding_bag"}},
        {"LayerNorm", {"layer_norm"}},
        {"GroupNorm", {"group_norm"}},
        {"PReLU", {"prelu"}},
        {"LSTM", {"lstm"}},
        {"GRU", {"gru"}},
        {"RNN", {"rnn_tanh", "rnn_relu"}},
    };
    for (const char* d : {"1d", "2d", "3d"}) {
      table[std::string("Conv") + d] = {"_convolution", "convolution"};
      table[std::string("ConvTranspose") + d] = {"_convolution", "convolution"};
      table[std::string("BatchNorm") + d] = {"batch_norm"};
      table[std::string("InstanceNorm") + d] = {"instance_norm"};
    }
    return table;
  }();
  if (!is_torch_nn(module)) return true;  // a declared leaf: any ops
  auto it = ops.find(short_type(module));
  if (it == ops.end()) return true;
  for (const torch::jit::Node* node : nodes) {
    const std::string kind = node->kind().toUnqualString();
    if (std::find(it->second.begin(), it->second.end(), kind) != it->second.end()) return true;
  }
  return false;
}

bool reads_parameters_repeatedly(const torch::nn::Module& module) {
  static const std::set<std::string> types = {"MultiheadAttention",      "TransformerEncoderLayer",
                                              "TransformerDecoderLayer", "TransformerEncoder",
                                              "TransformerDecoder",      "Transformer"};
  return is_torch_nn(module) && types.count(short_type(module)) != 0;
}

int ops_before_parameters(const torch::nn::Module& module) {
  auto pads = [](const auto* conv) {
    return conv && !c10::holds_alternative<torch::enumtype::kZeros>(conv->options.padding_mode());
  };
  const bool padded = pads(dynamic_cast<const torch::nn::Conv1dImpl*>(&module)) ||
                      pads(dynamic_cast<const torch::nn::Conv2dImpl*>(&module)) ||
                      pads(dynamic_cast<const torch::nn::Conv3dImpl*>(&module));
  return padded ? 1 : 0;
}

bool is_recurrent_op(const torch::jit::Node* node) {
  const auto kind = node->kind();
  return (kind == c10::aten::lstm && node->outputs().size() == 3) ||
         ((kind == c10::aten::gru || kind == c10::aten::rnn_tanh || kind == c10::aten::rnn_relu) &&
          node->outputs().size() == 2);
}

std::vector<std::vector<int64_t>> recurrent_paths(const torch::jit::Node* op) {
  if (op->kind() == c10::aten::lstm) return {{0}, {1, 0}, {1, 1}};
  return {{0}, {1}};
}

}  // namespace detail
}  // namespace tdfx
