#include "tdfx/tracer/builtin_layers.h"

#include <c10/util/Exception.h>
#include <c10/util/Type.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/normalization.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx {

namespace {

// What the tracer asks of a module's class, found once per class: a trace asks for every
// module it meets, and a pipeline holds thousands of instances of a few classes.
struct LayerFacts {
  bool torch_nn = false;
  bool builtin_leaf = false;
  bool reads_repeatedly = false;
  bool conv = false;  // Conv1d, Conv2d or Conv3d
  size_t tensor_arguments = 1;
  const std::vector<std::string>* ops = nullptr;
};

const std::vector<std::string>* ops_of(const std::string& layer) {
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
  auto it = ops.find(layer);
  return it == ops.end() ? nullptr : &it->second;
}

// The facts of `module`'s class, by its C++ type: what LibTorch declares in torch::nn (a
// module a user names "torch::nn::…" through Module's constructor is still the user's).
const LayerFacts& facts_of(const torch::nn::Module& module) {
  static std::mutex mutex;
  static std::unordered_map<std::type_index, LayerFacts> known;
  // The facts this thread asked for last: passes ask several questions of one layer in a row,
  // and finding a type in the map hashes its name. The same type_info object is the same type.
  thread_local const std::type_info* last_type = nullptr;
  thread_local const LayerFacts* last_facts = nullptr;
  const std::type_info& info = typeid(module);
  if (&info == last_type) return *last_facts;
  const std::type_index type(info);
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(type);
  if (it != known.end()) {  // references into the map stay valid
    last_type = &info;
    last_facts = &it->second;
    return it->second;
  }
  static const std::set<std::string> containers = {"Sequential",    "ModuleList",    "ModuleDict",
                                                   "ParameterList", "ParameterDict", "Functional"};
  static const std::set<std::string> repeated = {
      "MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer",
      "TransformerEncoder", "TransformerDecoder",      "Transformer"};
  const std::string name = c10::demangle(type.name());
  LayerFacts facts;
  constexpr std::string_view kNamespace = "torch::nn::";
  facts.torch_nn = name.rfind(kNamespace, 0) == 0;
  if (facts.torch_nn) {
    const std::string layer = detail::short_type_of(name);
    facts.builtin_leaf = containers.count(layer) == 0;
    facts.reads_repeatedly = repeated.count(layer) != 0;
    facts.ops = ops_of(layer);
    facts.conv = layer == "Conv1d" || layer == "Conv2d" || layer == "Conv3d";
    // The tensors each forward takes before its optional ones.
    static const std::unordered_map<std::string, size_t> several = {{"MultiheadAttention", 3},
                                                                    {"Bilinear", 2},
                                                                    {"Transformer", 2},
                                                                    {"TransformerDecoderLayer", 2},
                                                                    {"TransformerDecoder", 2}};
    auto arguments = several.find(layer);
    if (arguments != several.end()) facts.tensor_arguments = arguments->second;
  }
  return known.emplace(type, facts).first->second;
}

}  // namespace

bool is_builtin_leaf(const torch::nn::Module& module) { return facts_of(module).builtin_leaf; }

namespace detail {

bool is_torch_nn(const torch::nn::Module& module) { return facts_of(module).torch_nn; }

const std::vector<std::string>* ops_a_call_records(const torch::nn::Module& module) {
  return facts_of(module).ops;  // nullptr for a declared leaf: any ops
}

void refuse_untraceable_layers(const torch::nn::Module& inner,
                               const std::function<std::string()>& subject,
                               const std::string& path) {
  auto untraceable = [](const torch::nn::Module* module) {
    return dynamic_cast<const torch::nn::CrossMapLRN2dImpl*>(module) != nullptr;
  };
  // Paths are made only for the error: every TensorDictModule of a trace is checked.
  bool any = false;
  inner.apply([&](const torch::nn::Module& module) { any = any || untraceable(&module); });
  if (!any) return;
  for (const auto& item : inner.named_modules("", true)) {
    if (!untraceable(item.value().get())) continue;
    std::string at = path;
    if (!item.key().empty()) at += (at.empty() ? "" : ".") + item.key();
    fail<TraceError>(
        "{}: torch::nn::CrossMapLRN2d{} cannot be traced: LibTorch computes it in a custom "
        "autograd function whose forward creates tensors the trace cannot follow. Write the "
        "normalisation with tensor ops in a module of your own (torch::nn::LocalResponseNorm "
        "is a traceable cross-channel normalisation, with a different scaling)",
        subject(), at.empty() ? "" : " at '" + at + "'");
  }
}

bool reads_parameters_repeatedly(const torch::nn::Module& module) {
  return facts_of(module).reads_repeatedly;
}

size_t tensor_arguments(const torch::nn::Module& module) {
  return facts_of(module).tensor_arguments;
}

int ops_before_parameters(const torch::nn::Module& module) {
  if (!facts_of(module).conv) return 0;
  auto pads = [](const auto* conv) {
    return conv && !c10::holds_alternative<torch::enumtype::kZeros>(conv->options.padding_mode());
  };
  const bool padded = pads(dynamic_cast<const torch::nn::Conv1dImpl*>(&module)) ||
                      pads(dynamic_cast<const torch::nn::Conv2dImpl*>(&module)) ||
                      pads(dynamic_cast<const torch::nn::Conv3dImpl*>(&module));
  return padded ? 1 : 0;
}

bool is_recurrent_op(std::string_view op, size_t outputs) {
  return (op == "lstm" && outputs == 3) ||
         ((op == "gru" || op == "rnn_tanh" || op == "rnn_relu") && outputs == 2);
}

std::vector<std::vector<int64_t>> recurrent_paths(std::string_view op) {
  if (op == "lstm") return {{0}, {1, 0}, {1, 1}};
  return {{0}, {1}};
}

namespace {

// The built-in layer whose forward a demangled frame name is (`MultiheadAttention` for
// `torch::nn::MultiheadAttentionImpl::forward(…)`), or "". Containers run user code, so they
// are none.
std::string_view layer_of_frame(std::string_view frame) {
  static const std::set<std::string_view> containers = {
      "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Functional"};
  constexpr std::string_view kNamespace = "torch::nn::";
  constexpr std::string_view kForward = "Impl::forward(";
  if (frame.substr(0, kNamespace.size()) != kNamespace) return {};
  const size_t forward = frame.find(kForward);
  if (forward == std::string_view::npos) return {};
  const std::string_view type = frame.substr(kNamespace.size(), forward - kNamespace.size());
  if (type.find(':') != std::string_view::npos || containers.count(type) != 0) return {};
  return type;
}

}  // namespace

// The LibTorch layer whose forward is running on this thread, found by the names of the
// frames on the stack, the outermost when one runs in another (the layer the user called);
// "" when the code running is the user's.
std::string builtin_layer_on_stack() {
  void* frames[256];
  const int count = backtrace(frames, 256);
  std::string layer;
  for (int i = 0; i < count; ++i) {
    Dl_info info;
    if (dladdr(frames[i], &info) == 0 || info.dli_sname == nullptr) continue;
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(
        abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status), std::free);
    if (status != 0 || !name) continue;
    const std::string_view type = layer_of_frame(name.get());
    if (!type.empty()) layer = std::string(type);
  }
  return layer;
}

// The innermost built-in layer in a LibTorch error's backtrace (`frame #3: torch::nn::…`), the
// one that failed, or "".
std::string failed_layer(const c10::Error& error) {
  const std::string& text = error.backtrace();
  for (size_t line = 0; line < text.size();) {
    size_t end = text.find('\n', line);
    if (end == std::string::npos) end = text.size();
    std::string_view frame(text.data() + line, end - line);
    const size_t colon = frame.find(": ");
    if (frame.rfind("frame #", 0) == 0 && colon != std::string_view::npos) {
      const std::string_view type = layer_of_frame(frame.substr(colon + 2));
      if (!type.empty()) return std::string(type);
    }
    line = end + 1;
  }
  return "";
}

}  // namespace detail
}  // namespace tdfx
